"""The evaluate stage's measurements on a small model and data set."""

import numpy as np
import pytest
import torch

from priorlab.config import DSpritesParams, EvaluateParams
from priorlab.data.store import Dataset, build_arrays, ground_truth
from priorlab.evaluation import evaluate_model, representation_function
from tests.helpers import tiny_model

PARAMS = DSpritesParams(kind="dsprites", n_train=100, n_test=120, resolution=32, seed=0)


@pytest.fixture(scope="module")
def setting():
    arrays = build_arrays(PARAMS)
    dataset = Dataset(name="dsprites", arrays=arrays, manifest={"pixel_max": 1})
    model = tiny_model(latent_dim=4, obs_shape=(1, 32, 32)).eval()
    return model, dataset, ground_truth(PARAMS)


def test_evaluate_model_reports_every_requested_metric(setting):
    model, dataset, data = setting
    ev = EvaluateParams(n_eval=100, iw_samples=5, metric_num_train=400, metric_num_test=400, metric_batch_size=8,
                        dci_backend="hist")
    out = evaluate_model(model, dataset, data, ev, profile="test")
    t = out["test"]
    assert t["elbo"] == pytest.approx(t["log_lik"] - t["kl"], abs=1e-3)
    assert t["iw_log_likelihood"] > t["elbo"] - 5
    assert 0 <= out["active_dims"] <= out["latent_dim"] == 4
    d = out["disentanglement"]
    assert set(d) == {"mig", "dci", "sap", "modularity_explicitness", "beta_vae_score", "factor_vae_score"}
    assert 0 <= d["mig"] <= 1 and 0 <= d["dci"]["completeness"] <= 1
    assert out["settings"]["metric_num_train"] == 400 and out["versions"]["scikit-learn"] == "1.9.1"


def test_evaluation_is_reproducible_and_respects_the_metric_list(setting):
    model, dataset, data = setting
    ev = EvaluateParams(n_eval=50, iw_samples=3, metric_num_train=100, metric_num_test=50, metric_batch_size=8,
                        metrics=["mig", "factor_vae"])
    a = evaluate_model(model, dataset, data, ev, profile="test")
    b = evaluate_model(model, dataset, data, ev, profile="test")
    assert a == b
    assert set(a["disentanglement"]) == {"mig", "factor_vae_score"}
    ev = EvaluateParams(n_eval=50, iw_samples=3, metric_num_train=100, metric_num_test=50,
                        metrics=["mig", "factor_vae"], group_metrics={"fast": ["mig"], "none": []})
    assert set(evaluate_model(model, dataset, data, ev, "test", ev.metrics_for("fast"))["disentanglement"]) == {"mig"}
    c = evaluate_model(model, dataset, data, ev, "test", ev.metrics_for("none"))
    assert "disentanglement" not in c and c["settings"]["metrics"] == []
    assert ev.metrics_for("other") == ["mig", "factor_vae"]


def test_representation_function_is_the_posterior_mean(setting):
    model, dataset, _ = setting
    represent = representation_function(model, dataset.prepare, batch_size=7)
    x = dataset.arrays["x_test"][:20]
    with torch.no_grad():
        expected = model.posterior(dataset.prepare(torch.from_numpy(x))).mean.double().numpy()
    assert np.allclose(represent(x), expected, atol=1e-6)


def test_sampled_representation_is_seeded_and_noisier(setting):
    model, dataset, _ = setting
    x = dataset.arrays["x_test"][:50]
    a = representation_function(model, dataset.prepare, kind="sample", seed=1)
    b = representation_function(model, dataset.prepare, kind="sample", seed=1)
    mean = representation_function(model, dataset.prepare)(x)
    sa, sb = a(x), b(x)
    assert np.array_equal(sa, sb)
    assert not np.array_equal(sa, a(x))  # a fresh draw on the next call
    assert np.abs(sa - mean).mean() > 1e-3
