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
            "runs": {"mine-vae-0": {"setup": "mine", "model": "vae", "seed": 0, "group": "custom"}}}


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
    pipeline.run_prior_init(params, "mine")
    pipeline.run_train(params, "mine-vae-0")
    result = pipeline.run_evaluate(params, "mine-vae-0")
    assert np.isfinite(result["test"]["elbo"]) and result["latent_dim"] == 2
    assert json.loads(paths.metrics_file("mine-vae-0", "custom").read_text())


def test_every_data_stage_depends_on_the_inputs_folder():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert "inputs" in stages["data"]["do"]["deps"]
    assert (ROOT / "inputs").is_dir()  # DVC needs the dependency to exist in every clone
