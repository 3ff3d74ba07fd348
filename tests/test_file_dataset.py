"""issue 46: the ``file`` data-set kind — a user's file under ``inputs/`` built by the ``data`` stage like
any data set (seeded split, sha256 in the manifest), then trained and scored by the pipeline's stages."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from priorlab import paths
from priorlab.config import ParamsError, parse_params
from priorlab.data.store import build_arrays, load_dataset, write_dataset
from priorlab.errors import DataError

ROOT = paths.Path(__file__).resolve().parents[1]


def raw_params(**dataset):
    entry = {"kind": "file", "path": "inputs/cells.csv", "observation": "counts", "labels": "cell_type",
             "n_train": 60, "n_test": 20, **dataset}
    return {"profile": "tiny", "device": "cpu", "threads": 1, "datasets": {"mine": entry},
            "setups": {"mine": {"dataset": "mine", "latent_dim": 2, "hidden": [8, 8], "likelihood": "multinomial",
                                "pretrain_model": "pretrain"}},
            "models": {"pretrain": {"kind": "vae"}, "vae": {"kind": "vae"}},
            "pretrain": {"steps": 6, "batch_size": 10, "lr": 0.001}, "train": {"steps": 6, "batch_size": 10, "lr": 0.001},
            "evaluate": {"iw_samples": 3, "metrics": []},
            "runs": {"mine-vae-0": {"setup": "mine", "model": "vae", "seed": 0, "group": "baselines/custom"}}}


@pytest.fixture
def project(tmp_path, monkeypatch):
    pd = pytest.importorskip("pandas")
    rs = np.random.RandomState(0)
    frame = pd.DataFrame(rs.poisson(2.0, size=(90, 7)), columns=[f"g{i}" for i in range(7)])
    frame["cell_type"] = np.array(["B", "T", "NK"])[rs.randint(0, 3, 90)]
    (tmp_path / "inputs").mkdir()
    frame.to_csv(tmp_path / "inputs" / "cells.csv", index=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("path,expected", [("cells.csv", "under inputs/"), ("inputs/../x.csv", "under inputs/"),
                                           ("/tmp/inputs/x.csv", "under inputs/"), ("inputs/x.txt", "reads .npz")])
def test_the_path_is_a_readable_file_under_inputs(path, expected):
    with pytest.raises(ParamsError, match=expected):
        parse_params(raw_params(path=path))


def test_the_data_stage_builds_a_seeded_split_with_labels(project):
    params = parse_params(raw_params()).datasets["mine"]
    manifest = write_dataset(project / "data" / "mine", params, build_arrays(params))
    data = load_dataset(project / "data" / "mine")
    assert data.observation_kind == "counts" and data.obs_shape == (7,) and data.num_classes == 3
    assert len(data.arrays["x_train"]) == 60 and len(data.arrays["x_test"]) == 20
    assert manifest["params"]["path"] == "inputs/cells.csv"
    again = build_arrays(params)
    np.testing.assert_array_equal(again["x_train"], data.arrays["x_train"])  # seeded
    other = build_arrays(parse_params(raw_params(seed=1)).datasets["mine"])
    assert not np.array_equal(other["x_train"], data.arrays["x_train"])


def test_the_declared_observation_is_checked(project):
    params = parse_params(raw_params(observation="image")).datasets["mine"]
    with pytest.raises(DataError, match="observation: image needs integer pixels"):
        build_arrays(params)
    params = parse_params(raw_params(n_train=80, n_test=20)).datasets["mine"]
    with pytest.raises(DataError, match="n_train \\+ n_test = 100 but the data have 90 rows"):
        build_arrays(params)
    vectors = build_arrays(parse_params(raw_params(observation="vector")).datasets["mine"])
    assert vectors["x_train"].dtype == np.float32


def test_a_model_trains_and_is_scored_on_it_through_the_stages(project):
    from priorlab import pipeline

    params = parse_params(raw_params())
    pipeline.run_data(params, "mine")
    pipeline.run_pretrain(params, "mine")
    pipeline.run_setup_runs(params)
    pipeline.run_prior_init(params, "mine")
    pipeline.run_train(params, "mine-vae-0")
    result = pipeline.run_evaluate(params, "mine-vae-0")
    assert np.isfinite(result["test"]["elbo"]) and result["latent_dim"] == 2
    assert json.loads(paths.metrics_file("mine-vae-0", "baselines/custom").read_text())


def test_every_data_stage_depends_on_the_inputs_folder():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert "inputs" in stages["data"]["do"]["deps"]
    assert (ROOT / "inputs").is_dir()  # DVC needs the dependency to exist in every clone


@pytest.mark.parametrize("kind", ["vae", "fmvae"])
def test_the_api_fits_the_weights_of_the_pipelines_train_stage(project, kind):
    """One code path: ``priorlab.model(kind).fit`` on the training rows of a data set gives, bit for bit,
    the weights the stages data@ -> pretrain@ -> prior_init@ -> train@ write for the same settings and seed."""
    import torch

    import priorlab
    from priorlab import pipeline
    from priorlab.io import load_torch

    raw = raw_params()
    raw["models"]["vae"] = {"kind": kind}
    params = parse_params(raw)
    pipeline.run_data(params, "mine")
    pipeline.run_pretrain(params, "mine")
    pipeline.run_setup_runs(params)
    pipeline.run_prior_init(params, "mine")
    pipeline.run_train(params, "mine-vae-0")
    stage = load_torch(paths.train_dir("mine-vae-0", "baselines/custom") / "model.pt")["state_dict"]

    x = load_dataset(project / "data" / "mine").arrays["x_train"]
    api = priorlab.model(kind, latent_dim=2, hidden=[8, 8], likelihood="multinomial").fit(
        x, steps=6, pretrain_steps=6, batch_size=10, lr=0.001, seed=0, validation=0.0, device="cpu", progress=False)
    got = api.module.state_dict()
    assert list(got) == list(stage)
    for name, value in stage.items():
        assert same(got[name], value), name


def same(a, b) -> bool:
    """Equal tensors, bit for bit; or equal containers of them (a module's extra state)."""
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def test_factors_in_a_file_are_scored_on_its_test_rows(project):
    """A .npz with ground-truth factors: MIG and DCI score a run on the held-out rows of the table; a
    metric that needs factor combinations the table lacks says so."""
    from priorlab import pipeline
    from priorlab.data.store import ground_truth

    rs = np.random.RandomState(0)
    factors = rs.randint(0, 3, size=(90, 2))
    x = np.concatenate([np.eye(3)[factors[:, 0]], np.eye(3)[factors[:, 1]]], axis=1) * 5
    np.savez(project / "inputs" / "toy.npz", x=rs.poisson(x + 0.5), f=factors)
    raw = raw_params(path="inputs/toy.npz", labels="", factors="f")
    raw["evaluate"] = {"iw_samples": 3, "metrics": ["mig", "dci"], "metric_num_train": 40, "metric_num_test": 20}
    params = parse_params(raw)
    pipeline.run_data(params, "mine")
    assert load_dataset(project / "data" / "mine").has_factors
    table = ground_truth(params.datasets["mine"])
    assert table.factor_names == ("factor0", "factor1") and table.observation_shape == (6,)
    got_f, got_x = table.sample(5, 0)
    rows = table.sample_observations_from_factors(got_f, 1)  # a row of the table with each factor vector
    for f, row in zip(got_f, rows):
        assert any(np.array_equal(row, x) for x in table.observations[(table.factors == f).all(axis=1)])
    pipeline.run_pretrain(params, "mine")
    pipeline.run_setup_runs(params)
    pipeline.run_prior_init(params, "mine")
    pipeline.run_train(params, "mine-vae-0")
    scores = pipeline.run_evaluate(params, "mine-vae-0")["disentanglement"]
    assert 0 <= scores["mig"] <= 1 and 0 <= scores["dci"]["disentanglement"] <= 1, scores
    with pytest.raises(DataError, match="no row has the factors \\[9, 9\\]"):
        table.sample_observations_from_factors(np.array([[9, 9]]), 0)
    with pytest.raises(ParamsError, match="factors are read from .npz files"):
        parse_params(raw_params(factors="f"))


def test_prior_init_reads_the_setup_runs_file_of_these_params_or_refuses(project):
    """issue 44: ``prior_init@<setup>`` depends on ``models/setup_runs/<setup>.json``, not on the whole
    ``models`` / ``runs`` sections; it checks the file is its params' slice, so a stale file is one line."""
    from priorlab import pipeline

    params = parse_params(raw_params())
    pipeline.run_data(params, "mine")
    pipeline.run_pretrain(params, "mine")
    with pytest.raises(ParamsError, match="run the setup_runs stage first"):
        pipeline.run_prior_init(params, "mine")  # no file yet
    pipeline.run_setup_runs(params)
    recorded = json.loads(paths.setup_runs_file("mine").read_text())
    assert recorded["runs"] == {"mine-vae-0": {"model": "vae", "seed": 0, "settings": params.model("vae").fields()}}
    raw = raw_params()
    raw["models"]["vae"]["beta"] = 2.0  # a setting prior_init reads, changed after the file was written
    with pytest.raises(ParamsError, match="older than params.yaml's runs of setup 'mine'"):
        pipeline.run_prior_init(parse_params(raw), "mine")
    raw = raw_params()
    raw["runs"]["other-vae-0"] = {"setup": "mine", "model": "vae", "seed": 1, "group": "baselines/custom"}
    with pytest.raises(ParamsError, match="older than"):
        pipeline.run_prior_init(parse_params(raw), "mine")
    pipeline.run_prior_init(params, "mine")
