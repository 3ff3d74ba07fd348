"""Test-session settings (loaded before any test module imports torch)."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see priorlab/__init__.py

import pytest  # noqa: E402
import torch  # noqa: E402

# DVC sets up its log handlers when first imported, on the sys.stdout / sys.stderr of that moment.  Imported
# first inside a test that uses capsys, they would write to that test's capture stream, closed after it, and
# every later in-process DVC call of the worker would fail ("I/O operation on closed file"), depending on
# the order of the tests.  Imported here, they hold the session's own capture streams.
import dvc.logger  # noqa: E402,F401


@pytest.fixture(scope="module")
def single_thread():
    """Small tensors: one thread avoids contention on the 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_serial(tmp_path_factory):
    """The tiny profile after one serial run in a git copy of the project (tests/tiny_pipeline.py)."""
    from tests.tiny_pipeline import serial_tiny

    return serial_tiny(tmp_path_factory.mktemp("project"))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which turns the marker into the group
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``make test`` runs two workers), the tests that read the tiny pipeline's serial
    run share one worker, so the session fixture above runs once."""
    for item in items:
        if "tiny_serial" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group("tiny_serial"))
