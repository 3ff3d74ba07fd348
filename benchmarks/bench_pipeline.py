"""``make bench-pipeline``: where the wall time of a full pipeline run goes.

Runs the whole pipeline of a profile (default ``cpu``) from a clean workspace — a git copy of the
project with the installed data sets linked in — through the parallel runner (``make repro``), then
measures a no-op ``dvc repro`` and a no-op runner pass on the finished workspace.  Summarises, into
the ``pipeline`` entry of ``reports/bench.json``:

* total wall, and wall by stage kind (``train@...`` -> ``train``): count, sum, largest;
* the fixed cost per stage: the launch and imports of a stage script as the runner makes them (measured:
  a script that imports ``priorlab.pipeline``, forked from the preloaded process; a new interpreter's
  under ``startup_new_interpreter_s``), and the idle worker time, total wall × workers − Σ stage wall
  (the runner's own DVC work and the waits on the critical path, together);
* the peak RSS of the largest stage.

``--from-timings FILE`` summarises a ``python -m stagerun.repro --timings FILE`` record of a run
made elsewhere (e.g. the committed run, made in place) instead of running the pipeline;
``--noop-only`` re-measures just the no-op passes of this (up-to-date) workspace into the record.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.project_copy import copy_project, pipeline_env


def startup_s(cwd: Path, repeats: int = 5, preload: bool = True) -> float:
    """Median wall from launch to exit of a stage script that only imports what every torch stage script
    imports: forked from the preloaded process, as the runner launches stages (:mod:`stagerun.prefork`),
    or (``preload=False``) in a new interpreter, as ``dvc repro`` and ``--no-preload`` do."""
    walls = []
    if not preload:
        for _ in range(repeats):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import priorlab.pipeline, priorlab.cli"], cwd=cwd,
                           env=pipeline_env(cwd), check=True, capture_output=True)
            walls.append(time.perf_counter() - t0)
        return statistics.median(walls)
    from stagerun import prefork

    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "imports_only.py"
        script.write_text("import priorlab.pipeline, priorlab.cli\n")
        server = prefork.Preloaded(cwd / "stages", env=pipeline_env(cwd))
        try:
            for i in range(repeats + 1):  # the first waits for the preloading itself: not a stage's cost
                t0 = time.perf_counter()
                pid = server.spawn([str(script)], str(cwd), {})
                while server.poll(pid) is None:
                    time.sleep(0.002)
                if i:
                    walls.append(time.perf_counter() - t0)
        finally:
            server.close()
    return statistics.median(walls)


def noop_s(cwd: Path, repeats: int = 3) -> dict:
    """Median wall of ``dvc repro`` and of the runner (``make repro``) on an up-to-date workspace,
    ``repeats`` runs each, alternating (both must run nothing); every run's wall under ``*_runs``."""
    runs: dict[str, list[float]] = {"dvc_repro": [], "runner": []}
    for _ in range(repeats):
        for name, cmd in (("dvc_repro", [sys.executable, "-m", "dvc", "repro"]),
                          ("runner", [sys.executable, "-m", "stagerun.repro", "-j", "2"])):
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=cwd, env=pipeline_env(cwd), capture_output=True, text=True, check=True)
            runs[name].append(round(time.perf_counter() - t0, 2))
            if (name == "runner" and "0 stage(s) ran" not in proc.stdout) or \
                    (name == "dvc_repro" and "up to date" not in proc.stdout):
                raise RuntimeError(f"the no-op pass ({name}) ran stages:\n{proc.stdout[-2000:]}")
    out: dict = {name: round(statistics.median(walls), 2) for name, walls in runs.items()}
    out.update({f"{name}_runs": walls for name, walls in runs.items()})
    return out


def summarise(timings: dict, startup: float, noop: dict | None = None, startup_new_interpreter: float | None = None) -> dict:
    """The ``pipeline`` entry of bench.json from a runner timings record; ``startup``: a stage's launch
    as the runner made it (forked, by default), ``startup_new_interpreter``: the same in a new interpreter."""
    stages = timings["stages"]
    kinds: dict[str, list[float]] = defaultdict(list)
    for name, t in stages.items():
        kinds[name.split("@")[0]].append(t["wall_s"])
    total, jobs = timings["total_wall_s"], timings["jobs"]
    busy = sum(t["wall_s"] for t in stages.values())
    largest = max(stages, key=lambda n: stages[n]["max_rss_mib"])
    fixed_startup = startup * len(stages)
    out = {
        "jobs": jobs,
        "stages_run": len(stages),
        "total_wall_s": total,
        "sum_stage_wall_s": round(busy, 1),
        "by_kind": {k: {"n": len(v), "sum_wall_s": round(sum(v), 1), "max_wall_s": round(max(v), 1)}
                    for k, v in sorted(kinds.items(), key=lambda kv: -sum(kv[1]))},
        "fixed_cost": {
            "startup_per_stage_s": round(startup, 2),
            "startup_total_s": round(fixed_startup, 1),
            "startup_share_of_stage_wall": round(fixed_startup / busy, 3) if busy else None,
            **({"startup_new_interpreter_s": round(startup_new_interpreter, 2)} if startup_new_interpreter else {}),
            "idle_worker_s": round(max(0.0, total * jobs - busy), 1),
        },
        "peak_rss": {"stage": largest, "mib": stages[largest]["max_rss_mib"]},
    }
    if noop is not None:
        out["noop_s"] = noop
    return out


def print_summary(s: dict) -> None:
    print(f"pipeline: {s['stages_run']} stages, {s['total_wall_s']:.0f} s wall on {s['jobs']} workers "
          f"(sum of stage walls {s['sum_stage_wall_s']:.0f} s)")
    for kind, row in s["by_kind"].items():
        print(f"  {kind:24s} n={row['n']:3d}  sum {row['sum_wall_s']:7.1f} s  max {row['max_wall_s']:6.1f} s")
    f = s["fixed_cost"]
    print(f"  start-up {f['startup_per_stage_s']:.2f} s/stage = {f['startup_total_s']:.0f} s "
          f"({100 * (f['startup_share_of_stage_wall'] or 0):.0f}% of stage wall); idle worker time {f['idle_worker_s']:.0f} s")
    print(f"  peak RSS {s['peak_rss']['mib']:.0f} MiB ({s['peak_rss']['stage']})")
    if "noop_s" in s:
        n = s["noop_s"]
        spread = {k: f" ({min(n[k + '_runs']):.1f}-{max(n[k + '_runs']):.1f})" if n.get(k + "_runs") else ""
                  for k in ("dvc_repro", "runner")}
        print(f"  no-op (median): dvc repro {n['dvc_repro']:.1f} s{spread['dvc_repro']}, "
              f"runner (make repro) {n['runner']:.1f} s{spread['runner']}")


def run_in_copy(root: Path, profile: str, jobs: int) -> dict:
    """The whole pipeline of ``profile`` from a clean git copy of ``root`` (data sets linked in)."""
    with tempfile.TemporaryDirectory() as tmp:
        project = copy_project(root, Path(tmp))
        if (root / ".datasets").exists():
            (project / ".datasets").symlink_to((root / ".datasets").resolve())
        env = pipeline_env(project)
        subprocess.run([sys.executable, "-m", "priorlab.config", "use", profile], cwd=project, env=env, check=True,
                       capture_output=True)
        record = project / "timings.json"
        subprocess.run([sys.executable, "-m", "stagerun.repro", "-j", str(jobs), "--timings", str(record)],
                       cwd=project, env=env, check=True)
        return summarise(json.loads(record.read_text()), startup_s(project), noop_s(project),
                         startup_s(project, preload=False))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--from-timings", default=None, help="summarise this runner record (run in place) instead")
    ap.add_argument("--noop-only", action="store_true",
                    help="re-measure only the no-op passes of this up-to-date workspace into --out")
    ap.add_argument("--out", default="reports/bench.json")
    args = ap.parse_args(argv)
    root = Path.cwd()
    out = Path(args.out)
    bench = json.loads(out.read_text()) if out.is_file() else {}
    if args.noop_only:
        if "pipeline" not in bench:
            print(f"error: {out} has no pipeline record to add the no-op passes to", file=sys.stderr)
            return 2
        bench["pipeline"]["noop_s"] = noop_s(root)
        print_summary(bench["pipeline"])
        out.write_text(json.dumps(bench, indent=2, sort_keys=True) + "\n")
        print(f"wrote {out} (pipeline.noop_s)")
        return 0
    if args.from_timings:
        summary = summarise(json.loads(Path(args.from_timings).read_text()), startup_s(root), noop_s(root),
                            startup_s(root, preload=False))
    else:
        summary = run_in_copy(root, args.profile, args.jobs)
    summary["profile"] = args.profile
    print_summary(summary)
    bench["pipeline"] = summary
    out.write_text(json.dumps(bench, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out} (pipeline)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
