"""Imports of the library inside functions say why (issue 44): an import of a ``priorlab`` or ``stagerun``
module inside a function hides an arrow of the import graph from a reader, so it stays there only where a
measured start-up cost needs it, and its line says so: ``# lazy: <what it would load>, ~<ms> at import <module>``.
Every other one sits with its module's imports.  ``if TYPE_CHECKING:`` blocks are not imports at run time.

``import priorlab.config`` (params validation; the runner's and ``make repro``'s ``check --once``) stays
without torch."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

from tests.test_stage_deps import ROOT, SRC, _is_type_checking

PACKAGES = ("priorlab", "stagerun")
MARK = "# lazy:"


def _library(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] in PACKAGES for alias in node.names)
    return bool(node.level) or (node.module or "").split(".")[0] in PACKAGES


def function_level_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Imports of the library inside a function (at any depth), not under ``if TYPE_CHECKING:``."""
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if _is_type_checking(node):
            for child in node.orelse:
                visit(child, in_function)
            return
        in_function = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        if in_function and isinstance(node, (ast.Import, ast.ImportFrom)) and _library(node):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child, in_function)

    visit(tree, False)
    return found


def unexplained(source: str) -> list[int]:
    """Line numbers of the function-level library imports in ``source`` without ``# lazy:`` on their lines."""
    lines = source.splitlines()
    return [node.lineno for node in function_level_imports(ast.parse(source))
            if not any(MARK in line for line in lines[node.lineno - 1 : node.end_lineno])]


def test_every_function_level_library_import_says_why():
    found = []
    for package in PACKAGES:
        for path in sorted((SRC / package).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            lines = source.splitlines()
            found += [f"{path.relative_to(ROOT)}:{n}: {lines[n - 1].strip()}" for n in unexplained(source)]
    assert not found, ("library imports inside functions without a '# lazy:' reason (move them to the module's "
                       "imports, or measure what they would load):\n" + "\n".join(found))


def test_the_check_sees_an_unexplained_import():
    source = '''
import priorlab.io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from priorlab.phases import fit_phase


def f():
    import json
    from priorlab.errors import UserError
    from priorlab.phases import (  # lazy: torch, ~2 s at import m
        fit_phase,
    )
    from priorlab.models import (
        build_model,  # lazy: on a later line of the statement
    )
    from . import paths

    def g():
        import stagerun.repro
    return lambda: __import__("priorlab")
'''
    assert unexplained(source) == [11, 18, 21]


def test_params_validation_does_not_import_torch():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", "import sys, priorlab.config; print('torch' in sys.modules)"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
