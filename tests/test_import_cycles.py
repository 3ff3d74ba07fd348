"""The library's imports form no cycle: every import (module level, inside a function, or under
``if TYPE_CHECKING:``, as any cycle finder reads them) is an edge, and importing ``a.b.c`` is also an edge to
the packages ``a.b`` whose ``__init__`` it runs.  A cycle means two modules that cannot be understood,
tested or moved one without the other (issue 25); one kept by a type hint alone is still one (issue 44:
``config`` -> ``metric_registry`` -> ``config`` through ``EvaluateParams``)."""

from __future__ import annotations

from tests.test_stage_deps import SRC, PACKAGE, imported_modules, module_name


def import_graph(type_checking: bool = True) -> dict[str, set[str]]:
    files = sorted((SRC / PACKAGE).rglob("*.py"))
    modules = {module_name(f): f for f in files}
    graph = {}
    for name, path in modules.items():
        edges = set()
        for target in imported_modules(path, type_checking):
            parts = target.split(".")
            for i in range(2, len(parts) + 1):  # the module and the packages whose __init__ it runs
                prefix = ".".join(parts[:i])
                if prefix in modules and prefix != name and not name.startswith(prefix + "."):
                    edges.add(prefix)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_a_package_init_is_an_edge():
    graph = import_graph()
    # priors.lp_nested imports priorlab.config.lp_nested_layout: config's __init__ runs first
    assert "priorlab.config" in graph["priorlab.priors.lp_nested"]
    assert "priorlab.config.lp_nested_layout" in graph["priorlab.priors.lp_nested"]


def test_a_type_hint_import_is_an_edge():
    """``metric_registry`` imports ``data.base`` for a type hint only (under ``if TYPE_CHECKING:``)."""
    assert "priorlab.data.base" in import_graph()["priorlab.metric_registry"]
    assert "priorlab.data.base" not in import_graph(type_checking=False)["priorlab.metric_registry"]


def test_the_library_has_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_likelihoods_and_config_import_no_model():
    graph = import_graph()
    for name in ("priorlab.likelihoods", *(m for m in graph if m.startswith("priorlab.config"))):
        assert not {t for t in graph[name] if t.startswith("priorlab.models")}, name
