"""A param change reruns only what it affects: adding a setup (an independent pretraining replicate) and
a data set to the cpu profile changes the tracked params of no existing trained-model stage or study cell,
as DVC itself resolves ``dvc.yaml``.  Before, the 25 ``isa_fit`` cells (~11 min of stage time) and the
``mssc_fit`` cells (~7 min) depended on all of ``setups`` / ``datasets`` and reran on any such edit."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

# stages that track every setup or every data set: aggregators, and the stages that write slices of them
# (the training stages track their own file alone): none trains a model
WHOLE_SECTION_READERS = {"mssc_experiments", "report", "setup_runs", "diagnosis",
                         "param_slices",     # each study stage's entries (supervised_ceiling, mssc_patches, ...)
                         "benchmark_plan"}   # each benchmark cell's slice
# stages that track every run: the one that writes each setup's slice (prior_init@<setup> reads its own
# file, issue 44: the lock records `runs` and `models` once, not once per setup) and the aggregators
RUN_READERS = {"setup_runs", "figures", "report", "diagnosis"}


def _tracked_params(project: Path) -> dict[str, dict]:
    """Each stage's tracked params as DVC reads them.  DVC re-parses a params file for each of the ~350
    stages (about 0.1 s each); the runner's ``parse_params_once`` returns what DVC's reader returns
    (``tests/test_repro.py``) from one parse: this test took 67 s with DVC's reader, 3.4 s with it."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    from stagerun.dvc_adapter import parse_params_once

    with Repo(str(project)) as repo, parse_params_once():
        return {stage.name: {k: v for dep in stage.deps if isinstance(dep, ParamsDependency)
                             for k, v in dep.read_params().items()}
                for stage in repo.index.stages}


def _project(tmp_path: Path, params: dict) -> Path:
    from dvc.repo import Repo

    from priorlab.config import write_raw

    tmp_path.mkdir()
    Repo.init(str(tmp_path), no_scm=True)
    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    write_raw(params, tmp_path)
    return tmp_path


@pytest.mark.slow
def test_a_new_setup_and_data_set_leave_every_existing_stage_but_the_whole_section_readers(tmp_path):
    raw = yaml.safe_load((ROOT / "profiles" / "cpu.yaml").read_text())
    grown = copy.deepcopy(raw)
    grown["datasets"]["smiley_b"] = {**raw["datasets"]["smiley"], "seed": 1}
    grown["setups"]["smiley18_r9"] = {**raw["setups"]["smiley18"], "dataset": "smiley_b", "seed": 9}
    grown["setups"]["smiley60_r9"] = {**raw["setups"]["smiley60"], "seed": 9}
    entry = next(e for e in raw["runs"].values() if e["setup"] == "smiley18")  # and a run on an old setup
    run = f"smiley18-{entry['model']}-9"
    grown["runs"][run] = {**entry, "seed": 9}
    before = _tracked_params(_project(tmp_path / "before", raw))
    after = _tracked_params(_project(tmp_path / "after", grown))

    assert {"pretrain@smiley18_r9", "prior_init@smiley60_r9", "data@smiley_b"} <= set(after) - set(before)
    changed = {name for name in before if before[name] != after[name]}
    assert changed <= WHOLE_SECTION_READERS | RUN_READERS, sorted(changed - WHOLE_SECTION_READERS - RUN_READERS)
    assert f"train@{run}" in after and "prior_init@smiley18" not in changed
    assert all(set(tracked) == {"threads", "device"} for name, tracked in after.items() if name.startswith("prior_init@"))
    # the study cells still track their own setup and data set: a change there reruns them
    isa_setup = raw["isa_study"]["setup"]
    cell = next(name for name in after if name.startswith("isa_fit@"))
    assert after[cell][f"setups.{isa_setup}"] == raw["setups"][isa_setup]
    assert after[cell]["datasets.dsprites"] == raw["datasets"]["dsprites"]
    bars = raw["mssc_study"]["bars"][0]
    cell = next(name for name in after if name.startswith("mssc_fit@") and bars in name)
    assert after[cell][f"datasets.{bars}"] == raw["datasets"][bars]


SLICED = ("sparse_vae_fit", "sparse_vae_real", "sparse_vae_ablation", "supervised_ceiling", "mssc_patches")


@pytest.mark.slow
def test_an_entry_a_study_stage_does_not_read_leaves_it_alone_and_one_it_reads_changes_its_slice(tmp_path):
    """Issue 44: the study stages that train a few entries of a shared section track their own slice of it
    (``param_slices``), not the section.  Before, a β-TCVAE weight reran the five ``sparse_vae_fit`` cells
    (~810 s of stage time), ``sparse_vae_real`` and its ablation; a Fashion-MNIST net reran
    ``supervised_ceiling`` (~470 s).  Now such an edit changes the tracked params of no sliced stage, nor
    its slice file; an edit of an entry a stage reads changes its slice file (so DVC reruns it)."""
    from priorlab.config import parse_params
    from priorlab.studies.param_slices import SLICES

    raw = yaml.safe_load((ROOT / "profiles" / "cpu.yaml").read_text())
    assert set(SLICES) == set(SLICED)
    other = copy.deepcopy(raw)
    other["models"]["beta_tcvae"]["tc_weight"] += 1.0
    other["setups"]["fmnist60"]["hidden"] = [256]
    other["datasets"]["smiley"]["seed"] = 7
    own = copy.deepcopy(raw)
    own["models"][raw["sparse_vae_study"]["movielens"]["models"][0]]["lambda0"] = 20.0
    own["setups"][next(iter(raw["supervised_ceiling"]["targets"]))]["hidden"] = [128]

    before = _tracked_params(_project(tmp_path / "before", raw))
    after = _tracked_params(_project(tmp_path / "after", other))
    changed = {name for name in before if before[name] != after[name]}
    assert not {name for name in changed if name.split("@")[0] in SLICED}, sorted(changed)
    deps = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["param_slices"]["deps"]
    assert {"params/models.json", "params/setups.json", "params/datasets.json"} <= set(deps)  # so it reruns
    sliced = [name for name in after if name.split("@")[0] in SLICED]
    assert len(sliced) >= 10 and not any(key.startswith(("models", "setups", "datasets")) and "." not in key
                                         for name in sliced for key in after[name])  # no whole section

    def slices(r: dict) -> dict:
        params = parse_params(r)
        return {stage: fn(params) for stage, fn in SLICES.items()}

    base = slices(raw)
    assert slices(other) == base
    moved = {stage for stage, record in slices(own).items() if record != base[stage]}
    assert moved == {"sparse_vae_real", "sparse_vae_ablation", "supervised_ceiling"}, moved


def test_a_stage_that_reads_a_whole_section_file_depends_on_the_file_not_on_its_params():
    """Issue 44 (the no-op's cost): a stage tracking the whole of ``runs`` / ``models`` / ``setups`` /
    ``datasets`` as params put every value of the section in its ``dvc.lock`` entry (nine aggregators:
    12,638 of the lock's 48,532 YAML nodes, parsed twice by every plain ``dvc repro``).  Each of those
    files holds its section alone (``config.SECTION_FILES``; loading refuses any other section there), so
    a dependency on the file reruns the stage exactly when the section changes."""
    from priorlab.config import SECTION_FILES

    alone = {rel: section for section, rel in SECTION_FILES.items()
             if list(SECTION_FILES.values()).count(rel) == 1}
    assert set(alone.values()) == {"datasets", "setups", "models", "runs"}
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    file_deps = {}
    for name, stage in stages.items():
        body = stage.get("do", stage)
        for entry in body.get("params", []):
            for rel, keys in (entry.items() if isinstance(entry, dict) else ()):
                assert not (rel in alone and alone[rel] in keys), f"{name} tracks all of {rel} as params: depend on the file"
        file_deps[name] = {dep for dep in body.get("deps", []) if dep in alone}
        assert all(dep in alone for dep in body.get("deps", []) if str(dep).startswith("params/")), name
    readers = {name for name, deps in file_deps.items() if deps}
    assert {"report", "figures", "setup_runs", "param_slices", "diagnosis"} <= readers
    assert not any(name in readers for name, stage in stages.items() if "foreach" in stage)  # no per-run stage
