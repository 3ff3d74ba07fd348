"""Parameter validation: one clear error naming the key, before any work."""

import copy
from pathlib import Path

import pytest
import yaml

from priorlab.config import PROFILES, ParamsError, load_params, main, parse_params, use_profile

ROOT = Path(__file__).resolve().parents[1]


def raw(profile="tiny"):
    return yaml.safe_load((ROOT / "profiles" / f"{profile}.yaml").read_text())


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_is_valid(profile):
    assert load_params(ROOT / "profiles" / f"{profile}.yaml").profile == profile


def test_params_files_are_the_default_cpu_profile_cut_by_section():
    from priorlab.config import SECTION_FILES, split_sections

    pieces = split_sections((ROOT / "profiles" / "cpu.yaml").read_text())
    assert set(pieces) == {"params.yaml", *SECTION_FILES.values()}
    for rel, text in pieces.items():
        assert (ROOT / rel).read_text() == text, f"{rel} is not profiles/cpu.yaml's: run `make profile PROFILE=cpu`"


def test_the_split_reads_back_as_the_profile_with_its_comments_and_refuses_what_it_cannot_cut():
    """params.yaml keeps the profile's comments; each section file is its sections as JSON, in order."""
    import json

    from priorlab.config import split_sections

    text = (ROOT / "profiles" / "paper.yaml").read_text()
    pieces = split_sections(text)
    whole = yaml.safe_load(text)
    assert "# Smiley: 60,000 training images" in pieces["params.yaml"]
    assert set(yaml.safe_load(pieces["params.yaml"])) == {"profile", "device", "threads", "pretrain", "train",
                                                          "replicates", "evaluate", "figures"}
    studies = json.loads(pieces["params/studies.json"])
    assert list(studies)[0] == "isa_study" and studies == {k: whole[k] for k in studies}
    assert json.loads(pieces["params/setups.json"]) == {"setups": whole["setups"]}
    with pytest.raises(ParamsError, match="could not split it"):
        split_sections("{profile: cpu, models: {}}\n", "flow.yaml")  # no `name:` lines to cut at


def test_a_section_in_the_wrong_file_or_a_missing_file_is_named(tmp_path):
    from priorlab.config import read_raw, write_raw

    write_raw(raw(), tmp_path)
    assert read_raw(tmp_path / "params.yaml") == raw()
    assert load_params(tmp_path / "params.yaml").profile == "tiny"
    main_file = tmp_path / "params.yaml"
    main_file.write_text(main_file.read_text() + "models: {}\n")
    with pytest.raises(ParamsError, match=r"section 'models' belongs in params/models.json, where dvc.yaml reads it"):
        load_params(main_file)
    write_raw(raw(), tmp_path)
    runs = tmp_path / "params" / "runs.json"
    runs.write_text(runs.read_text()[:-2] + ', "threads": 2}\n')
    with pytest.raises(ParamsError, match=r"runs.json: section 'threads' belongs in params.yaml"):
        load_params(main_file)
    runs.write_text(runs.read_text()[:-2] + ",}\n")
    with pytest.raises(ParamsError, match=r"runs.json:\d+:\d+: not valid JSON"):
        load_params(main_file)
    runs.unlink()
    with pytest.raises(ParamsError, match=r"runs.json: parameter file not found"):
        load_params(main_file)


def _error(mutate) -> str:
    r = copy.deepcopy(raw())
    mutate(r)
    with pytest.raises(ParamsError) as exc:
        parse_params(r)
    return str(exc.value)


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda r: r["models"]["vae"].update(kind="vea"), "models.vae.kind: unknown value 'vea'; allowed: vae"),
        (lambda r: r.update(profile="cpuu"), "profile: unknown value 'cpuu'; allowed: tiny, cpu, paper"),
        (lambda r: r["datasets"]["smiley"].update(kind="cifar"), "datasets.smiley.kind: unknown value 'cifar'"),
        (lambda r: r["setups"]["smiley"].update(pretrain_model="vsc"), "setups.smiley.pretrain_model: unknown value"),
        (lambda r: r["train"].update(lr=0), "train.lr must be > 0"),
        (lambda r: r["train"].update(batch_size=-4), "train.batch_size must be > 0"),
        (lambda r: r["setups"]["smiley"].update(latent_dim=0), "setups.smiley.latent_dim must be > 0"),
        (lambda r: r["train"].pop("steps"), "train.steps: missing required key"),
        (lambda r: r["train"].update(stpes=3), "train.stpes: unknown key; allowed: steps"),
        (lambda r: r["runs"]["smiley-vae-0"].update(model="vsc"), "runs.smiley-vae-0.model: unknown value 'vsc'"),
        (lambda r: r["runs"]["smiley-vae-0"].update(setup="mnist"), "runs.smiley-vae-0.setup: unknown value"),
        (lambda r: r["runs"]["smiley-vae-0"].update(seed=-1), "runs.smiley-vae-0.seed must be >= 0"),
        (lambda r: r["models"]["vae"].update(alpha=0.1), "models.vae.alpha: unknown key; allowed: kind, beta, warm_start, train_steps"),
        (lambda r: r["setups"]["smiley"].update(dataset="smiley2"), "setups.smiley.dataset: unknown value"),
        (lambda r: r["train"].update(steps="10"), "train.steps must be an integer, got '10'"),
        (lambda r: r.pop("evaluate") and r.update(evaluate={"iw_samples": 0}), "evaluate.iw_samples must be > 0"),
        (lambda r: r["datasets"]["dsprites"].update(resolution=48), "datasets.dsprites.resolution: unknown value 48"),
        (lambda r: r["evaluate"].update(group_metrics={"baselines": ["mgi"]}),
         "evaluate.group_metrics.baselines[0]: unknown value 'mgi'"),
        (lambda r: r["isa_study"].update(setup="smiley"),
         "isa_study.setup: smiley is on data set 'smiley'; the isa_fit stages depend on data/dsprites"),
        (lambda r: r["evaluate"].update(group_metrics={"baseline": []}),
         "evaluate.group_metrics: unknown value 'baseline'; allowed: baselines"),
    ],
)
def test_bad_params_name_the_key(mutate, expected):
    message = _error(mutate)
    assert expected in message
    assert "\n" not in message


def test_use_profile_copies_and_validates(tmp_path):
    (tmp_path / "profiles").mkdir()
    for p in PROFILES:
        (tmp_path / "profiles" / f"{p}.yaml").write_text((ROOT / "profiles" / f"{p}.yaml").read_text())
    use_profile("tiny", tmp_path)
    assert load_params(tmp_path / "params.yaml").profile == "tiny"
    with pytest.raises(ParamsError, match="allowed: tiny, cpu, paper"):
        use_profile("tinyy", tmp_path)


def test_use_profile_with_overrides_keeps_comments_and_refuses_typos(tmp_path, capsys, monkeypatch):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "paper.yaml").write_text((ROOT / "profiles" / "paper.yaml").read_text())
    sets = ["isa_study.betas=[1, 2]", "isa_study.train.steps=3550", "threads=2"]
    use_profile("paper", tmp_path, overrides=sets)
    text = (tmp_path / "params.yaml").read_text()
    p = load_params(tmp_path / "params.yaml")
    assert p.isa_study.betas == [1.0, 2.0] and p.isa_study.train.steps == 3550 and p.threads == 2
    assert p.isa_study.train.batch_size == 2048  # the rest of the flow mapping is kept
    assert "# Smiley: 60,000 training images" in text  # comments survive
    before = (tmp_path / "params" / "studies.json").read_text()
    for bad, message in [("isa_study.train.stepz=1", "has no key isa_study.train.stepz"),
                         ("isa_study.betas", "expected DOTTED.KEY=VALUE"),
                         ("isa_study.train.steps=-5", "steps")]:
        with pytest.raises(ParamsError, match=message):
            use_profile("paper", tmp_path, overrides=[bad])
        assert (tmp_path / "params" / "studies.json").read_text() == before  # nothing half-written
        assert not list(tmp_path.glob(".params-*"))
    monkeypatch.chdir(tmp_path)
    assert main(["use", "paper", "--set", "threads=3"]) == 0
    assert load_params(tmp_path / "params.yaml").threads == 3
    assert main(["use", "paper", "threads=3"]) == 2  # --set missing: usage
    assert "usage" in capsys.readouterr().err


def test_cli_exit_codes(tmp_path, capsys):
    bad = tmp_path / "p.yaml"
    bad.write_text("profile: [unclosed\n")
    assert main(["check", str(bad)]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    bad.write_text("profile: cpu\nthreads: 2\n  device: cpu\n")  # line 3, column 9: a mapping value here
    assert main(["check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:3:9: not valid YAML: mapping values are not allowed here" in err and len(err.splitlines()) == 1
    assert main(["check", str(tmp_path / "missing.yaml")]) == 2
    assert main(["check", str(ROOT / "profiles" / "tiny.yaml")]) == 0


@pytest.mark.parametrize("section, key", [("setups", "pretrain_model"), ("runs", "group")])
def test_keys_dvc_interpolates_must_be_spelled_out(tmp_path, section, key):
    r = raw()
    del r[section][next(iter(r[section]))][key]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(r))
    with pytest.raises(ParamsError, match=f"{key}: missing; dvc.yaml"):
        load_params(path)


def test_the_replicates_mode_dvc_reads_must_be_spelled_out(tmp_path):
    r = raw()
    del r["replicates"]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(r))
    with pytest.raises(ParamsError, match=r"replicates.mode: missing; dvc.yaml reads it"):
        load_params(path)


def test_check_once_skips_files_that_passed_and_rechecks_an_edited_one(tmp_path, monkeypatch):
    import priorlab.config as config

    (tmp_path / ".dvc" / "tmp").mkdir(parents=True)
    tiny = yaml.safe_load((ROOT / "profiles" / "tiny.yaml").read_text())
    config.write_raw(tiny, tmp_path)
    params = tmp_path / "params.yaml"
    calls = []
    real = config.load_params
    monkeypatch.setattr(config, "load_params", lambda path: calls.append(path) or real(path))
    assert config.check_once(params, root=tmp_path) == "tiny"
    assert config.check_once(params, root=tmp_path) == "tiny"
    assert len(calls) == 1  # the second call trusted the record
    params.write_text(params.read_text().replace("threads: 1", "threads: -1", 1))
    assert "threads: -1" in params.read_text()
    with pytest.raises(ParamsError, match="threads"):
        config.check_once(params, root=tmp_path)  # edited: validated again, and it fails
    assert len(calls) == 2
    with pytest.raises(ParamsError, match="threads"):
        config.check_once(params, root=tmp_path)  # a failure is never recorded: validated again
    assert len(calls) == 3
    monkeypatch.chdir(tmp_path)
    config.write_raw(tiny, tmp_path)
    assert main(["check", "--once"]) == 0 and main(["check", "--once"]) == 0
    assert len(calls) == 3  # back to the bytes that passed: trusted again
    bad = copy.deepcopy(tiny)
    bad["models"][next(iter(bad["models"]))]["kind"] = "nope"
    config.write_raw(bad, tmp_path)  # a section file edited, params.yaml unchanged: validated again
    assert main(["check", "--once"]) == 2 and len(calls) == 4
    assert main(["check", "--once", "a", "b"]) == 2


def test_check_key_covers_the_file_and_the_library(tmp_path):
    from priorlab.config import check_key

    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("profile: tiny\n")
    b.write_text("profile: tiny\n")
    assert check_key(a) == check_key(b)
    b.write_text("profile: tiny \n")
    assert check_key(a) != check_key(b)


def test_parameters_named_like_dvc_metadata_are_refused(tmp_path):
    r = raw()
    next(iter(r["datasets"].values()))["size"] = 3
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(r))
    with pytest.raises(ParamsError, match=r"datasets\.\w+\.size: DVC's run-cache ignores"):
        load_params(path)


def test_mlp_decoder_options_build_the_paper_004_decoder_and_stay_out_of_old_records():
    """``decoder_hidden`` / ``decoder_activation`` (paper 004 A.4: three tanh layers of 1200 after a ReLU
    encoder); a setup without them records exactly the keys it recorded before they existed."""
    from torch import nn

    from priorlab.nets import build_nets

    raw = yaml.safe_load(open("profiles/tiny.yaml"))
    name = next(iter(raw["setups"]))
    plain = parse_params(copy.deepcopy(raw)).setup(name)
    assert "decoder_hidden" not in plain.record() and "decoder_activation" not in plain.record()
    raw["setups"][name].update({"encoder": "mlp", "decoder": "mlp", "hidden": [16, 8],
                                "decoder_hidden": [12, 12, 12], "decoder_activation": "tanh"})
    setup = parse_params(copy.deepcopy(raw)).setup(name)
    assert setup.record()["decoder_hidden"] == [12, 12, 12]
    enc, dec, _ = build_nets(setup, (1, 8, 8), 2)
    assert [m.out_features for m in dec.net if isinstance(m, nn.Linear)] == [12, 12, 12, 64]
    assert sum(isinstance(m, nn.Tanh) for m in dec.net) == 3 and not any(isinstance(m, nn.Tanh) for m in enc.net)
    assert [m.out_features for m in enc.net if isinstance(m, nn.Linear)] == [16, 8, 2 * setup.latent_dim]
    for change, match in (({"decoder_activation": "gelu"}, "decoder_activation"),
                          ({"decoder_hidden": [0]}, r"decoder_hidden\[0\]"),
                          ({"decoder": "conv", "decoder_hidden": [4]}, "options of the mlp decoder")):
        bad = copy.deepcopy(raw)
        bad["setups"][name].update(change)
        with pytest.raises(ParamsError, match=match):
            parse_params(bad)


def test_a_batch_larger_than_the_training_set_is_refused_not_clamped():
    raw = yaml.safe_load(open(ROOT / "profiles" / "tiny.yaml"))
    used = {raw["setups"][r["setup"]]["dataset"] for r in raw["runs"].values()}
    n = min(raw["datasets"][d]["n_train"] for d in used)
    raw["train"]["batch_size"] = n + 1
    with pytest.raises(ParamsError, match=rf"^train.batch_size: {n + 1} is more than the {n} training points of data set"):
        parse_params(copy.deepcopy(raw))
    raw["train"]["batch_size"] = n  # the whole (smallest) set per step is allowed
    parse_params(raw)


def test_device_cuda_is_refused_by_the_pre_check_on_a_machine_without_cuda(tmp_path, capsys, monkeypatch):
    import torch

    from priorlab.config import check_machine

    p = tmp_path / "p.yaml"
    p.write_text((ROOT / "profiles" / "tiny.yaml").read_text().replace("device: cpu", "device: cuda"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ParamsError, match="device: cuda, but this machine has no CUDA device"):
        check_machine(p)
    assert main(["check", str(p)]) == 2
    assert "no CUDA device" in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    check_machine(p)  # a machine with CUDA: fine


def _with_vsc_phases(raw: dict) -> dict:
    raw = copy.deepcopy(raw)
    model = next(r["model"] for r in raw["runs"].values())
    raw["models"][model]["train_phase"] = {"batch_size": 32, "lr": 5e-4, "lr_milestones": [100], "lr_gamma": 0.1}
    return raw, model


def test_a_model_sets_its_own_optimiser_phase_over_the_sections():
    """Paper 002's per-model batch and lr decay: set fields replace the train: section's, unset ones keep them;
    the record and the fingerprint of a model without them are as before they existed."""
    raw, model = _with_vsc_phases(yaml.safe_load((ROOT / "profiles" / "tiny.yaml").read_text()))
    params = parse_params(raw)
    opt = params.model(model).phase("train", params.train)
    assert (opt.batch_size, opt.lr, opt.lr_milestones, opt.lr_gamma) == (32, 5e-4, [100], 0.1)
    assert opt.steps == (params.model(model).train_steps or params.train.steps)
    assert opt.log_every == params.train.log_every and opt.seed == params.train.seed
    assert params.model(model).phase("pretrain", params.pretrain) == params.pretrain  # not set for pretraining
    assert params.model(model).record()["train_phase"]["batch_size"] == 32
    plain = load_params(ROOT / "profiles" / "tiny.yaml").model(model)
    assert "train_phase" not in plain.record() and "pretrain_phase" not in plain.fields()
    assert plain.phase("train", params.train).batch_size == params.train.batch_size
    from priorlab.report import settings_frame

    rows = dict(settings_frame(params).values.tolist())
    assert rows["optimiser set per model"] == f"{model} train: batch_size 32, lr 0.0005, lr_milestones [100], lr_gamma 0.1"


def test_a_models_own_batch_and_lr_are_checked_and_named():
    raw, model = _with_vsc_phases(yaml.safe_load((ROOT / "profiles" / "tiny.yaml").read_text()))
    raw["models"][model]["train_phase"]["lr"] = 0.0
    with pytest.raises(ParamsError, match=rf"models.{model}.train_phase.lr must be"):
        parse_params(raw)
    raw, model = _with_vsc_phases(yaml.safe_load((ROOT / "profiles" / "tiny.yaml").read_text()))
    raw["models"][model]["train_phase"]["batch_size"] = 10**6
    with pytest.raises(ParamsError, match=rf"^models.{model}.train_phase.batch_size: 1000000 is more than"):
        parse_params(raw)
    raw["models"][model]["train_phase"]["colour"] = 1
    with pytest.raises(ParamsError, match="train_phase.colour: unknown key"):
        parse_params(raw)


def test_a_models_printed_settings_leave_out_unset_options():
    """Reports print a models: entry with f"{spec}" (paper 000's README): unset optional fields are left
    out, so the text is what it was before they existed; set ones are shown."""
    raw, model = _with_vsc_phases(yaml.safe_load((ROOT / "profiles" / "tiny.yaml").read_text()))
    plain = load_params(ROOT / "profiles" / "tiny.yaml").model(model)
    assert str(plain) == repr(plain).replace("train_phase=None, pretrain_phase=None, ", "")
    assert "train_phase=PhaseOverrides(batch_size=32" in str(parse_params(raw).model(model))


def test_a_run_group_starts_with_a_folder_the_figures_and_report_read_or_is_an_arm():
    """A group outside the folders ``figures`` and ``report`` depend on would leave its runs out of DVC's
    graph for them: one line naming the group and the folders; ``diagnosis/...`` is an arm."""
    base = raw()
    run = next(iter(base["runs"]))
    for group in ("mine", "reports/x"):
        bad = copy.deepcopy(base)
        bad["runs"][run]["group"] = group
        with pytest.raises(ParamsError, match=rf"runs.{run}.group: '{group}' starts with no folder .* baselines, "
                                              "fmvae_experiments, vsc_experiments"):
            parse_params(bad)
    good = copy.deepcopy(base)
    good["runs"][run]["group"] = "diagnosis/vsc_experiments/smiley"
    params = parse_params(good)
    assert params.runs[run].diagnosis and run not in params.reported_runs()
    good["runs"][run]["group"] = "baselines/mine"
    assert not parse_params(good).runs[run].diagnosis
