"""issue 46: the ``priorlab fit`` / ``priorlab score`` command on a data file."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import priorlab
from priorlab.console import main, parse_sets
from priorlab.errors import UserError


def test_parse_sets():
    assert parse_sets(["latent_dim=4", "hidden=[8, 4]", "prior.kind=lp_nested", "prior.p0=2.1", "likelihood=gaussian"]) == {
        "latent_dim": 4, "hidden": [8, 4], "prior": {"kind": "lp_nested", "p0": 2.1}, "likelihood": "gaussian"}
    with pytest.raises(UserError, match="expected DOTTED.KEY=VALUE"):
        parse_sets(["latent_dim"])


def test_fit_then_score(tmp_path, capsys):
    rs = np.random.RandomState(0)
    np.savez(tmp_path / "imgs.npz", x=(rs.rand(80, 1, 8, 8) > 0.6).astype(np.uint8), labels=rs.randint(0, 3, 80))
    out = tmp_path / "run"
    assert main(["fit", "--model", "vae", "--data", str(tmp_path / "imgs.npz"), "--labels", "labels",
                 "--set", "latent_dim=3", "--set", "hidden=[16]", "--steps", "20", "--batch-size", "16",
                 "--validation", "0.25", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["figure.png", "latent.npy", "metrics.json", "model.pt"]
    assert not out.with_name("run.partial").exists()
    record = json.loads((out / "metrics.json").read_text())
    assert record["rows"] == 80 and record["history"]["settings"]["n_validation"] == 20
    assert np.load(out / "latent.npy").shape == (80, 3)
    assert priorlab.load(out / "model.pt").encoding.shape == (1, 8, 8)
    capsys.readouterr()
    assert main(["score", "--model", str(out / "model.pt"), "--data", str(tmp_path / "imgs.npz"),
                 "--iw-samples", "3"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["rows"] == 80 and scores["iw_log_likelihood"] >= scores["elbo"] - 1e-3


def test_bad_input_is_one_line_and_status_2(tmp_path):
    np.save(tmp_path / "x.npy", np.random.RandomState(0).rand(20, 4).astype(np.float32))
    done = subprocess.run([sys.executable, "-m", "priorlab", "fit", "--model", "vae", "--data", str(tmp_path / "x.npy"),
                           "--set", "latnt_dim=2", "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]  # one line
    assert done.stderr.startswith("error: vae: unknown setting 'latnt_dim'")
    assert not (tmp_path / "o").exists()
