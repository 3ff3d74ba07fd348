"""The pipeline profile's summary of a runner timings record (``make bench-pipeline``)."""

import pytest

from benchmarks.bench_pipeline import summarise


def test_summary_by_kind_fixed_cost_and_peak():
    record = {"jobs": 2, "total_wall_s": 10.0, "restored": [], "up_to_date": 0, "failed": [],
              "stages": {"train@a": {"wall_s": 6.0, "max_rss_mib": 500.0},
                         "train@b": {"wall_s": 4.0, "max_rss_mib": 700.0},
                         "report": {"wall_s": 2.0, "max_rss_mib": 100.0}}}
    s = summarise(record, startup=1.5, noop={"dvc_repro": 2.0, "runner": 1.0})
    assert s["by_kind"]["train"] == {"n": 2, "sum_wall_s": 10.0, "max_wall_s": 6.0}
    assert list(s["by_kind"]) == ["train", "report"]  # largest share first
    assert s["sum_stage_wall_s"] == 12.0 and s["stages_run"] == 3
    assert s["fixed_cost"]["startup_total_s"] == 4.5
    assert s["fixed_cost"]["startup_share_of_stage_wall"] == pytest.approx(4.5 / 12, abs=1e-3)
    assert s["fixed_cost"]["idle_worker_s"] == 8.0  # 2 workers x 10 s - 12 s busy
    assert s["peak_rss"] == {"stage": "train@b", "mib": 700.0}
    assert s["noop_s"]["dvc_repro"] == 2.0


def test_a_forked_stage_launch_costs_a_fraction_of_a_new_interpreter():
    """What the preloaded runner saves per stage: measured here 0.05 s forked against 2 s spawned."""
    from pathlib import Path

    from benchmarks.bench_pipeline import startup_s

    root = Path(__file__).resolve().parents[1]
    forked, spawned = startup_s(root, repeats=3), startup_s(root, repeats=1, preload=False)
    assert forked < 0.5 * spawned, (forked, spawned)
