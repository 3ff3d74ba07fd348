"""The PyYAML / tqdm stand-ins of the GPU benchmark (priorlab.minimal_deps): the profiles parse to
exactly what PyYAML gives, with YAML 1.1's scalar rules; the unsupported is refused, not guessed."""

from pathlib import Path

import pytest
import yaml

from priorlab import minimal_deps

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", sorted((ROOT / "profiles").glob("*.yaml")) + [ROOT / "params.yaml"],
                         ids=lambda p: p.name)
def test_profiles_parse_as_pyyaml_parses_them(path):
    text = path.read_text()
    assert minimal_deps.safe_load(text) == yaml.safe_load(text)


def test_scalars_follow_yaml_1_1():
    text = ("a: 1e-4\nb: 1.0e-4\nc: 0.0001\nd: yes\ne: ~\nf: 'x # y'\ng: \"q\"\nh: -3\ni: .inf\nj: 1_000\n"
            "k: [1, [2.2, 5], {p: 2}]  # c\nl:\n  m: {x: 1,\n      y: [a, b]}\n  n:\no: a:b\n")
    assert minimal_deps.safe_load(text) == yaml.safe_load(text)


@pytest.mark.parametrize("text", ["a:\n  - 1\n  - 2\n", "a: |\n  x\n", "a: &x 1\n", "a: [1, 2\n", "a 1\n"])
def test_unsupported_yaml_is_refused(text):
    with pytest.raises(minimal_deps.YAMLError):
        minimal_deps.safe_load(text)


def test_install_replaces_only_what_is_missing(monkeypatch):
    import sys

    assert minimal_deps.install() == []  # PyYAML and tqdm are installed here
    for name in ("yaml", "tqdm", "tqdm.auto"):
        monkeypatch.setitem(sys.modules, name, None)  # import blocked, as on a machine without them
    assert minimal_deps.install() == ["yaml", "tqdm"]
    import importlib.util

    import tqdm.auto

    assert importlib.util.find_spec("tqdm").origin is None  # what torch's dynamo asks of it

    bar = tqdm.auto.tqdm(total=3, desc="x")
    bar.update(1)
    bar.close()
    assert sys.modules["yaml"].safe_load("a: [1]") == {"a": [1]}
