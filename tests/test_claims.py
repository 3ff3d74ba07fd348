"""Paper claims: each verdict follows its stated criterion on the numbers given, both ways."""

import numpy as np
import pytest

from priorlab.experiments.claims import Claim, claims_table, md_table, monotone
from priorlab.experiments import fmvae_experiments, vsc_experiments
from priorlab.experiments.fmvae_experiments import fmvae_claims
from priorlab.experiments.vsc_experiments import vsc_claims
from priorlab.io import write_json
from priorlab.report import claims_section


def _smiley(vsc18, vsc60, b18, b60, used60=20):
    def entry(label, d, contrast, used=18):
        return {"label": label, "latent_dim": d, "model": "m", "seed": 0,
                "fresh": {"contrast": contrast, "block_purity": 0.9, "used_latents": used, "active_dims": used}}
    runs = {"v18": entry("VSC α=0.01", 18, vsc18), "v60": entry("VSC α=0.01", 60, vsc60, used60),
            "b18": entry("β-VAE β=2", 18, b18), "b60": entry("β-VAE β=2", 60, b60),
            "b60x": entry("β-VAE β=8", 60, 0.99),  # not the chosen β: must be ignored
            "t18": entry("β-TCVAE β=6", 18, 0.5), "t60": entry("β-TCVAE β=6", 60, 0.3)}
    return {"runs": runs, "chosen_beta_vae": {"18": "b18", "60": "b60"}}


def _by_claim(claims):
    return {c.claim: c.reproduced for c in claims}


def test_vsc_claims_follow_the_numbers():
    elbo = {"rows": [{"model": "VSC", "value": a, "mean": m} for a, m in ((0.01, -250.0), (0.1, -240.0), (0.5, -235.0))]
            + [{"model": "β-VAE", "value": b, "mean": m} for b, m in ((1.0, -230.0), (4.0, -245.0), (16.0, -260.0))]}
    sim = np.eye(10)
    sim[0, 6] = sim[7, 9] = 0.9
    sim[0, 1] = sim[1, 8] = 0.2
    smiley = _smiley(0.6, 0.58, 0.4, 0.2)
    spikes = {"input_dependent_dims": 12, "always_active_dims": 2, "active_per_input": 9.0}
    smiley["runs"]["v60"]["spikes"] = spikes
    good = _by_claim(vsc_claims(smiley, elbo, {"similarity": sim.tolist(), "run": "f", "spikes": spikes}))
    assert all(good.values()) and len(good) == 10
    dead = {**spikes, "input_dependent_dims": 0}
    assert not _by_claim(vsc_claims({}, {}, {"run": "f", "spikes": dead}))[
        "each observation activates its own small subset of latent dims"]
    bad = _by_claim(vsc_claims(_smiley(0.6, 0.4, 0.7, 0.75, used60=40), {"rows": [
        {"model": "VSC", "value": 0.01, "mean": -200.0}, {"model": "VSC", "value": 0.5, "mean": -250.0},
        {"model": "β-VAE", "value": 1.0, "mean": -240.0}, {"model": "β-VAE", "value": 4.0, "mean": -230.0}]}, {}))
    assert not any(bad[k] for k in bad if not k.startswith("β-TCVAE"))
    assert bad["β-TCVAE disentanglement degrades from d=18 to d=60"]  # its numbers did degrade


def test_vsc_claims_need_the_runs():
    assert vsc_claims({}, {}, {}) == []


def test_fmvae_claims_and_report_section(tmp_path):
    summary = {"elbo_vs_k": {"K": [1, 4, 16], "mean_elbo": [-103.0, -102.0, -101.9], "elbo_rises": True,
                             "elbo_saturates": True, "elbo_gain_last_doubling": 0.1, "elbo_gain_best_vs_K1": 1.1,
                             "mean_kl_r": [0.0, 1.0, 2.0], "mean_kl_z": [20.0, 18.0, 17.0], "kl_r_rises": True,
                             "kl_z_falls": False, "spearman_kl_r_vs_log2K": [0.9, 0.001],
                             "spearman_kl_z_vs_log2K": [-0.2, 0.5]},
               "semi_supervised": {"r": {"supervised_factor": "shape", "heldout_accuracy": 0.8, "goal": 0.95,
                                         "reached": False, "labelled_fraction": 0.4, "delta": 100.0,
                                         "relative_goal": 0.95, "ceiling": 0.97, "share": 0.8 / 0.97,
                                         "ceiling_capped": False, "relative_reached": False}}}
    claims = fmvae_claims(summary)
    assert [c.reproduced for c in claims] == [True, True, True, False, False]
    write_json(tmp_path / "fmvae_experiments" / "summary.json",
               {"title": fmvae_experiments.TITLE, "paper": "001", "claims": [c.to_dict() for c in claims]})
    lines = claims_section(tmp_path)
    assert lines[0] == "## Paper claims"
    text = "\n".join(lines)
    assert "KL[z] falls with K" in text and text.count("| **no** |") == 2 and "fmvae_experiments/README.md" in text
    assert "82.5% of ceiling 0.970" in text and "before issue 10: ≥ 95% absolute" in text
    assert claims_section(tmp_path / "missing") == []


def test_report_discovers_experiment_summaries(tmp_path):
    """Every ``<name>/summary.json`` with a title and claims, by stated paper number, then name."""
    claim = Claim("p", "c", "k", "m", True).to_dict()
    write_json(tmp_path / "vsc_experiments" / "summary.json",
               {"title": vsc_experiments.TITLE, "paper": vsc_experiments.PAPER, "claims": [claim]})
    write_json(tmp_path / "fmvae_experiments" / "summary.json",
               {"title": fmvae_experiments.TITLE, "paper": fmvae_experiments.PAPER, "claims": []})
    write_json(tmp_path / "a_no_paper" / "summary.json", {"title": "Z", "claims": [claim]})
    write_json(tmp_path / "untitled" / "summary.json", {"claims": [claim]})  # not an experiment summary
    write_json(tmp_path / "figures" / "x.json", {"title": "T", "claims": []})
    titles = [line for line in claims_section(tmp_path) if line.startswith("### ")]
    assert titles == [f"### {fmvae_experiments.TITLE}", f"### {vsc_experiments.TITLE}", "### Z"]
    assert "[vsc_experiments/README.md](vsc_experiments/README.md)." in "\n".join(claims_section(tmp_path))


def test_tables_escape_and_verdicts():
    rows = claims_table([Claim("p", "a|b", "c", "m", None).to_dict()])
    assert rows[2] == "| p | a\\|b | c | m | not tested |"
    assert md_table(["x"], [[0.12345]])[2] == "| 0.123 |"


@pytest.mark.parametrize("values, inc, expected", [([1, 2, 3], True, True), ([1, 1, 2], True, False),
                                                   ([3, 2, 1], False, True), ([1], True, False)])
def test_monotone(values, inc, expected):
    assert monotone(values, inc) is expected
