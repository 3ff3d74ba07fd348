"""Test-session settings (loaded before any test module imports torch)."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see priorlab/__init__.py
