"""The CSV files behind the data plots of papers 003 and 004 (issue 16): ``recovery_vs_rho.csv`` of
``sparse_vae_experiments`` and ``mig_vs_beta.csv`` / ``mig_vs_gamma.csv`` of ``isa_experiments``,
from small synthetic study results."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from priorlab.studies.isa_experiments import aggregate as ia, claims as ic, fit as isa_fit, report as ir
from priorlab.studies.claims import fmt
from priorlab.studies.sparse_vae_experiments import aggregate as sa, fit as sparse_fit, report as E


def isa_frame() -> pd.DataFrame:
    """Two β models (grid 1, 2, 4), one γ model (grid 1, 10), 3 seeds; MIG = f(model, strength) + seed."""
    rows = []
    for model, kind, grid in (("bvae", "vae", (4.0, 1.0, 2.0)), ("isa", "vae", (1.0, 2.0, 4.0)),
                              ("fvae", "factor_vae", (1.0, 10.0))):
        for s in grid:
            for seed in (0, 1, 2):
                mig = {"bvae": 0.1, "isa": 0.2, "fvae": 0.3}[model] + 0.01 * s + 0.001 * seed ** 2
                rows.append({"run": f"{model}-{s:g}-{seed}", "model": model, "label": model, "kind": kind,
                             "strength": s, "seed": seed, "mig": mig, "mig_no_shape": mig / 2,
                             "chen_mig_no_shape": mig / 4, "chen_floor": 0.001, "recon_log_lik": -30.0 - seed})
    return pd.DataFrame(rows)


def test_mig_tables_hold_the_median_over_seeds_per_strength_and_model():
    tables = ia.strength_tables(isa_frame())
    assert list(tables) == ["mig_vs_beta.csv", "mig_vs_gamma.csv"]
    beta, gamma = tables["mig_vs_beta.csv"], tables["mig_vs_gamma.csv"]
    assert list(beta.columns) == ["beta", "chen_mig_no_shape_bvae", "chen_mig_no_shape_isa", "mig_bvae", "mig_isa",
                                  "mig_no_shape_bvae", "mig_no_shape_isa"]
    assert list(gamma.columns) == ["gamma", "chen_mig_no_shape_fvae", "mig_fvae", "mig_no_shape_fvae"]
    assert beta["beta"].tolist() == [1.0, 2.0, 4.0] and gamma["gamma"].tolist() == [1.0, 10.0]  # sorted
    median_seed = 0.001  # seeds 0, 1, 2 add 0, 0.001, 0.004: the median adds 0.001 (the mean would add 0.00167)
    np.testing.assert_allclose(beta["mig_bvae"], 0.1 + 0.01 * beta["beta"] + median_seed)
    np.testing.assert_allclose(beta["mig_isa"], 0.2 + 0.01 * beta["beta"] + median_seed)
    np.testing.assert_allclose(beta["mig_no_shape_isa"], (0.2 + 0.01 * beta["beta"] + median_seed) / 2)
    np.testing.assert_allclose(gamma["mig_fvae"], 0.3 + 0.01 * gamma["gamma"] + median_seed)
    np.testing.assert_allclose(beta["chen_mig_no_shape_isa"], (0.2 + 0.01 * beta["beta"] + median_seed) / 4)


def test_mig_tables_agree_with_the_claims_median(tmp_path):
    frame = isa_frame()
    frame.loc[frame["model"] == "bvae", "label"] = "β-VAE"
    frame.loc[frame["model"] == "isa", "label"] = "ISA-VAE"
    beta = ia.strength_tables(frame)["mig_vs_beta.csv"].set_index("beta")
    measured = ic.mig_claim(frame).measured
    score = ic.CLAIM_SCORE
    for b in ic.CLAIM_BETAS:
        runs = {m: frame[(frame["model"] == m) & (frame["strength"] == b)][score].to_numpy() for m in ("isa", "bvae")}
        assert f"β={b:g}: ISA {fmt(runs['isa'])} vs β-VAE {fmt(runs['bvae'])}" in measured  # the claim's units
        assert beta.loc[b, f"{score}_isa"] == np.median(runs["isa"])
        assert beta.loc[b, f"{score}_bvae"] == np.median(runs["bvae"])


def test_mig_tables_skip_an_empty_grid_and_keep_missing_scores_missing(tmp_path):
    frame = isa_frame()
    frame = frame[frame["kind"] != "factor_vae"].astype({"mig": object}).reset_index(drop=True)
    frame.loc[(frame["model"] == "isa") & (frame["strength"] == 4.0), "mig"] = None  # a score that failed
    written = ia.write_strength_tables(frame, tmp_path)
    assert written == [tmp_path / "mig_vs_beta.csv"] and not (tmp_path / "mig_vs_gamma.csv").exists()
    back = pd.read_csv(written[0])
    assert back.columns[0] == "beta" and len(back) == 3
    assert back["mig_isa"].isna().tolist() == [False, False, True]
    np.testing.assert_allclose(back["mig_bvae"], ia.strength_tables(frame)["mig_vs_beta.csv"]["mig_bvae"], rtol=1e-9)
    assert ia.strength_tables(ia.study_frame([])) == {}


def sparse_rows() -> list[dict]:
    """Rows as :func:`sparse_vae_experiments.study_rows` makes them: 2 ρ × 2 data sets × 3 methods."""
    rows = []
    for rho in (0.0, 0.5):
        for seed in (0, 1):
            for method, kind in (("s", "sparse_vae"), ("v", "vae"), ("PCA", "linear")):
                row = {"rho": rho, "seed": seed, "method": method, "kind": kind,
                       "mse": 1.0 + rho + seed + len(method), "dci_d": 0.5 - rho / 2 + 0.1 * seed}
                if kind != "vae":
                    row.update(precision=0.5 + 0.1 * seed, recall=1.0, f1=0.6 + 0.2 * seed)
                if kind == "sparse_vae":
                    row["active_columns"] = 2 + seed
                rows.append(row)
    return rows


def test_recovery_table_holds_the_median_per_rho_of_every_score_a_method_has():
    header, rows = sa.recovery_table(sa.summarise(sparse_rows()))
    assert header == ["rho", "mse_s", "mse_v", "mse_PCA", "dci_d_s", "dci_d_v", "dci_d_PCA", "precision_s",
                      "precision_PCA", "recall_s", "recall_PCA", "f1_s", "f1_PCA", "active_columns_s"]
    table = dict(zip(header, np.asarray(rows).T))
    np.testing.assert_allclose(table["rho"], [0.0, 0.5])
    np.testing.assert_allclose(table["mse_s"], 1.0 + table["rho"] + 0.5 + 1)
    np.testing.assert_allclose(table["mse_PCA"], 1.0 + table["rho"] + 0.5 + 3)
    np.testing.assert_allclose(table["dci_d_v"], 0.5 - table["rho"] / 2 + 0.05)
    np.testing.assert_allclose([table["f1_s"], table["f1_PCA"], table["active_columns_s"]], [[0.7] * 2, [0.7] * 2,
                                                                                               [2.5] * 2])


def test_recovery_table_file_round_trips(tmp_path):
    summary = sa.summarise(sparse_rows())
    summary["v"].pop(0.5)  # a method without a ρ: nan there, not a shifted row
    sa.write_recovery_table(summary, tmp_path / "recovery_vs_rho.csv")
    back = np.genfromtxt(tmp_path / "recovery_vs_rho.csv", delimiter=",", names=True)
    header, rows = sa.recovery_table(summary)
    assert list(back.dtype.names) == header
    np.testing.assert_allclose(np.array(back.tolist()), np.asarray(rows, float), rtol=1e-9)
    assert np.isnan(back["mse_v"][1]) and not np.isnan(back["mse_s"][1])
    assert sa.recovery_table({}) == (["rho"], [])
    assert sa.recovery_table({"s": {}}) == (["rho"], [])


# --------------------------------------------------------------------------- the stages write them


def fake_isa_rows(params) -> list[dict]:
    """Rows as :func:`isa_fit.train_and_score` returns them, for every run of the study grid."""
    rng = np.random.default_rng(4)
    rows = []
    for run in isa_fit.study_runs(params):
        mig = float(rng.uniform(0, 0.5))
        rows.append({"run": run.name, "model": run.model, "label": isa_fit.label(run.spec), "kind": run.spec.kind,
                     "strength": run.strength, "seed": run.seed, "train_s": 1.0, "eval_s": 1.0, "exponents": None,
                     "model_params": {}, "metrics": {"versions": {}}, "responses": [rng.normal(size=(3, 4)).tolist()] * 2,
                     "mig": mig, "mig_no_shape": mig / 2, "dci_d": 0.1, "factor_vae_score": 0.5, "beta_vae_score": 0.5,
                     "sap": 0.1, "recon_log_lik": float(rng.normal(-40, 2)), "elbo": -50.0, "chen_mig": mig,
                     "chen_mig_no_shape": mig / 3, "chen_floor": 0.002})
    return rows


def fake_sparse_rows(params) -> list[dict]:
    """Rows as :func:`sparse_vae_experiments.study_rows` makes them (the scores each kind gets), for the
    study's ρ grid and models, two data sets per ρ."""
    study, rng, rows = params.sparse_vae_study, np.random.default_rng(3), []
    for rho in study.rhos:
        for seed in range(2):
            methods = [(m, params.models[m].kind) for m in study.models + study.variant_models] + [
                ("PCA", "linear"), ("FactorAnalysis", "linear")]
            for method, kind in methods:
                row = {"rho": rho, "seed": seed, "method": method, "kind": kind, "mse": float(rng.uniform()),
                       "dci_d": float(rng.uniform())}
                if kind in ("sparse_vae", "linear"):
                    row.update(precision=float(rng.uniform()), recall=float(rng.uniform()), f1=float(rng.uniform()))
                if kind != "linear":
                    row["active_columns"] = int(rng.integers(1, 5))
                    row["collapsed"] = sparse_fit.collapsed(row)
                rows.append(row)
    return rows


def cpu_params():
    from priorlab.config import load_params

    return load_params(Path(__file__).resolve().parents[1] / "profiles" / "cpu.yaml")


def test_isa_stage_writes_the_mig_tables(tmp_path, monkeypatch):
    import priorlab.data.store

    params = cpu_params()
    rows = {r["run"]: r for r in fake_isa_rows(params)}
    monkeypatch.setattr(ir, "read_rows", lambda params: ([rows[r.name] for r in isa_fit.study_runs(params)], ["cpu"]))
    monkeypatch.setattr(priorlab.data.store, "ground_truth", lambda name: type("GT", (), {"factor_names": ("a", "b")}))
    ir.run_isa_experiments(params, tmp_path)
    expected = ia.strength_tables(ia.study_frame(list(rows.values())))
    assert set(expected) == {"mig_vs_beta.csv"}  # the cpu profile runs no FactorVAE: no γ grid (both grids: above)
    assert not (tmp_path / "mig_vs_gamma.csv").exists()
    for name, table in expected.items():
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / name), table, check_dtype=False, rtol=1e-9)
    assert "mig_vs_beta.csv" in (tmp_path / "README.md").read_text()


def test_sparse_vae_stage_writes_the_recovery_table(tmp_path, monkeypatch):
    params = cpu_params()
    rows = fake_sparse_rows(params)
    monkeypatch.setattr(E, "OUT", tmp_path)
    monkeypatch.setattr(E, "study_rows", lambda params: (rows, {}))
    monkeypatch.setattr(E, "real_fits", lambda: {})
    monkeypatch.setattr(E, "run_real", lambda params, fitted: {"claims": [], "lines": [], "movielens": {"rows": []}})
    result = E.run_sparse_vae_experiments(params)
    back = np.genfromtxt(tmp_path / "recovery_vs_rho.csv", delimiter=",", names=True)
    header, table = sa.recovery_table(sa.summarise(rows))
    assert list(back.dtype.names) == header and len(back) == len(params.sparse_vae_study.rhos)
    np.testing.assert_allclose(np.array(back.tolist()), table, rtol=1e-9)
    for method, per_rho in result["summary"].items():  # the summary the report reads, the same medians
        for rho, scores in per_rho.items():
            i = [float(r) for r in back["rho"]].index(float(rho))
            assert back[f"mse_{method}"][i] == pytest.approx(scores["mse"], rel=1e-9)
