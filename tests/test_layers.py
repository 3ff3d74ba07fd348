"""Layers that only point down (issue 44): the README's layout section declares the library's layers once,
lowest first; every import of a library module (module level or inside a function, not under
``if TYPE_CHECKING:``) reaches its own layer or one below.  ``stagerun`` sits above them all
(tests/test_stage_deps.py: priorlab never imports it).  A package's ``__init__`` counts by its own imports
(importing ``data.base`` runs ``data/__init__``, which imports ``data.base`` alone)."""

from __future__ import annotations

import re

from tests.test_stage_deps import PACKAGE, ROOT, SRC, imported_modules, module_name


def declared_layers() -> list[list[str]]:
    """The README's list: ``N name name ...`` groups between "Layers, lowest first" and "then src/stagerun"."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("Layers, lowest first"):]
    block = block[block.index("```") + 3 : block.index("then src/stagerun")]  # the fenced list
    groups = re.split(r"(?:^|\s)\d+\s", " " + " ".join(block.split()))
    return [g.split() for g in groups if g.split()]


def layer_of() -> dict[str, int]:
    """Declared name → its layer (0 = lowest).  A name is a top-level module or package of the library
    (``models``) or a module inside one (``data.base``): a module takes the layer of its longest declared
    prefix."""
    return {name: i for i, names in enumerate(declared_layers()) for name in names}


def layer(module: str, layers: dict[str, int]) -> int:
    parts = module.split(".")[1:]
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in layers:
            return layers[".".join(parts[:n])]
    raise KeyError(f"{module}: no declared layer")


def violations(layers: dict[str, int]) -> list[str]:
    out = []
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        me = module_name(path)
        if me == PACKAGE:
            continue  # the package's __init__ (environment settings; the API imported on first use)
        mine = layer(me, layers)
        for target in sorted(imported_modules(path)):
            if target != PACKAGE and layer(target, layers) > mine:
                out.append(f"{me} imports {target} (layer {layer(target, layers) + 1} above {mine + 1})")
    return out


def test_every_library_module_has_a_declared_layer():
    layers = layer_of()
    for path in (SRC / PACKAGE).rglob("*.py"):
        if module_name(path) != PACKAGE:
            layer(module_name(path), layers)  # raises for a module without one
    assert len(declared_layers()) >= 8 and sum(map(len, declared_layers())) == len(layers)  # each named once


def test_imports_only_point_down():
    found = violations(layer_of())
    assert not found, "imports against the README's layers:\n" + "\n".join(found)


def test_the_check_sees_an_upward_import():
    """Swap two layers in a copy of the declaration: the check then reports the imports between them."""
    layers = layer_of()
    swapped = {**layers, "models": layers["train"], "train": layers["models"]}
    assert any("priorlab.train" in v and "imports priorlab.models" in v for v in violations(swapped))
