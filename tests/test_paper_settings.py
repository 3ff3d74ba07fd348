"""The paper profile against the papers' own settings (issue 28): ``profiles/paper_settings.yaml`` lists
each setting a paper states, its source and the param holding it — or, for what a name does not show
(issue 43), the quantity read from the built models (``measure``: a run's steps with its pretraining, a
net's parameter count); ``profiles/paper.yaml`` must hold it, or the entry must give the reason it does not
(``deviation`` or ``missing``)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from priorlab.config import parse_params
from priorlab.studies.fidelity import NOTES, effective_steps, held_values, parameter_counts, same

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "profiles" / "paper_settings.yaml"


def disagreements(raw_params: dict, table: dict) -> list[str]:
    """One line per table entry the params contradict: a stated value not held without a note, or a
    note on a value that is held (a stale note)."""
    params = parse_params(copy.deepcopy(raw_params))
    out = []
    for paper, entries in table.items():
        for e in entries:
            values = held_values(params, e)
            held = [same(v, e["value"]) for v in values.values()]
            note = next((k for k in NOTES if k in e), None)
            where = f"{paper} {e['setting']} ({e['source']})"
            if note is None and not all(held):
                bad = [f"{p} = {v!r}" for (p, v), h in zip(values.items(), held) if not h]
                out.append(f"{where}: the paper states {e['value']!r}; {', '.join(bad)}")
            if note is not None and any(held):
                out.append(f"{where}: marked {note} but the params hold the stated value: remove the note")
    return out


@pytest.fixture(scope="module")
def table() -> dict:
    return yaml.safe_load(TABLE.read_text())


@pytest.fixture(scope="module")
def paper() -> dict:
    return yaml.safe_load((ROOT / "profiles" / "paper.yaml").read_text())


def test_every_entry_is_complete_and_names_real_params(table, paper):
    params = parse_params(copy.deepcopy(paper))
    assert set(table) == {"001", "002", "003", "004"}
    for entries in table.values():
        for e in entries:
            assert {"setting", "stated", "source", "value"} <= set(e) and ("params" in e) != ("measure" in e), e
            assert sum(k in e for k in NOTES) <= 1 and all(e.get(k, "x").strip() for k in NOTES), e
            assert held_values(params, e)  # raises on a param, run or module that does not exist


def test_the_paper_profile_holds_every_stated_setting_or_says_why_not(table, paper):
    assert disagreements(paper, table) == []


def test_a_planted_disagreement_is_found(table, paper):
    planted = copy.deepcopy(paper)
    planted["isa_study"]["betas"] = [1, 2, 4]  # a shortened grid
    assert disagreements(planted, table) == [
        "004 beta grid (Table 1): the paper states [1, 1.5, 2, 2.5, 3, 3.5, 4, 5, 6]; isa_study.betas = [1.0, 2.0, 4.0]"]
    stale = copy.deepcopy(paper)
    stale["setups"]["dsprites_isa"]["latent_dim"] = 20  # the deviation's value, now held: the note is stale
    stale["models"]["isa_vae"]["prior"]["subspaces"] = [[2.2, 4]] * 5
    stale["models"]["isa_tcvae"]["prior"]["subspaces"] = [[2.2, 4]] * 5
    assert any("marked deviation but the params hold" in line for line in disagreements(stale, table))


def test_the_table_lists_what_is_still_missing(table):
    missing = {(paper, e["setting"]) for paper, entries in table.items() for e in entries if "missing" in e}
    assert ("003", "beta-VAE grid (synthetic)") not in missing  # sparse_vae_study.beta_grid (fig. 3's best β)
    assert ("001", "decoder") not in missing  # the conv3 decoder (nets.conv.StridedConvDecoder)
    assert ("002", "batch size (beta-VAE)") not in missing  # a family of beta-VAE entries per study (D.1, D.2)
    assert ("001", "encoder") not in missing  # the 8-layer CNN (nets.conv.StridedConvEncoder)
    assert ("002", "batch size (VSC)") not in missing  # models' own optimiser settings (PhaseOverrides)


def test_a_measured_row_sees_what_a_param_name_does_not(table, paper):
    """issue 43: a β-VAE baseline that warm-starts from the setup's N(0, I) pretraining still reads
    ``train_steps: 70000``, the stated length; what it runs, pretraining included, is longer."""
    planted = copy.deepcopy(paper)
    planted["models"]["fmnist_beta_vae_b1"]["warm_start"] = "pretrain"
    params = parse_params(copy.deepcopy(planted))
    pretrain = effective_steps(params, "fmnist60-fmnist_beta_vae_b1-0")["pretrain"]
    assert pretrain > 0
    lines = disagreements(planted, table)
    assert len(lines) == 1 and lines[0].startswith("002 beta-VAE training length, pretraining included (Fashion-MNIST)")
    assert f"steps of fmnist60-fmnist_beta_vae_b1-0 (pretraining included) = {70000 + pretrain}" in lines[0]


def test_parameter_counts_are_the_built_modules():
    """The FactorVAE discriminator of paper 004's A.4 on 25 latents, counted by hand: Linear(25, 1000), four
    Linear(1000, 1000), Linear(1000, 2), weights and biases."""
    params = parse_params(yaml.safe_load((ROOT / "profiles" / "paper.yaml").read_text()))
    counts = parameter_counts(params, "dsprites_isa", "isa_factor_vae", (1, 64, 64))
    assert counts["discriminator"] == 25 * 1000 + 1000 + 4 * (1000 * 1000 + 1000) + 1000 * 2 + 2
    assert counts["total"] == sum(n for name, n in counts.items() if name != "total")


def test_the_generated_fidelity_table_is_current(table):
    """reports/paper_settings.md is settings_markdown of the committed table and profiles (regenerate with
    ``python -m priorlab.studies.fidelity``); a measured row shows what runs (a cpu model's train_steps 0 as
    the phase's steps)."""
    from priorlab.config import load_params
    from priorlab.studies.fidelity import settings_markdown

    profiles = {n: load_params(ROOT / "profiles" / f"{n}.yaml") for n in ("paper", "cpu")}
    text = settings_markdown(table, profiles)
    assert (ROOT / "reports" / "paper_settings.md").read_text() == text
    row = next(line for line in text.splitlines() if line.startswith("| Smiley joint training |"))
    cpu = profiles["cpu"]
    assert f"| 150000 | {cpu.model('vsc_smiley').phase('train', cpu.train).steps} | match |" in row


def test_every_row_reads_the_cpu_profiles_own_entries(table):
    """issue 43: a row names the paper profile's entries and, where the cpu profile names them otherwise,
    its own (``in_profile``), so the table's cpu column shows what that profile runs in every row; an
    override must name real entries (a renamed model would fail here), and a phase setting a model leaves
    unset reads as the profile's phase (the learning rate its runs train with)."""
    from priorlab.config import load_params
    from priorlab.studies.fidelity import for_profile, settings_markdown

    cpu = load_params(ROOT / "profiles" / "cpu.yaml")
    for entries in table.values():
        for e in entries:
            assert set(e.get("in_profile", {})) <= {"cpu"}, e
            assert held_values(cpu, for_profile(e, "cpu")), e  # raises on an entry the cpu profile lacks
    text = settings_markdown(table, {"cpu": cpu})
    assert "| — |" not in text
    lr = next(e for e in table["002"] if e["setting"] == "beta-VAE learning rate (Smiley)")
    assert set(held_values(cpu, for_profile(lr, "cpu")).values()) == {cpu.train.lr}  # no train_phase: the profile's
