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


def test_evaluate_elbo_sums_as_python_floats_did(setting):
    # the per-batch sums are added in float64 on the device and read once: the same numbers as adding
    # each batch's .item() to a Python float (what the metrics files were made with)
    from priorlab.models.estimates import evaluate_elbo, iw_log_likelihood

    model, dataset, _ = setting
    x = dataset.prepare(torch.from_numpy(dataset.arrays["x_test"][:100]))
    torch.manual_seed(0)
    got = evaluate_elbo(model, x, 4, batch_size=30)
    torch.manual_seed(0)
    sums = {"elbo": 0.0, "log_lik": 0.0, "kl": 0.0, "iw_log_likelihood": 0.0}
    with torch.no_grad():
        for s in range(0, 100, 30):
            terms = model.terms(x[s : s + 30])
            sums["elbo"] += terms.elbo.sum().item()
            sums["log_lik"] += terms.log_lik.sum().item()
            sums["kl"] += terms.kl.sum().item()
            sums["iw_log_likelihood"] += iw_log_likelihood(model, x[s : s + 30], 4).sum().item()
    assert got == {k: v / 100 for k, v in sums.items()}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_evaluate_model_on_cuda_agrees_with_the_cpu(setting):
    import copy

    model, dataset, data = setting
    ev = EvaluateParams(n_eval=100, iw_samples=5, metric_num_train=200, metric_num_test=100, metric_batch_size=8,
                        metrics=["mig"])
    cpu = evaluate_model(copy.deepcopy(model), dataset, data, ev, profile="test")
    gpu_model = copy.deepcopy(model)
    gpu = evaluate_model(gpu_model, dataset, data, ev, profile="test", device="cuda")
    assert next(gpu_model.parameters()).is_cuda and "device" in gpu["settings"] and "device" not in cpu["settings"]
    assert gpu["test"]["kl"] == pytest.approx(cpu["test"]["kl"], rel=1e-4)  # analytic: the same up to rounding
    assert gpu["test"]["log_lik"] == pytest.approx(cpu["test"]["log_lik"], rel=0.05)  # one sampled z each
    assert gpu["active_dims"] == cpu["active_dims"]
    assert gpu["disentanglement"]["mig"] == pytest.approx(cpu["disentanglement"]["mig"], abs=0.05)


def test_chen_mig_through_the_registry_reads_the_gaussian_posterior(setting):
    """``evaluate.metrics: [mig_chen]``: Chen et al.'s MIG on the posterior's means and variances of the
    sampled points, all factors and without shape; the other metrics' numbers do not move with it."""
    from priorlab.evaluation import metric_random_state, posterior_function
    from priorlab.metrics.mig_chen import mutual_information

    model, dataset, data = setting
    ev = EvaluateParams(n_eval=100, iw_samples=2, metric_num_train=300, metric_num_test=100,
                        metrics=["mig", "mig_chen"])
    out = evaluate_model(model, dataset, data, ev, profile="test")["disentanglement"]
    chen = out["mig_chen"]
    assert 0 <= chen["mig_no_shape"] <= 1 and -0.05 <= chen["mig"] <= 1
    assert np.asarray(chen["mi"]).shape == (4, len(data.factor_names))
    plain = evaluate_model(model, dataset, data, EvaluateParams(**{**ev.__dict__, "metrics": ["mig"]}), "test")
    assert plain["disentanglement"]["mig"] == out["mig"]  # mig_chen draws after the others
    mu, logvar = posterior_function(model, dataset.prepare)(dataset.x("test")[:50].numpy())
    assert mu.shape == logvar.shape == (50, 4)
    with torch.no_grad():
        q = model.posterior(dataset.prepare(dataset.x("test")[:50]))
    np.testing.assert_allclose(np.exp(logvar), q.variance.double().numpy(), rtol=1e-6)
    rs = np.random.RandomState(ev.seed)
    f, x = data.sample(300, rs)  # the metrics' draws: the training points mig_chen scores, then the test points
    data.sample(100, rs)
    own = metric_random_state(int(rs.randint(2**31 - 1)), "mig_chen")  # then one seed, the metric's own state
    again = mutual_information(*posterior_function(model, dataset.prepare)(x), f, n_samples=300, random_state=own)
    np.testing.assert_allclose(again["mi"], chen["mi"], rtol=1e-12, atol=1e-12)


def test_a_metric_does_not_depend_on_which_other_metrics_ran(setting):
    """Each metric samples from its own random state: the sampling metrics (β-VAE, FactorVAE scores) come
    out the same whether DCI and SAP (which also draw) run beside them or not, and in either order."""
    from priorlab.evaluation import disentanglement_scores, representation_function

    model, dataset, data = setting
    represent = representation_function(model, dataset.prepare)
    ev = EvaluateParams(metric_num_train=200, metric_num_test=100, metric_batch_size=8, dci_backend="hist")

    def scores(wanted):
        return disentanglement_scores(data, represent, ev, np.random.RandomState(7), wanted)

    alone = scores(["beta_vae", "factor_vae"])
    beside = scores(["dci", "sap", "beta_vae", "factor_vae", "mig"])
    for key in ("beta_vae_score", "factor_vae_score"):
        assert alone[key] == beside[key]
    assert scores(["factor_vae"])["factor_vae_score"] == alone["factor_vae_score"]
