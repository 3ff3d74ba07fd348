"""The dvclive folder kept in a training checkpoint (priorlab.train.live): exact round trip, the
rows of a killed attempt dropped on restore, and unsafe snapshots refused."""

from __future__ import annotations

import io
import shutil

import pytest
import torch

from priorlab.train.live import restore, snapshot


def _write(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _tree(root) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_round_trip_restores_exactly_the_files_at_the_checkpoint(tmp_path):
    live = tmp_path / "live"
    _write(live, {"metrics.json": '{"step": 20}\n', "plots/metrics/train/loss.tsv": "step\tloss\n10\t3.0\n20\t2.5\n"})
    snap = snapshot(live)
    at_checkpoint = _tree(live)
    # the killed attempt went on logging, and DVC may or may not have removed the folder since
    _write(live, {"metrics.json": '{"step": 30}\n', "plots/metrics/train/loss.tsv": "step\tloss\n10\t3.0\n20\t2.5\n30\t2.0\n",
                  "plots/metrics/train/kl.tsv": "step\tkl\n30\t1.0\n"})
    restore(live, snap)
    assert _tree(live) == at_checkpoint
    shutil.rmtree(live)
    restore(live, snap)
    assert _tree(live) == at_checkpoint


def test_snapshot_survives_torch_save_and_a_weights_only_load(tmp_path):
    live = tmp_path / "live"
    _write(live, {"plots/metrics/pretrain/elbo.tsv": "step\telbo\n5\t-40.0\n"})
    buffer = io.BytesIO()
    torch.save({"step": 5, "live": snapshot(live)}, buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    restore(tmp_path / "other", state["live"])
    assert _tree(tmp_path / "other") == _tree(live)


def test_missing_folder_snapshots_empty_and_restores_an_empty_folder(tmp_path):
    snap = snapshot(tmp_path / "absent")
    assert snap["files"] == {}
    restore(tmp_path / "absent", snap)
    assert (tmp_path / "absent").is_dir() and not any((tmp_path / "absent").iterdir())


@pytest.mark.parametrize("bad", [None, {"files": {}}, {"version": 1, "files": {"../x": b""}},
                                 {"version": 1, "files": {"/etc/x": b""}}])
def test_bad_snapshots_are_refused_before_anything_is_removed(tmp_path, bad):
    live = tmp_path / "live"
    _write(live, {"metrics.json": "{}\n"})
    with pytest.raises(ValueError):
        restore(live, bad)
    assert (live / "metrics.json").exists()
