"""issue 46: priorlab on your own data — ``priorlab.model(kind, ...).fit(X)`` on the pipeline's code path,
arrays of every accepted type in, the fitted model's codes / scores / files out, clear errors."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import numpy as np
import pytest
import torch

import priorlab
from priorlab.config import ParamsError
from priorlab.errors import DataError, UserError


def gaussian_data(n=240, g=12, k=3, seed=0):
    rs = np.random.RandomState(seed)
    return (rs.randn(n, k) @ rs.randn(k, g) + 0.1 * rs.randn(n, g)).astype(np.float32)


SMALL = dict(latent_dim=3, hidden=[16, 16])
FIT = dict(steps=30, batch_size=40, progress=False)


def test_settings_are_checked_before_any_data_is_read():
    with pytest.raises(ParamsError, match="unknown; kinds: vae"):
        priorlab.model("vea", latent_dim=2)
    with pytest.raises(ParamsError, match="unknown setting 'latnt_dim'.*the nets take latent_dim"):
        priorlab.model("vae", latnt_dim=2)
    with pytest.raises(ParamsError, match="latent_dim is required"):
        priorlab.model("vsc", alpha=0.1)
    with pytest.raises(ParamsError, match=r"vsc.alpha must be in \(0, 1\)"):
        priorlab.model("vsc", latent_dim=2, alpha=2.0)
    with pytest.raises(ParamsError, match="hidden"):
        priorlab.model("vae", latent_dim=2, hidden="wide")


def test_fit_latent_score_save_load_round_trip(tmp_path):
    x = gaussian_data()
    model = priorlab.model("vae", **SMALL).fit(x, seed=3, validation=0.25, **FIT)
    assert model.history["settings"]["n_validation"] == 60 and model.history["settings"]["n_train"] == 180
    assert model.history["train"]["steps"] == 30
    assert model.setup.likelihood == "gaussian" and model.setup.learn_obs_std  # real-valued vectors
    assert set(model.validation) == {"elbo", "log_lik", "kl", "iw_log_likelihood"}
    codes = model.latent(x)
    assert codes.shape == (240, 3) and codes.dtype == np.float64
    scores = model.score(x[:50], iw_samples=5)
    assert scores["elbo"] == pytest.approx(scores["log_lik"] - scores["kl"], rel=1e-5)
    assert scores["iw_log_likelihood"] >= scores["elbo"] - 1e-3  # L_k >= ELBO on average
    assert model.reconstruct(x[:4]).shape == (4, 12)
    path = model.save(tmp_path / "m.pt")
    again = priorlab.load(path)
    np.testing.assert_array_equal(again.latent(x), codes)
    assert again.score(x[:50], iw_samples=5) == scores  # seeded: the same numbers
    assert again.setup == model.setup and again.spec == model.spec and again.validation == model.validation


def test_fitting_is_seeded():
    x = gaussian_data()
    a = priorlab.model("vae", **SMALL).fit(x, seed=1, **FIT).latent(x)
    b = priorlab.model("vae", **SMALL).fit(x, seed=1, **FIT).latent(x)
    c = priorlab.model("vae", **SMALL).fit(x, seed=2, **FIT).latent(x)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_one_code_path_with_the_pipeline_phases():
    """fit = phases.start_model (prior_init) + phases.fit_phase (train) with the same seeds: the same
    weights as calling the pipeline's phase functions by hand."""
    from priorlab.config import OptimParams, SetupParams, VAEParams
    from priorlab.data.arrays import Encoding
    from priorlab.data.store import user_dataset
    from priorlab.phases import fit_phase, start_model

    x = gaussian_data()
    est = priorlab.model("vae", likelihood="gaussian", **SMALL).fit(x, seed=4, validation=0.0, **FIT)
    data = user_dataset(x, Encoding.of(x), validation=0.0, seed=4)
    setup = SetupParams(dataset="user", latent_dim=3, hidden=[16, 16], likelihood="gaussian")
    model, _ = start_model(setup, VAEParams(kind="vae", warm_start="scratch"), data, None, 4, torch.device("cpu"))
    model.set_phase("train")
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        fit_phase(model, data, OptimParams(steps=30, batch_size=40, lr=1e-3, seed=4), checkpoint=f"{d}/c.pt",
                  live_dir=None, fingerprint="x", device=torch.device("cpu"), desc="t", progress=False)
    for (name, a), (_, b) in zip(est.module.state_dict().items(), model.state_dict().items()):
        assert torch.equal(a, b), name


def test_pretraining_then_prior_init_for_the_mixture_prior():
    x = gaussian_data()
    model = priorlab.model("fmvae", **SMALL).fit(x, pretrain_steps=20, **FIT)
    assert model.history["pretrain"]["steps"] == 20 and "prior_init" in model.history
    assert model.spec.warm_start == "pretrain"
    fresh = priorlab.model("fmvae", **SMALL).fit(x, **FIT)
    assert "pretrain" not in fresh.history and fresh.spec.warm_start == "scratch"


def test_vsc_spikes_and_sparse_vae_masks():
    x = gaussian_data()
    vsc = priorlab.model("vsc", alpha=0.2, **SMALL).fit(x, pretrain_steps=10, **FIT)
    gamma = vsc.spikes(x[:7])
    assert gamma.shape == (7, 3) and (gamma >= 0).all() and (gamma <= 1).all()
    sparse = priorlab.model("sparse_vae", **SMALL).fit(x, **FIT)
    p = sparse.masks()
    assert p.shape == (12, 3) and (p >= 0).all() and (p <= 1).all()
    with pytest.raises(UserError, match="no spike-and-slab posterior"):
        sparse.spikes(x)
    with pytest.raises(UserError, match="no decoder masks"):
        vsc.masks()


def test_em_kinds_fit_without_an_elbo():
    x = (gaussian_data() > 0).astype(np.float32)
    model = priorlab.model("ppca", latent_dim=2).fit(x, **FIT)
    assert model.validation is None and model.latent(x).shape == (240, 2)
    with pytest.raises(UserError, match="no ELBO"):
        model.score(x)


def test_accepted_inputs_give_the_same_model():
    pd = pytest.importorskip("pandas")
    x = gaussian_data()
    ref = priorlab.model("vae", **SMALL).fit(x, **FIT).latent(x)
    for given in (torch.from_numpy(x), pd.DataFrame(x, columns=[f"g{i}" for i in range(12)])):
        np.testing.assert_array_equal(priorlab.model("vae", **SMALL).fit(given, **FIT).latent(given), ref)


def test_anndata_layers(monkeypatch):
    """AnnData input (counts from a layer, as scvi-tools users pass them), without needing anndata: a
    stand-in class registered as the ``anndata`` module."""

    class AnnData:
        def __init__(self, X, layers):
            self.X, self.layers = X, layers

    monkeypatch.setitem(sys.modules, "anndata", types.SimpleNamespace(AnnData=AnnData))
    counts = np.random.RandomState(0).poisson(3.0, size=(120, 10))
    adata = AnnData(np.log1p(counts).astype(np.float32), {"counts": counts})
    model = priorlab.model("vae", **SMALL).fit(adata, layer="counts", **FIT)
    assert model.encoding.kind == "counts" and model.setup.likelihood == "multinomial"
    assert model.latent(adata, layer="counts").shape == (120, 3)
    with pytest.raises(DataError, match="no layer 'raw'; layers: counts"):
        model.latent(adata, layer="raw")


def test_images_are_scaled_and_their_shape_checked():
    rs = np.random.RandomState(0)
    imgs = (rs.rand(100, 8, 8) * 255).astype(np.uint8)  # [N, H, W]: one channel added
    model = priorlab.model("vae", **SMALL).fit(imgs, **FIT)
    assert model.encoding.kind == "image" and model.encoding.shape == (1, 8, 8) and model.encoding.pixel_max == 255
    assert model.setup.likelihood == "bernoulli"
    with pytest.raises(DataError, match=r"rows of shape \[1, 4, 4\]; the model was fitted on rows of shape \[1, 8, 8\]"):
        model.latent(imgs[:, :4, :4])


def test_bad_input_is_named():
    x = gaussian_data()
    bad = x.copy()
    bad[17, 2] = np.nan
    with pytest.raises(DataError, match="row 17 holds NaN"):
        priorlab.model("vae", **SMALL).fit(bad, **FIT)
    with pytest.raises(ParamsError, match="batch_size 500 is more than the 216 training rows"):
        priorlab.model("vae", **SMALL).fit(x, steps=5, batch_size=500, progress=False)
    with pytest.raises(DataError, match=r"validation must lie in \[0, 1\), got 1.5"):
        priorlab.model("vae", **SMALL).fit(x, validation=1.5, **FIT)
    with pytest.raises(UserError, match="not fitted yet"):
        priorlab.model("vae", **SMALL).latent(x)
    with pytest.raises(DataError, match="y: 3 values for 240 observations"):
        priorlab.model("vae", **SMALL).fit(x, y=[0, 1, 1], **FIT)
    with pytest.raises(DataError, match=r"values in \[-.*\], outside \[0, 1\], for the Bernoulli likelihood"):
        priorlab.model("vae", likelihood="bernoulli", **SMALL).fit(x, **FIT)
    with pytest.raises(DataError, match="multinomial likelihood needs counts.*non-integer"):
        priorlab.model("vae", likelihood="multinomial", **SMALL).fit(np.abs(x), **FIT)
    with pytest.raises(DataError, match="multinomial likelihood needs counts.*negative"):
        priorlab.model("vae", likelihood="multinomial", **SMALL).fit(np.round(x), **FIT)
    with pytest.raises(DataError, match="no observations"):
        priorlab.model("vae", **SMALL).fit(x[:0], **FIT)
    with pytest.raises(DataError, match=r"got an array of shape \[240\]"):
        priorlab.model("vae", **SMALL).fit(x[:, 0], **FIT)
    with pytest.raises(DataError, match="shape"):
        priorlab.model("vae", **SMALL).fit(x[:, :, None, None, None], **FIT)


@pytest.mark.slow
def test_an_interrupted_fit_resumes_to_the_uninterrupted_result(tmp_path):
    """A fit killed after its pretraining and part of its training, rerun with the same checkpoint folder,
    ends with the weights of a fit never interrupted (the trainer's exact resume, the finished
    pretraining kept)."""
    x = gaussian_data()
    np.save(tmp_path / "x.npy", x)
    script = (f"import numpy as np, priorlab; x = np.load({str(tmp_path / 'x.npy')!r}); "
              f"priorlab.model('vae', latent_dim=3, hidden=[16, 16]).fit(x, steps=40, pretrain_steps=10, batch_size=40, "
              f"progress=False, checkpoint_every=10, checkpoint_dir={str(tmp_path / 'ck')!r})")
    env = {**os.environ, "PRIORLAB_KILL_AT_STEP": "25"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode != 0  # killed at train step 25
    assert (tmp_path / "ck" / "pretrain.done.pt").is_file() and (tmp_path / "ck" / "train.pt").is_file()
    kw = dict(steps=40, pretrain_steps=10, batch_size=40, progress=False, checkpoint_every=10)
    resumed = priorlab.model("vae", latent_dim=3, hidden=[16, 16]).fit(x, checkpoint_dir=tmp_path / "ck", **kw)
    assert not (tmp_path / "ck" / "train.pt").exists() and not (tmp_path / "ck" / "pretrain.done.pt").exists()
    whole = priorlab.model("vae", latent_dim=3, hidden=[16, 16]).fit(x, **kw)
    for (name, a), (_, b) in zip(resumed.module.state_dict().items(), whole.module.state_dict().items()):
        assert torch.equal(a, b), name


def test_metrics_on_arrays_are_public():
    rs = np.random.RandomState(0)
    factors = rs.randint(0, 4, size=(300, 2))
    codes = factors + 0.1 * rs.randn(300, 2)
    assert priorlab.metrics.mig(codes, factors) > 0.5


def readme_section(title: str) -> str:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    start = text.index(f"## {title}\n")
    return text[start : text.index("\n## ", start + 1)]


def test_the_readme_example_runs(tmp_path, monkeypatch):
    """issue 46: the README's "On your own data" section (at most 25 lines) runs as written, on small data."""
    section = readme_section("On your own data")
    assert len(section.strip().splitlines()) <= 26  # the title and 25 lines
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    x = gaussian_data(n=300, g=16, k=4)
    namespace = {"X": x[:250], "X_new": x[250:]}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["codes"].shape == (250, 8) and namespace["gamma"].shape == (250, 8)
    assert (tmp_path / "vsc.pt").is_file() and namespace["model"].validation is not None


def test_the_console_script_is_installed():
    """`pip install .` declares and installs the `priorlab` command (pyproject's [project.scripts])."""
    import importlib.metadata as md
    import shutil
    from pathlib import Path

    try:
        dist = md.distribution("priorlab")
    except md.PackageNotFoundError:
        pytest.skip("priorlab is not installed as a package here (pip install .)")
    assert [ep.value for ep in dist.entry_points if ep.group == "console_scripts" and ep.name == "priorlab"] == [
        "priorlab.console:main"]
    script = Path(sys.executable).parent / "priorlab"
    command = str(script) if script.exists() else shutil.which("priorlab")
    assert command, "the priorlab command is declared but not installed"
    done = subprocess.run([command, "fit", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "--model" in done.stdout and "--out" in done.stdout
