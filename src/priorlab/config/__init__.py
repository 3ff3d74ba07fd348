"""Typed, validated parameters: the one place where ``params.yaml`` is read.

The parameter classes live in the submodules (``datasets``, ``models``, ``training``, ``studies``;
``checks`` holds :class:`ParamsError` and the small checks) and are all importable from here.

Every stage calls :func:`load_params` before doing any work.  A bad value
raises :class:`ParamsError` with a one-line message naming the key and the
allowed values, so a typo never reaches a training loop and nothing is
written.

The project's parameters are one profile of ``profiles/`` (``tiny``, ``cpu``, ``paper``), written
as ``params.yaml`` plus the section files of :data:`SECTION_FILES` (``params/models.json``, ...);
switch with ``make profile PROFILE=tiny`` (i.e. ``python -m priorlab.config use tiny``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from priorlab.config.checks import ParamsError, _non_negative, _one_of, _positive
from priorlab.config.datasets import (  # noqa: F401  (re-exported: the one place params are typed)
    BarsParams,
    DATASET_PARAMS,
    DSpritesParams,
    DatasetParams,
    FileParams,
    ImagePatchesParams,
    MNISTParams,
    MovieLensParams,
    PBMCParams,
    PBMCQuantileParams,
    SmileyParams,
    SparseSyntheticParams,
)
from priorlab.config.models import (  # noqa: F401  (re-exported: the one place params are typed)
    BetaTCVAEParams,
    FactorVAEParams,
    FactorialMixtureParams,
    LpNestedPriorParams,
    MODEL_PARAMS,
    ModelParams,
    PPCAParams,
    PRIOR_PARAMS,
    PriorParams,
    SparseCodingModelParams,
    SparseVAEParams,
    VAEParams,
    VSCParams,
)
from priorlab.config.training import (  # noqa: F401  (re-exported: the one place params are typed)
    EvaluateParams,
    FigureParams,
    OptimParams,
    ReplicatesParams,
    RunParams,
    SetupParams,
)
from priorlab.config.studies import (  # noqa: F401  (re-exported: the one place params are typed)
    BenchmarkParams,
    BenchmarkPriorParams,
    BenchmarkSyntheticParams,
    IsaStudyParams,
    MsscAblationParams,
    MsscStudyParams,
    SPARSE_VAE_STUDY_KINDS,
    SparseVaeRealParams,
    SparseVaeStudyParams,
    SupervisedCeilingParams,
)


PROFILES = ("tiny", "cpu", "paper")





@dataclass(frozen=True)
class Params:
    profile: Literal["tiny", "cpu", "paper"]
    device: Literal["cpu", "cuda", "auto"]
    datasets: dict[str, DatasetParams]
    setups: dict[str, SetupParams]
    models: dict[str, ModelParams]
    pretrain: OptimParams
    train: OptimParams
    runs: dict[str, RunParams]
    threads: int = 0
    """Threads of every stage's torch and BLAS/OpenMP pools; 0 = not set: the libraries' own default
    (torch and OpenBLAS: one per core of the machine, so results of conv nets then vary by machine).  A param, not a property of the machine or of ``make repro``'s worker count: conv nets'
    results depend on it (MLP results do not), so the same params give the same outputs whether the
    stages run one at a time or side by side."""
    evaluate: EvaluateParams = field(default_factory=EvaluateParams)
    figures: FigureParams = field(default_factory=FigureParams)
    isa_study: IsaStudyParams = field(default_factory=IsaStudyParams)
    supervised_ceiling: SupervisedCeilingParams = field(default_factory=SupervisedCeilingParams)
    mssc_study: MsscStudyParams = field(default_factory=MsscStudyParams)
    sparse_vae_study: SparseVaeStudyParams = field(default_factory=SparseVaeStudyParams)
    benchmark: BenchmarkParams = field(default_factory=BenchmarkParams)
    replicates: ReplicatesParams = field(default_factory=ReplicatesParams)

    def check(self) -> None:
        if self.threads < 0:
            raise ParamsError(f"threads must be 0 (the libraries' default) or a positive count, got {self.threads}")
        for group in ("datasets", "setups", "models"):
            entries = getattr(self, group)
            if not entries:
                raise ParamsError(f"{group} must define at least one entry")
            for name, entry in entries.items():
                entry.check(f"{group}.{name}")
        for name, setup in self.setups.items():
            _one_of(f"setups.{name}.dataset", setup.dataset, tuple(self.datasets))
            _one_of(f"setups.{name}.pretrain_model", setup.pretrain_model, tuple(self.models))
        self.pretrain.check("pretrain")
        self.train.check("train")
        if not self.runs:
            raise ParamsError("runs must define at least one entry")
        for name, run in self.runs.items():
            run.check(f"runs.{name}")
            _one_of(f"runs.{name}.setup", run.setup, tuple(self.setups))
            _one_of(f"runs.{name}.model", run.model, tuple(self.models))
            if not self.setups[run.setup].pretraining and self.models[run.model].warm_start != "scratch":
                raise ParamsError(f"runs.{name}: setup {run.setup!r} has pretraining: false, so model "
                                  f"{run.model!r} needs warm_start: scratch")
        self._check_batches()
        self.evaluate.check("evaluate")
        groups = sorted({run.group for run in self.runs.values()})
        for group in self.evaluate.group_metrics:
            _one_of("evaluate.group_metrics", group, tuple(groups))
        self.figures.check("figures")
        self.isa_study.check("isa_study", self)
        self.supervised_ceiling.check("supervised_ceiling", self)
        self.mssc_study.check("mssc_study", self)
        self.sparse_vae_study.check("sparse_vae_study", self)
        self.benchmark.check("benchmark", self)
        self.replicates.check("replicates", self.models)

    # convenience lookups used by stages
    def _check_batches(self) -> None:
        """A batch larger than the training set would be clamped to it by the trainer: refuse it here,
        so that the settings the report states are the ones that ran."""
        used: dict[str, dict[str, int]] = {}  # data set -> the key that sets a batch size -> that size
        for run in self.runs.values():
            setup = self.setups[run.setup]
            for phase, model in (("pretrain", setup.pretrain_model), ("train", run.model)):
                overrides = getattr(self.models[model], f"{phase}_phase")
                key = (f"models.{model}.{phase}_phase" if overrides is not None and overrides.batch_size is not None
                       else phase)
                used.setdefault(setup.dataset, {})[key] = self.models[model].phase(phase, getattr(self, phase)).batch_size
        if self.isa_study.setup in self.setups:  # (a name that is not a setup: isa_study.check says so)
            used.setdefault(self.setups[self.isa_study.setup].dataset, {})["isa_study.train"] = self.isa_study.train.batch_size
        for dataset, batches in sorted(used.items()):
            n = self.datasets[dataset].n_train
            for key, batch in sorted(batches.items()):
                if batch > n:
                    raise ParamsError(f"{key}.batch_size: {batch} is more than the {n} training points of data "
                                      f"set {dataset!r} (the trainer would use {n}); at most {n}")

    def setup(self, name: str) -> SetupParams:
        _one_of("setup", name, tuple(self.setups))
        return self.setups[name]

    def model(self, name: str) -> ModelParams:
        _one_of("model", name, tuple(self.models))
        return self.models[name]

    def run(self, name: str) -> RunParams:
        _one_of("run", name, tuple(self.runs))
        return self.runs[name]

    def reported_runs(self) -> dict[str, RunParams]:
        """The runs but the diagnosis arms (``runs.<run>.group: diagnosis/...``): what ``figures`` and the
        report read."""
        return {name: run for name, run in self.runs.items() if not run.diagnosis}

    def dataset_of(self, setup: str) -> DatasetParams:
        return self.datasets[self.setup(setup).dataset]



# --------------------------------------------------------------------------- parsing


def _parse(tp, value, key: str):
    """Convert ``value`` to type ``tp`` or raise :class:`ParamsError` naming ``key``."""
    origin = typing.get_origin(tp)
    if origin is types.UnionType and type(None) in typing.get_args(tp):  # ``X | None``: null or an X
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return None if value is None else _parse(inner, value, key)
    if dataclasses.is_dataclass(tp):
        return _parse_dataclass(tp, value, key)
    if origin is Literal:
        allowed = typing.get_args(tp)
        _one_of(key, value, allowed)
        return value
    if origin is dict:
        _, vtp = typing.get_args(tp)
        if not isinstance(value, dict):
            raise ParamsError(f"{key} must be a mapping, got {type(value).__name__}")
        return {str(k): _parse(vtp, v, f"{key}.{k}") for k, v in value.items()}
    if origin is list:
        (etp,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ParamsError(f"{key} must be a list, got {type(value).__name__}")
        return [_parse(etp, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if tp is bool:
        if not isinstance(value, bool):
            raise ParamsError(f"{key} must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParamsError(f"{key} must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParamsError(f"{key} must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ParamsError(f"{key} must be a string, got {value!r}")
        return value
    raise TypeError(f"unsupported parameter type {tp!r} at {key}")  # programming error


TAGGED_UNIONS: dict[type, dict[str, type]] = {
    ModelParams: MODEL_PARAMS, DatasetParams: DATASET_PARAMS, PriorParams: PRIOR_PARAMS,
}
"""Tagged unions on ``kind``: a value typed as a base class here is parsed into the class its
registry names for the value's ``kind``."""


def _parse_dataclass(cls, value, key: str):
    prefix = f"{key}." if key else ""
    if not isinstance(value, dict):
        raise ParamsError(f"{key or 'params'} must be a mapping, got {type(value).__name__}")
    if cls in TAGGED_UNIONS:
        kinds, kind = TAGGED_UNIONS[cls], value.get("kind")
        if not isinstance(kind, str) or kind not in kinds:
            raise ParamsError(f"{prefix}kind: unknown value {kind!r}; allowed: {', '.join(kinds)}")
        cls = kinds[kind]
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise ParamsError(
            f"{prefix}{unknown[0]}: unknown key; allowed: {', '.join(fields)}"
        )
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name in value:
            kwargs[name] = _parse(hints[name], value[name], f"{prefix}{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ParamsError(f"{prefix}{name}: missing required key")
    return cls(**kwargs)


def parse_entry(cls, raw: dict, key: str):
    """One entry of a section (a setup, a ``models:`` entry, an optimiser phase) parsed and checked as
    :func:`load_params` does; ``key`` prefixes the messages.  A tagged union's base class (e.g.
    :class:`ModelParams`) parses into the class of ``raw["kind"]``."""
    entry = _parse_dataclass(cls, raw, key)
    entry.check(key)
    return entry


def parse_params(raw: dict) -> Params:
    """Validate a raw mapping (as read from YAML) into :class:`Params`."""
    params = _parse_dataclass(Params, raw, "")
    params.check()
    return params


PARAMS_FILE = "params.yaml"
"""The project's main parameter file (DVC's default): the sections not in :data:`SECTION_FILES`."""

SECTION_FILES = {
    "datasets": "params/datasets.json",
    "setups": "params/setups.json",
    "models": "params/models.json",
    "runs": "params/runs.json",
    "isa_study": "params/studies.json",
    "supervised_ceiling": "params/studies.json",
    "mssc_study": "params/studies.json",
    "sparse_vae_study": "params/studies.json",
    "benchmark": "params/studies.json",
}
"""Where the project's large sections live, relative to ``params.yaml``'s folder.  DVC parses a params
file afresh for every stage that tracks a key in it: with every section in one 37 KB file the cpu
profile's 350 stages cost 350 parses, three quarters of a no-op ``dvc status``.  Split, a stage parses
only the files of the keys it tracks (``evaluate@`` the small ``params.yaml``).  The section files are
JSON, which DVC reads about 50 times faster than YAML (its YAML reader builds every node in Python:
15 ms for the 9 KB ``models`` section, read by 156 stages); they are written from the profile, whose
YAML keeps the comments.  ``dvc.yaml`` names the file of every tracked key (``tests/test_stage_deps.py``);
a profile stays one file."""


def param_files(path: str | Path = PARAMS_FILE) -> list[Path]:
    """The files :func:`read_raw` reads for ``path``: a ``params.yaml`` with its section files, any
    other file (a profile) alone."""
    path = Path(path)
    if path.name != PARAMS_FILE:
        return [path]
    return [path] + [path.parent / rel for rel in dict.fromkeys(SECTION_FILES.values())]


def _read_file(path: Path) -> dict:
    """A parameter file's mapping: JSON for a ``.json`` section file, else YAML."""
    if not path.is_file():
        raise ParamsError(f"{path}: parameter file not found (run `make profile PROFILE=cpu`)")
    text = path.read_text()
    if path.suffix == ".json":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ParamsError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from exc
    else:
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or exc.__class__.__name__
            raise ParamsError(f"{path}{where}: not valid YAML: {problem}") from exc
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ParamsError(f"{path}: expected a mapping of sections, got {type(raw).__name__}")
    return raw


def section_text(part: dict) -> str:
    """A section file's text: JSON, in the profile's order, one line per entry of a section (a model, a
    run, a data set), so that a diff shows the entries that changed."""
    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    blocks = []
    for section, value in part.items():
        if isinstance(value, dict) and value:
            entries = ",\n".join(f"  {dump(key)}: {dump(entry)}" for key, entry in value.items())
            blocks.append(f" {dump(section)}: {{\n{entries}\n }}")
        else:
            blocks.append(f" {dump(section)}: {dump(value)}")
    return "{\n" + ",\n".join(blocks) + "\n}\n" if blocks else "{}\n"


def read_raw(path: str | Path = PARAMS_FILE) -> dict:
    """The raw mapping of a parameter file: a profile as one file, or the project's ``params.yaml``
    merged with its section files (each section in the file :data:`SECTION_FILES` names, where
    ``dvc.yaml`` reads it; anywhere else is an error naming both files)."""
    path = Path(path)
    raw = _read_file(path)
    if path.name != PARAMS_FILE:
        return raw
    for section in raw:
        if section in SECTION_FILES:
            raise ParamsError(f"{path}: section {section!r} belongs in {SECTION_FILES[section]}, where dvc.yaml "
                              "reads it (`make profile PROFILE=...` writes the files)")
    for rel in dict.fromkeys(SECTION_FILES.values()):
        for section, value in _read_file(path.parent / rel).items():
            if SECTION_FILES.get(section) != rel:
                raise ParamsError(f"{path.parent / rel}: section {section!r} belongs in "
                                  f"{SECTION_FILES.get(section, PARAMS_FILE)}, where dvc.yaml reads it")
            raw[section] = value
    return raw


def split_sections(text: str, source: str | Path = "params") -> dict[str, str]:
    """A one-file parameter text (a profile) cut into the project's files, ``{relative path: text}``:
    each top-level section, with the comment lines just above it, goes to its file of
    :data:`SECTION_FILES` (JSON, :func:`section_text`), else to ``params.yaml`` (comments and layout
    kept).  The pieces must read back as the whole (a :class:`ParamsError` otherwise, e.g. for a
    flow-style top level)."""
    import re

    files: dict[str, list[str]] = {PARAMS_FILE: []}
    target, pending = PARAMS_FILE, []
    for line in text.splitlines(keepends=True):
        key = re.match(r"([^\s#'\"{\[-][^:]*):(\s|$)", line)
        if key:
            target = SECTION_FILES.get(key.group(1).strip(), PARAMS_FILE)
            files.setdefault(target, []).extend(pending + [line])
            pending = []
        elif not line.strip() or line.startswith("#"):
            pending.append(line)
        else:
            files.setdefault(target, []).extend(pending + [line])
            pending = []
    files[target] += pending
    pieces = {rel: "".join(lines).lstrip("\n") for rel, lines in files.items()}
    for rel in SECTION_FILES.values():
        pieces.setdefault(rel, "{}\n")
    try:
        whole = yaml.safe_load(text) or {}
        merged: dict = {}
        placed = True
        for rel, piece in pieces.items():
            part = yaml.safe_load(piece) or {}
            placed = placed and isinstance(part, dict) and all(SECTION_FILES.get(k, PARAMS_FILE) == rel for k in part)
            merged.update(part if isinstance(part, dict) else {})
            if rel != PARAMS_FILE and isinstance(part, dict):
                pieces[rel] = section_text(part)
    except yaml.YAMLError as exc:
        raise ParamsError(f"{source}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from exc
    if merged != whole or not placed:
        raise ParamsError(f"{source}: could not split it into its section files: write each top-level "
                          "section as `name:` at the start of a line")
    return pieces


def write_raw(raw: dict, root: str | Path = ".") -> None:
    """Write a raw parameter mapping as the project's files (``params.yaml`` and its section files),
    each replaced whole (tests and tools that edit params programmatically)."""
    import os

    files: dict[str, dict] = {PARAMS_FILE: {}}
    for rel in SECTION_FILES.values():
        files.setdefault(rel, {})
    for section, value in raw.items():
        files[SECTION_FILES.get(section, PARAMS_FILE)][section] = value
    for rel, part in files.items():
        dst = Path(root) / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(f".{dst.name}.tmp")
        tmp.write_text(section_text(part) if rel != PARAMS_FILE else yaml.safe_dump(part, sort_keys=False, allow_unicode=True))
        os.replace(tmp, dst)


def load_params(path: str | Path = PARAMS_FILE) -> Params:
    """Read and validate the parameters (:func:`read_raw`); raises :class:`ParamsError` on any problem."""
    raw = read_raw(path)
    _check_no_dvc_meta_names(raw, "")  # before the typed parse: names DVC mishandles, whatever the section
    params = parse_params(raw)
    _check_dvc_keys(raw)
    return params


DVC_GRIDS = ("datasets", "setups", "runs", "isa_study.models", "isa_study.seeds", "sparse_vae_study.rhos",
             "sparse_vae_study.movielens_ablations", "mssc_study.models", "mssc_study.bars", "mssc_study.ablations",
             "benchmark.setups", "benchmark.priors")
"""The params ``dvc.yaml`` expands into stages (``foreach`` / ``matrix``; a test keeps the list equal to
dvc.yaml's): DVC reads them from the file, so a default the loader fills in is not enough."""


DVC_VALUES = ("replicates.mode",)
"""Other params ``dvc.yaml`` interpolates (the train stage's ``meta``: how the runner batches it)."""


def _check_dvc_keys(raw: dict) -> None:
    """Keys ``dvc.yaml`` interpolates from the raw file must be spelled out there (a default is not
    seen by DVC): every grid of :data:`DVC_GRIDS` (``{}`` / ``[]`` when empty), every value of
    :data:`DVC_VALUES`, the pretrain stage's ``models.${item.pretrain_model}``, every per-run stage's
    ``${item.group}``."""
    for key in DVC_GRIDS + DVC_VALUES:
        node: Any = raw
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                raise ParamsError(f"{key}: missing; dvc.yaml " + ("expands it into stages, so it must be spelled out "
                                  "(write {} or [] when empty)" if key in DVC_GRIDS else "reads it, so it must be "
                                  "spelled out"))
            node = node[part]
    for name, setup in raw.get("setups", {}).items():
        if "pretrain_model" not in setup:
            raise ParamsError(f"setups.{name}.pretrain_model: missing; dvc.yaml's pretrain stage needs it spelled out "
                              "(name it even with pretraining: false)")
    for name, run in raw.get("runs", {}).items():
        if "group" not in run:
            raise ParamsError(f"runs.{name}.group: missing; dvc.yaml's per-run stages need it spelled out")


DVC_META_NAMES = ("size", "nfiles")
"""DVC 3 leaves keys with these names out of a stage's run-cache hash (treeverse/dvc#10296): a run
differing only in such a param would be restored from the run-cache instead of rerun, which shards
(``stagerun.shard``) rely on.  So no parameter may carry these names."""


def _check_no_dvc_meta_names(node: Any, key: str) -> None:
    if isinstance(node, dict):
        for name, value in node.items():
            full = f"{key}.{name}" if key else str(name)
            if name in DVC_META_NAMES:
                raise ParamsError(f"{full}: DVC's run-cache ignores parameters named {' or '.join(DVC_META_NAMES)} "
                                  "(treeverse/dvc#10296); rename it")
            _check_no_dvc_meta_names(value, full)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _check_no_dvc_meta_names(value, f"{key}[{i}]")


CHECKED = Path(".dvc") / "tmp" / "priorlab-params-checked"
"""Where ``check --once`` records the last parameter file that passed (DVC's untracked tmp folder)."""


def check_key(path: str | Path) -> str:
    """sha256 over the parameter files (:func:`param_files`) and every module of the installed
    library: the validation is a function of these alone, so files that passed under this key pass
    again."""
    digest = hashlib.sha256()
    for file in param_files(path):
        digest.update((file.read_bytes() if file.is_file() else b"<missing>") + b"\0")  # in param_files' order
    package = Path(__file__).resolve().parent.parent
    for module in sorted(package.rglob("*.py")):
        digest.update(str(module.relative_to(package)).encode() + b"\0" + module.read_bytes() + b"\0")
    return digest.hexdigest()


def check_once(path: str | Path = "params.yaml", root: str | Path = ".") -> str:
    """``load_params(path)`` unless this file passed with this library before (``make repro``'s
    pre-check: a no-op run then skips the torch imports the registries need); returns the profile."""
    record = Path(root) / CHECKED
    key = check_key(path) if Path(path).is_file() else None
    if key is not None and record.is_file():
        seen = record.read_text().split()
        if len(seen) == 2 and seen[0] == key:
            return seen[1]
    profile = load_params(path).profile
    if key is not None and record.parent.is_dir():
        record.write_text(f"{key} {profile}\n")
    return profile


def profile_path(name: str, root: str | Path = ".") -> Path:
    _one_of("profile", name, PROFILES)
    return Path(root) / "profiles" / f"{name}.yaml"


def use_profile(name: str, root: str | Path = ".", overrides: typing.Sequence[str] = ()) -> Path:
    """Validate ``profiles/<name>.yaml`` with ``overrides`` applied and write it as the project's
    ``params.yaml`` and section files (:func:`split_sections`).

    An override is ``DOTTED.KEY=VALUE`` with VALUE read as YAML, as ``dvc exp run -S`` takes it
    (``isa_study.betas=[1, 2]``); its key must exist in the profile (a typo is an error, not a new
    entry).  ``params.yaml`` keeps the profile's comments (the section files are JSON); nothing is
    written unless the result validates."""
    import os
    import tempfile

    src = profile_path(name, root)
    text = apply_overrides(src.read_text(), overrides, src) if overrides else src.read_text()
    pieces = split_sections(text, src)
    with tempfile.TemporaryDirectory(dir=root, prefix=".params-") as tmp:
        for rel, piece in pieces.items():
            (Path(tmp) / rel).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / rel).write_text(piece)
        params = load_params(Path(tmp) / PARAMS_FILE)  # exactly the files about to be written
        if params.profile != name:
            raise ParamsError(f"{src}: profile key is {params.profile!r}, expected {name!r}")
        for rel in pieces:
            (Path(root) / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(Path(tmp) / rel, Path(root) / rel)
    return Path(root) / PARAMS_FILE


def split_override(item: str, what: str = "override", example: str = "a.b=1") -> tuple[list[str], Any]:
    """``"a.b=[1, 2]"`` → ``(["a", "b"], [1, 2])``, the value read as YAML; a :class:`ParamsError`
    naming ``what`` when the item is not ``DOTTED.KEY=VALUE``."""
    key, sep, raw = item.partition("=")
    if not sep or not key or "" in key.split("."):
        raise ParamsError(f"{what} {item!r}: expected DOTTED.KEY=VALUE, e.g. {example}")
    try:
        return key.split("."), yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise ParamsError(f"{what} {item!r}: the value is not YAML ({exc.problem})") from None


def apply_overrides(text: str, overrides: typing.Sequence[str], source: str | Path = "params") -> str:
    """``text`` (a params file) with each ``DOTTED.KEY=VALUE`` override set, comments kept."""
    import io

    from ruamel.yaml import YAML

    rt = YAML()
    rt.width = 4096
    doc = rt.load(text)
    for item in overrides:
        parts, value = split_override(item, "override", "isa_study.train.steps=3550")
        node = doc
        for depth, part in enumerate(parts):
            if not isinstance(node, dict) or part not in node:
                raise ParamsError(f"override {item!r}: {source} has no key {'.'.join(parts[:depth + 1])}")
            if depth == len(parts) - 1:
                node[part] = value
            else:
                node = node[part]
    buf = io.StringIO()
    rt.dump(doc, buf)
    return buf.getvalue()


def check_machine(path: str | Path = "params.yaml") -> None:
    """What the file asks of this machine, checked on every call (not part of the file's validation,
    which holds anywhere): ``device: cuda`` needs a CUDA device here.  A ``ParamsError`` otherwise."""
    try:
        device = (yaml.safe_load(Path(path).read_text()) or {}).get("device")
    except (OSError, yaml.YAMLError):
        return  # load_params reports it
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ParamsError(f"{path}: device: cuda, but this machine has no CUDA device (torch "
                              f"{torch.__version__}); use device: auto (CUDA when present) or cpu")


def main(argv: list[str] | None = None) -> int:
    """``python -m priorlab.config use PROFILE [--set KEY=VALUE ...]`` | ``check [--once] [PATH]``."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if len(argv) >= 2 and argv[0] == "use" and all(a == "--set" for a in argv[2::2]) and len(argv) % 2 == 0:
            sets = argv[3::2]
            dst = use_profile(argv[1], overrides=sets)
            print(f"params.yaml, params/*.json <- profiles/{argv[1]}.yaml" + "".join(f", {s}" for s in sets))
            return 0 if dst.exists() else 1
        if argv and argv[0] == "check" and len(argv) <= 3:
            once = "--once" in argv[1:]
            rest = [a for a in argv[1:] if a != "--once"]
            if len(rest) <= 1:
                path = rest[0] if rest else "params.yaml"
                profile = check_once(path) if once else load_params(path).profile
                check_machine(path)
                print(f"ok: profile {profile}")
                return 0
    except ParamsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("usage: python -m priorlab.config use {tiny,cpu,paper} [--set DOTTED.KEY=VALUE ...] | check [--once] [PATH]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
