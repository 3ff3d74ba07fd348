"""How many EM iterations does the bars test need?  The recovery rate of a bars model against the
number of full-batch EM iterations and the annealing length, on a profile's bars entry (issue 27:
the cpu profile's ``mssc_study.iterations`` and ``anneal_iters`` are chosen from this curve, not from
the claim).

    python -m benchmarks.mssc_iterations --bars bars_occlusion --noise 0.05 0.2 --seeds 10 \\
        --iterations 20 40 80 --anneal 0.5 0.8 --out reports/mssc_iterations_cpu.json

Each point trains ``mssc_study``'s first model (or ``--model``) exactly as an ``mssc_fit`` cell does
(:func:`priorlab.studies.mssc_experiments.fit.bars_run`) on seeds 0 .. n−1 and counts the runs that recover
every bar; its Clopper–Pearson interval shows how little 10 seeds resolve.  It needs only the library.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from priorlab.config import load_params
from priorlab.studies.intervals import clopper_pearson
from priorlab.studies.mssc_experiments.fit import bars_run
from priorlab.io import write_json


def curve_point(params, bars: str, model: str, noise: float, iterations: int, anneal: float, seeds: int) -> dict:
    """Recovered runs of ``model`` on ``bars`` at noise std ``noise`` after ``iterations`` EM
    iterations annealed over the first ``anneal`` share of them."""
    spec = dataclasses.replace(params.models[model], anneal_iters=int(anneal * iterations))
    data = dataclasses.replace(params.datasets[bars], noise_std=noise)
    p = dataclasses.replace(params, models={**params.models, model: spec}, datasets={**params.datasets, bars: data},
                            mssc_study=dataclasses.replace(params.mssc_study, iterations=iterations))
    t0 = time.perf_counter()
    hits = sum(bool(bars_run(p, bars, model, s)[0]["recovered"]) for s in range(seeds))
    ci = clopper_pearson(hits, seeds)
    return {"noise_std": noise, "iterations": iterations, "anneal_iters": spec.anneal_iters, "recovered": hits,
            "seeds": seeds, "ci95": [round(ci.low, 3), round(ci.high, 3)],
            "s_per_run": round((time.perf_counter() - t0) / seeds, 2)}


def markdown(rows: list[dict]) -> str:
    lines = ["| noise std | EM iterations | annealed over | recovered | 95 % CI | s / run |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['noise_std']} | {r['iterations']} | {r['anneal_iters']} | {r['recovered']} / {r['seeds']} | "
              f"[{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}] | {r['s_per_run']} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--bars", default="bars_occlusion")
    ap.add_argument("--model", default=None, help="default: mssc_study.models[0]")
    ap.add_argument("--noise", type=float, nargs="+", default=[0.05, 0.2])
    ap.add_argument("--iterations", type=int, nargs="+", default=[20, 40, 80])
    ap.add_argument("--anneal", type=float, nargs="+", default=[0.5, 0.8], help="share of the iterations annealed")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None)
    ns = ap.parse_args(argv)
    params = load_params(ns.params)
    model = ns.model or params.mssc_study.models[0]
    rows = []
    for noise in ns.noise:
        for it in ns.iterations:
            for a in ns.anneal:
                rows.append(curve_point(params, ns.bars, model, noise, it, a, ns.seeds))
                print(json.dumps(rows[-1]), flush=True)
    print(markdown(rows))
    if ns.out:
        write_json(ns.out, {"bars": ns.bars, "model": model, "profile": params.profile, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
