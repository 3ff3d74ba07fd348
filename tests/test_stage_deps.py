"""Code dependencies of the DVC stages cannot drift (issue 25): every library file a stage's script
can import — its static import closure, function-level imports included, ``TYPE_CHECKING`` blocks
excluded, a package's ``__init__`` with each of its modules — lies under one of the stage's ``deps``.
A dependency missing from ``dvc.yaml`` means an edit to that file would not rerun the stage.

Every stage depends on ``src/priorlab`` as a whole, through ``models/code.json``, the digest the ``code``
stage writes of it (DVC hashes the folder once per status, not once per stage): each stage kind's closure
already holds 76 to 91 of the library's 101 modules (``pipeline`` dispatches to evaluation, figures and the
report; ``config`` validates against the registries of models, metrics and likelihoods), so narrower folders
would save no reruns today.  The test keeps the choice honest if the deps are narrowed later."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = "priorlab"


def module_file(name: str) -> Path | None:
    """The file that defines module ``name`` (a package's ``__init__.py``), or None outside the library."""
    base = SRC.joinpath(*name.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return base.with_suffix(".py") if base.with_suffix(".py").is_file() else None


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported_modules(path: Path, type_checking: bool = False) -> set[str]:
    """Library modules ``path`` imports anywhere (module level or inside functions), except under
    ``if TYPE_CHECKING:`` (with ``type_checking``: those too); ``from a import b`` counts ``a`` and, when
    it is a module, ``a.b``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path) if path.is_relative_to(SRC) else ""
    if path.is_relative_to(SRC) and path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _is_type_checking(node) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in found if (m == PACKAGE or m.startswith(PACKAGE + ".")) and module_file(m) is not None}


def import_closure(script: Path) -> set[Path]:
    """Every library file importing ``script`` can execute: the transitive closure of
    :func:`imported_modules`, with the ``__init__`` of every enclosing package."""
    todo, seen = list(imported_modules(script)), set()
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__, a/b/__init__ first
            prefix = ".".join(parts[:i])
            if prefix in seen or module_file(prefix) is None:
                continue
            seen.add(prefix)
            todo.extend(imported_modules(module_file(prefix)))
    return {module_file(m) for m in seen}


CODE_STAGE = "code"
"""The stage that digests the library: its outputs stand for its deps in every other stage's deps."""


def stages() -> dict[str, tuple[Path, list[str]]]:
    """dvc.yaml's stages: the script each command runs and the dependency paths without ``${…}``, an
    output of the ``code`` stage read as that stage's deps (the folder it digests)."""
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    code = spec[CODE_STAGE]
    out = {}
    for name, stage in spec.items():
        body = stage.get("do", stage)
        words = body["cmd"].split()
        script = next(w for w in words if w.endswith(".py"))
        deps = []
        for d in body.get("deps", []):
            if "${" not in str(d):
                deps += code["deps"] if d in code["outs"] and name != CODE_STAGE else [d]
        out[name] = (ROOT / script, deps)
    return out


def test_every_stage_but_code_reaches_the_library_through_its_digest():
    """The folder is hashed by one stage: any other stage naming ``src/priorlab`` itself would bring back
    a hash of the whole library per stage in every plain ``dvc status``."""
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert spec[CODE_STAGE]["deps"] == ["stages/code.py", "src/priorlab"]
    assert spec[CODE_STAGE]["outs"] == ["models/code.json"]
    for name, stage in spec.items():
        if name != CODE_STAGE:
            deps = stage.get("do", stage).get("deps", [])
            assert "models/code.json" in deps and not any(str(d).startswith("src") for d in deps), name


def test_the_lock_pairs_the_library_with_its_digest(tmp_path):
    """Where ``dvc.lock``'s hash of ``src/priorlab`` is the library's, its ``models/code.json`` must be the digest
    the ``code`` stage writes of it.  A record without rerunning ``code`` after a library edit paired the new
    library with the old digest: the lock looked up to date here, and a fresh clone reran every stage."""
    import hashlib

    from dvc.repo import Repo

    from priorlab.io import write_json
    from priorlab.pipeline import code_record

    with Repo(str(ROOT)) as repo:  # no repository lock: only reads
        (stage,) = repo.stage.collect(CODE_STAGE)
        if any(dep.status() for dep in stage.deps):
            pytest.skip("the library changed since dvc.lock was recorded (dvc status says so)")
        recorded = stage.outs[0].hash_info.value
    write_json(tmp_path / "code.json", code_record(ROOT))
    assert hashlib.md5((tmp_path / "code.json").read_bytes()).hexdigest() == recorded, \
        "dvc.lock records an old digest of the library: run `python stages/code.py`, then record"


def test_the_digest_lists_the_files_dvc_hashes_and_changes_with_any_of_them(tmp_path):
    """``io.tree_digest`` leaves out what ``.dvcignore`` does (a byte-compiled file, an egg-info folder), so
    it changes exactly when DVC's hash of the folder does: on an edit, a new file or a removed one."""
    from dvc.fs import LocalFileSystem
    from dvc.ignore import DvcIgnoreFilter

    from priorlab.io import tree_digest

    lib = tmp_path / "src" / "lib"
    (lib / "sub" / "__pycache__").mkdir(parents=True)
    (lib / "x.egg-info").mkdir()
    (lib / "a.py").write_text("a = 1\n")
    (lib / "sub" / "b.py").write_text("b = 2\n")
    (lib / "sub" / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"\0")
    (lib / "stray.pyc").write_bytes(b"\0")
    (lib / "x.egg-info" / "PKG-INFO").write_text("x\n")
    (tmp_path / ".dvcignore").write_text((ROOT / ".dvcignore").read_text())
    fs = LocalFileSystem()
    dvc_files = sorted(Path(p).relative_to(lib).as_posix() for p in DvcIgnoreFilter(fs, str(tmp_path)).find(fs, str(lib)))
    digest = tree_digest(lib)
    assert list(digest) == dvc_files == ["a.py", "sub/b.py"]
    (lib / "stray.pyc").write_bytes(b"\1")  # ignored by both
    assert tree_digest(lib) == digest
    for change in (lambda: (lib / "a.py").write_text("a = 2\n"), lambda: (lib / "c.py").write_text(""),
                   lambda: (lib / "sub" / "b.py").unlink()):
        before = tree_digest(lib)
        change()
        assert tree_digest(lib) != before
    with pytest.raises(FileNotFoundError, match="folder not found"):
        tree_digest(tmp_path / "nowhere")


def uncovered(files: set[Path], deps: list[str]) -> list[str]:
    roots = [(ROOT / d).resolve() for d in deps]
    return sorted(str(f.relative_to(ROOT)) for f in files
                  if not any(f.resolve() == r or r in f.resolve().parents for r in roots))


def test_the_closure_walker_sees_lazy_and_relative_imports_and_skips_type_checking(tmp_path):
    vae = import_closure(SRC / PACKAGE / "models" / "vae.py")
    assert SRC / PACKAGE / "models" / "elbo.py" in vae and SRC / PACKAGE / "models" / "__init__.py" in vae
    # likelihoods imports LossScaling only for annotations: not a run-time dependency of it
    assert "priorlab.models.elbo" not in imported_modules(SRC / PACKAGE / "likelihoods.py")
    # a function-level import counts (the sparse VAE aggregate imports its real-data module inside a function)
    assert "priorlab.studies.sparse_vae_experiments.real" in imported_modules(
        SRC / PACKAGE / "studies" / "sparse_vae_experiments" / "aggregate.py")
    assert uncovered({SRC / PACKAGE / "io.py"}, ["src/priorlab"]) == []
    assert uncovered({SRC / PACKAGE / "io.py"}, ["src/priorlab/io"]) == ["src/priorlab/io.py"]


@pytest.mark.parametrize("name", sorted(stages()))
def test_every_library_file_a_stage_can_import_is_one_of_its_deps(name):
    script, deps = stages()[name]
    assert script.is_file(), f"{name}: {script} does not exist"
    assert str(script.relative_to(ROOT)) in deps, f"{name}: its own script is not a dep"
    missing = uncovered(import_closure(script), deps)
    assert not missing, f"dvc.yaml stage {name} imports these files but does not depend on them: {missing}"


def test_every_grid_dvc_expands_is_named_and_must_be_spelled_out(tmp_path):
    """DVC expands foreach / matrix params from the raw file: DVC_GRIDS lists exactly those of dvc.yaml,
    and a profile without one is refused by the loader in one line (not by DVC's parser mid-repro)."""
    import re

    import yaml

    from priorlab.config import DVC_GRIDS, ParamsError, load_params

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    used = set()
    for spec in stages.values():
        sources = [spec["foreach"]] if "foreach" in spec else list(spec.get("matrix", {}).values())
        used |= {m for src in sources for m in re.findall(r"\$\{([^}]+)\}", str(src))}
    assert used == set(DVC_GRIDS)
    raw = yaml.safe_load((ROOT / "profiles" / "tiny.yaml").read_text())
    del raw["sparse_vae_study"]["movielens_ablations"]
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ParamsError, match="sparse_vae_study.movielens_ablations: missing"):
        load_params(tmp_path / "p.yaml")


def test_every_tracked_param_names_the_file_that_holds_its_section():
    """dvc.yaml tracks each key in the file ``config.SECTION_FILES`` puts its section in (``params.yaml``
    for the rest), and reads every section file as ``vars``: a key named in the wrong file would be a
    param DVC cannot find."""
    from priorlab.config import PARAMS_FILE, SECTION_FILES

    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    assert spec["vars"] == list(dict.fromkeys(SECTION_FILES.values()))
    tracked = 0
    for name, stage in spec["stages"].items():
        for entry in stage.get("do", stage).get("params", []):
            for file, keys in (entry.items() if isinstance(entry, dict) else [(PARAMS_FILE, [entry])]):
                for key in keys:
                    assert SECTION_FILES.get(key.split(".")[0], PARAMS_FILE) == file, (name, file, key)
                    tracked += 1
    assert tracked > 50


def test_every_distribution_the_library_imports_is_declared_and_pinned():
    """issue 44: each third-party module priorlab or stagerun imports (at module level or inside a function)
    comes from a distribution declared in pyproject.toml (dependencies or an extra) and pinned in
    requirements.txt."""
    import ast
    import importlib.metadata as md
    import re
    import sys

    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        pytest.skip("tomllib needs Python 3.11")
    names = set()
    for f in (ROOT / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    third = sorted(n for n in names if n not in sys.stdlib_module_names and n not in ("priorlab", "stagerun"))
    dists = md.packages_distributions()

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] + [d for extra in project.get("optional-dependencies", {}).values() for d in extra]
    declared = {norm(re.split(r"[<>=!~\[; ]", d, 1)[0]) for d in specs}
    pinned = {norm(line.split("==")[0]) for line in (ROOT / "requirements.txt").read_text().splitlines()
              if "==" in line and not line.lstrip().startswith("#")}
    missing = {n: dists.get(n) for n in third if not any(norm(d) in declared for d in dists.get(n, [n]))}
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"
    unpinned = {n for n in third if not any(norm(d) in pinned for d in dists.get(n, [n]))}
    assert not unpinned, f"imported but not pinned in requirements.txt: {unpinned}"


def test_the_science_package_never_imports_the_machinery():
    """issue 44: ``stagerun`` (runner, shards, Slurm, plans, prefork, DVC adapter) imports ``priorlab``, never
    the reverse — function-level imports included — and no stage depends on it."""
    import ast

    offenders = []
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(SRC)}: {n}" for n in names if n == "stagerun" or n.startswith("stagerun.")]
    assert not offenders, offenders
    assert all(not any(d.startswith("src/stagerun") or d == "src" for d in deps) for _, deps in stages().values())


def test_figures_and_the_report_read_every_run_group_but_the_diagnosis_arms():
    """issue 42/43: ``figures`` and ``report`` depend on the run groups' folders named by
    ``REPORTED_GROUP_ROOTS`` (models, curves, records), never on ``diagnosis/``: a diagnosis arm is not
    upstream of any claim, so ``dvc repro report`` trains none. Every run group of every profile lies
    under one of those folders or is an arm."""
    from priorlab.config import load_params
    from priorlab.config.training import REPORTED_GROUP_ROOTS

    deps = {name: d for name, (_, d) in stages().items()}
    for kind, stage in (("models/train", "figures"), ("reports/live/train", "figures"), ("models/evaluate", "report")):
        listed = sorted(d.split("/")[-1] for d in deps[stage] if d.startswith(kind + "/"))
        assert listed == sorted(REPORTED_GROUP_ROOTS), (stage, kind, listed)
        assert kind not in deps[stage]  # not the whole folder: it holds the arms
    for profile in sorted((ROOT / "profiles").glob("*.yaml")):
        if profile.name == "paper_settings.yaml":
            continue
        params = load_params(profile)
        for name, run in params.runs.items():
            assert run.diagnosis or run.group.split("/")[0] in REPORTED_GROUP_ROOTS, (profile.name, name, run.group)


def test_no_diagnosis_arm_is_upstream_of_the_report():
    """DVC's own graph of this project: ``dvc repro report`` (``make repro``) runs no diagnosis arm (no run
    of a ``diagnosis/`` group, no ablation stage) and not the ``diagnosis`` stage; ``dvc repro diagnosis``
    runs every arm after the studies whose claims it explains."""
    from priorlab.config import load_params
    from stagerun import dvc_adapter

    params = load_params(ROOT / "params.yaml")
    arms = {f"{kind}@{run}" for run, spec in params.runs.items() if spec.diagnosis for kind in ("train", "evaluate")}
    arms |= {f"mssc_ablation@{a}" for a in params.mssc_study.ablations}
    arms |= {f"sparse_vae_ablation@{a}" for a in params.sparse_vae_study.movielens_ablations}
    assert arms  # the committed profile has arms to leave out
    with dvc_adapter.open_repo(ROOT, lock=False) as repo:
        claims = {s.addressing for s in dvc_adapter.select(repo, ["report"])}
        everything = {s.addressing for s in dvc_adapter.select(repo, ["diagnosis"])}
    assert "report" in claims and not claims & (arms | {"diagnosis"}), sorted(claims & arms)
    studies = {"fmvae_experiments", "vsc_experiments", "mssc_experiments", "sparse_vae_experiments"}
    assert arms | studies | {"diagnosis"} <= everything


def test_every_committed_record_a_stage_reads_travels_with_the_project_copy():
    """A committed file under ``reports/`` that a stage depends on and no stage writes (a record measured
    outside the pipeline) is one of ``benchmarks.project_copy.RECORDS``, which the end-to-end and cluster
    tests' project copies carry: else DVC refuses the stage there ("dependency ... does not exist")."""
    from benchmarks.project_copy import RECORDS

    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    outs = {str(next(iter(o)) if isinstance(o, dict) else o) for s in spec.values()
            for o in s.get("do", s).get("outs", [])}
    records = {d for s in spec.values() for d in s.get("do", s).get("deps", [])
               if str(d).startswith("reports/") and (ROOT / d).is_file()
               and not any(d == o or d.startswith(o.rstrip("/") + "/") for o in outs)}
    assert "reports/sparse_vae_released_code_movielens_cpu.json" in records
    assert records <= set(RECORDS), sorted(records - set(RECORDS))
