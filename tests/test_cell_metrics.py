"""The study cells' metrics files (what `dvc metrics show / diff` lists): the same keys in every cell's
file, whatever its seeds or runs, so the table has a row per cell; the per-seed numbers stay in rows.json."""

from __future__ import annotations

import pytest

from priorlab.experiments import isa_fit, mssc_fit, sparse_vae_fit


def _flat(d, prefix=""):
    for k, v in d.items():
        yield from _flat(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}"]


def test_bars_cell_summarises_its_seeds():
    rows = [{"recovered": True, "n_recovered": 10, "min_correlation": 0.99, "sigma2": 0.02, "pi": 0.2},
            {"recovered": False, "n_recovered": 8, "min_correlation": 0.70, "sigma2": 0.04, "pi": 0.3},
            {"recovered": True, "n_recovered": 10, "min_correlation": 0.95, "sigma2": 0.03, "pi": 0.1}]
    out = mssc_fit.cell_metrics(rows)
    assert out == pytest.approx({"seeds": 3, "all_recovered_rate": 2 / 3, "n_recovered_mean": 28 / 3,
                                 "min_correlation_median": 0.95, "sigma2_mean": 0.03, "pi_mean": 0.2})
    assert set(_flat(mssc_fit.cell_metrics(rows[:1]))) == set(_flat(out))  # keys do not depend on the seeds


def test_sparse_vae_cell_means_per_method_over_its_data_sets():
    rows = [{"method": "sparse_vae", "seed": s, "mse": m, "dci_d": d, "f1": 0.5}
            for s, m, d in [(0, 1.0, 0.2), (1, 3.0, 0.4)]] + [{"method": "nmf", "seed": 0, "mse": 5.0}]
    out = sparse_vae_fit.cell_metrics(rows)
    assert out["sparse_vae"] == pytest.approx({"datasets": 2, "mse_mean": 2.0, "dci_d_mean": 0.3, "f1_mean": 0.5})
    assert out["nmf"] == {"datasets": 1, "mse_mean": 5.0}
    more = rows + [{"method": "sparse_vae", "seed": 2, "mse": 2.0, "dci_d": 0.3, "f1": 0.5}]
    assert set(_flat(sparse_vae_fit.cell_metrics(more))) == set(_flat(out))


def test_isa_cell_is_keyed_by_strength_not_by_run():
    def row(strength, seed):
        return {"run": f"isa_vae-{strength:g}-{seed}", "strength": strength,
                **{k: (0.1 * strength if k == "mig" else None) for k in isa_fit.SCORES}}

    out = isa_fit.cell_metrics([row(1.0, 0), row(2.0, 0)])
    assert out == {"1": {"mig": 0.1}, "2": {"mig": 0.2}}
    assert set(_flat(isa_fit.cell_metrics([row(1.0, 3), row(2.0, 3)]))) == set(_flat(out))  # another seed's cell
