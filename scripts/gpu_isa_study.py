"""Paper 004's core claim on a GPU, without DVC: β-VAE vs ISA-VAE at β ∈ {1, 2}, ≥ 3 seeds, paper profile.

    PYTHONPATH=src python scripts/gpu_isa_study.py            # the paper's settings (profiles/paper.yaml)
    PYTHONPATH=src python scripts/gpu_isa_study.py --n-train 200000 --steps 2000   # a shorter variant

Runs the stage functions directly (``run_data``, ``run_isa_experiments``) on ``profiles/paper.yaml``
with ``isa_study`` narrowed to the core (models ``isa_beta_vae``, ``isa_vae``; the ``--betas`` and
``--seeds`` given), and writes ``reports/isa_gpu_study/`` (``summary.json`` with the claim, every
run's metrics, ``run_info.json`` with the device, library versions and this command).  Needs torch,
numpy, scikit-learn, pandas, matplotlib and PyYAML; not dvc.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import sys
import time
from pathlib import Path

import torch

from priorlab.config import load_params
from priorlab.experiments.isa_experiments import run_isa_experiments
from priorlab.io import write_json
from priorlab.pipeline import run_data

OUT = Path("reports/isa_gpu_study")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="profiles/paper.yaml")
    ap.add_argument("--betas", type=float, nargs="+", default=[1.0, 2.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--models", nargs="+", default=["isa_beta_vae", "isa_vae"])
    ap.add_argument("--steps", type=int, default=0, help="training steps per model (0: the profile's)")
    ap.add_argument("--n-train", type=int, default=0, help="dSprites training points (0: the profile's)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    if len(args.seeds) < 3:
        ap.error("the core study needs at least 3 seeds")

    params = load_params(args.params)
    study = params.isa_study
    dataset = params.setup(study.setup).dataset
    datasets = dict(params.datasets)
    if args.n_train:
        datasets[dataset] = dataclasses.replace(datasets[dataset], n_train=args.n_train)
    train = dataclasses.replace(study.train, steps=args.steps or study.train.steps)
    study = dataclasses.replace(study, models=args.models, betas=args.betas, seeds=args.seeds, train=train)
    params = dataclasses.replace(params, datasets=datasets, isa_study=study)
    params.check()

    t0 = time.perf_counter()
    run_data(params, dataset)  # data/<dataset>/, as the data stage writes it
    data_s = time.perf_counter() - t0
    summary = run_isa_experiments(params, Path(args.out))
    import numpy, pandas, sklearn  # noqa: E401  (versions only)

    write_json(Path(args.out) / "run_info.json", {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "device": str(summary["device"]),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "numpy": numpy.__version__,
                     "pandas": pandas.__version__, "scikit-learn": sklearn.__version__,
                     "python": platform.python_version()},
        "params": args.params, "isa_study": dataclasses.asdict(study),
        "dataset": dataclasses.asdict(datasets[dataset]), "data_s": round(data_s, 1),
        "study_s": summary["wall_s"]})
    for c in summary["claims"]:
        print(f"{c['claim']}\n  criterion: {c['criterion']}\n  measured: {c['measured']}\n"
              f"  reproduced: {c['reproduced']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
