"""The metrics files (what `dvc metrics show / diff` lists): a few headline numbers under the same keys in
every file of a group, whatever its seeds or runs, so the table has a row per cell (or run) and a column per
number; the per-seed numbers stay in rows.json and each run's full record in the evaluate stage's output."""

from __future__ import annotations

import pytest

from priorlab.studies.isa_experiments import fit as isa_fit

from priorlab.studies.mssc_experiments import fit as mssc_fit

from priorlab.studies.sparse_vae_experiments import fit as sparse_vae_fit

from priorlab.studies.fmvae_experiments import supervised_ceiling
from priorlab.metric_registry import columns, headline, report_columns


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
    assert out["sparse_vae"] == pytest.approx({"datasets": 2, "mse": 2.0, "dci_d": 0.3, "f1": 0.5})
    assert out["nmf"] == {"datasets": 1, "mse": 5.0}
    more = rows + [{"method": "sparse_vae", "seed": 2, "mse": 2.0, "dci_d": 0.3, "f1": 0.5}]
    assert set(_flat(sparse_vae_fit.cell_metrics(more))) == set(_flat(out))


def test_isa_cell_is_keyed_by_strength_not_by_run():
    def row(strength, seed):
        return {"run": f"isa_vae-{strength:g}-{seed}", "strength": strength, "kind": "vae",
                **{k: (0.1 * strength if k == "mig" else None) for k in isa_fit.SCORES}}

    out = isa_fit.cell_metrics([row(1.0, 0), row(2.0, 0)])
    assert out == {"beta-1": {"mig": 0.1}, "beta-2": {"mig": 0.2}}
    assert list(isa_fit.cell_metrics([{**row(10.0, 0), "kind": "factor_vae"}])) == ["gamma-10"]
    assert set(_flat(isa_fit.cell_metrics([row(1.0, 3), row(2.0, 3)]))) == set(_flat(out))  # another seed's cell


def test_run_headline_takes_the_registry_columns_by_short_name():
    record = {"run": "x-vae-0", "settings": {"profile": "tiny"}, "test": {"elbo": -90.0, "kl": 5.0, "log_lik": -85.0},
              "active_dims": 3, "disentanglement": {"mig": 0.2, "dci": {"disentanglement": 0.4, "completeness": 0.5,
                                                                       "informativeness_test": 0.9, "backend": "x"},
                                                   "beta_vae_score": {"eval_accuracy": 0.7, "train_accuracy": 0.8}}}
    assert headline(record) == {"elbo": -90.0, "kl": 5.0, "log_lik": -85.0, "active_dims": 3, "mig": 0.2,
                                "dci_d": 0.4, "dci_c": 0.5, "dci_i": 0.9, "beta_vae": 0.7}
    assert headline({"run": "y"}) == {}  # nothing measured, nothing listed (no nan columns)
    names = [c.name for c in columns()]
    assert len(set(names)) == len(names) and len(set(report_columns())) == len(names)  # one name per key
    assert max(map(len, names)) <= 20  # short: the table of a group fits a screen


def test_supervised_ceiling_headline_has_a_file_per_classifier():
    rep = {"accuracy": 0.95, "val_accuracy": 0.96, "steps": 4600, "best_step": 3600, "stopped": "plateau",
           "val_history": [0.9, 0.96], "correct": "ff"}
    entry = {"accuracy": 0.94, "stopped": "plateau", "replicates": [rep, {**rep, "accuracy": 0.93}]}
    out = supervised_ceiling.headline({"targets": {
        "mnist:label": {"native": "28", "resolutions": {"28": entry}},
        "dsprites:shape": {"native": "32", "resolutions": {"32": entry, "64": {**entry, "stopped": "max_steps"}}}}})
    assert sorted(out) == ["dsprites-shape-32", "dsprites-shape-64", "mnist-label-28"]
    assert out["mnist-label-28"] == {"accuracy": 0.94, "accuracy_min": 0.93, "accuracy_max": 0.95, "steps_max": 4600,
                                     "plateau": 1}
    assert out["dsprites-shape-64"]["plateau"] == 0
