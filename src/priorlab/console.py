"""The ``priorlab`` command: fit one model to a data file, or score a fitted one, without a pipeline.

    priorlab fit --model vsc --data cells.h5ad --layer counts --set latent_dim=10 --set alpha=0.05 \\
        --steps 5000 --out runs/vsc
    priorlab score --model runs/vsc/model.pt --data more_cells.h5ad --layer counts

``fit`` writes ``model.pt`` (:func:`priorlab.load` reads it), ``metrics.json`` (the settings, each
phase's last logged values, the held-out share's ELBO terms and importance-weighted log-likelihood,
the active latents), ``latent.npy`` (the posterior means of every row of the file) and ``figure.png``
(reconstructions of images; the latents' variances and main plane otherwise).  The folder appears
complete or not at all: the work happens in ``<out>.partial``, where an interrupted ``fit`` resumes
from its checkpoints.  ``--set key=value`` takes YAML values (``--set hidden=[256,128]``) and dotted
keys (``--set prior.kind=lp_nested``).  Bad input ends in one ``error:`` line and exit status 2.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

import priorlab
from priorlab.errors import UserError


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``["a=1", "b.c=[2, 3]"]`` → ``{"a": 1, "b": {"c": [2, 3]}}`` (values read as YAML)."""
    from priorlab.config import split_override  # lazy: yaml, ~136 ms at import priorlab.console

    out: dict[str, Any] = {}
    for item in items:
        (*parents, leaf), value = split_override(item, "--set", "latent_dim=10")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise UserError(f"--set {item!r}: {part!r} is set to a value already")
        node[leaf] = value
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="priorlab", description="Fit one model to a data file, or score a "
                                                                  "fitted one, without a pipeline.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, helptext in (("fit", "fit a model to a data file"), ("score", "score a fitted model on a data file")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--data", required=True, help="observations: .npz, .npy, .csv, .parquet or .h5ad")
        p.add_argument("--key", default="x", help=".npz: the array of observations (default x)")
        p.add_argument("--layer", default=None, help=".h5ad: the layer holding the observations (default X)")
        p.add_argument("--labels", default=None, help="the column (.csv, .parquet), obs column (.h5ad) or array "
                                                      "(.npz) of class labels, if any")
        p.add_argument("--seed", type=int, default=0)
    fit = sub.choices["fit"]
    fit.add_argument("--model", required=True, help="model kind: vae, vsc, fmvae, beta_tcvae, factor_vae, "
                                                    "sparse_vae, ppca, mssc, linear_ssc")
    fit.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a model setting (repeatable)")
    fit.add_argument("--steps", type=int, default=2000)
    fit.add_argument("--pretrain-steps", type=int, default=0)
    fit.add_argument("--batch-size", type=int, default=100)
    fit.add_argument("--lr", type=float, default=1e-3)
    fit.add_argument("--validation", type=float, default=0.1, help="share of rows held out and scored (default 0.1)")
    fit.add_argument("--device", default="auto", help="auto (CUDA when there is one), cpu or cuda")
    fit.add_argument("--out", required=True, help="the output folder")
    score = sub.choices["score"]
    score.add_argument("--model", required=True, help="a model.pt written by priorlab fit")
    score.add_argument("--iw-samples", type=int, default=100)
    score.add_argument("--out", default=None, help="write the scores to this JSON file (default: print them)")
    return parser


def run_fit(ns: argparse.Namespace) -> Path:
    import numpy as np

    from priorlab import metrics  # lazy: sklearn + scipy + pandas, ~1.7 s at import priorlab.console
    from priorlab.data.files import read_observations  # lazy: numpy, ~97 ms at import priorlab.console
    from priorlab.io import write_json  # lazy: numpy, ~98 ms at import priorlab.console
    from priorlab.models.protocol import Generative  # lazy: torch + yaml, ~1.6 s at import priorlab.console

    data = read_observations(ns.data, key=ns.key, layer=ns.layer, labels=ns.labels)
    model = priorlab.model(ns.model, **parse_sets(ns.set))
    out = Path(ns.out)
    work = out.with_name(out.name + ".partial")
    model.fit(data.x, data.labels, steps=ns.steps, pretrain_steps=ns.pretrain_steps, batch_size=ns.batch_size,
              lr=ns.lr, seed=ns.seed, validation=ns.validation, device=ns.device, checkpoint_dir=work / "checkpoints")
    shutil.rmtree(work / "checkpoints", ignore_errors=True)
    codes = model.latent(data.x)
    model.save(work / "model.pt")
    np.save(work / "latent.npy", codes)
    record = {"data": str(ns.data), "rows": int(len(data.x)), "kind": ns.model, "settings": model.settings,
              "history": model.history, "validation": model.validation,
              "active_dims": metrics.active_dims(codes, 0.01), "class_names": data.class_names}
    write_json(work / "metrics.json", record)
    title = f"{ns.model} on {Path(ns.data).name}"
    if model.encoding.kind == "image" and isinstance(model.module, Generative):
        from priorlab.plots.reconstructions import (  # lazy: torch + matplotlib, ~2.0 s at import priorlab.console
            plot_reconstructions)

        plot_reconstructions(model.module, model.prepare(data.x[:12]), work / "figure.png", title)
    else:
        from priorlab.plots.latents import plot_latents  # lazy: matplotlib, ~492 ms at import priorlab.console

        plot_latents(codes, work / "figure.png", title, labels=data.labels)
    shutil.rmtree(out, ignore_errors=True)
    work.replace(out)
    print(f"{out}: model.pt, metrics.json, latent.npy, figure.png"
          + (f"; held-out ELBO {model.validation['elbo']:.3f} nats per row" if model.validation else ""))
    return out


def run_score(ns: argparse.Namespace) -> dict:
    import json

    from priorlab.data.files import read_observations  # lazy: numpy, ~97 ms at import priorlab.console
    from priorlab.io import write_json  # lazy: numpy, ~98 ms at import priorlab.console

    model = priorlab.load(ns.model)
    data = read_observations(ns.data, key=ns.key, layer=ns.layer, labels=ns.labels)
    scores = {"data": str(ns.data), "rows": int(len(data.x)), "model": str(ns.model),
              **model.score(data.x, iw_samples=ns.iw_samples, seed=ns.seed)}
    if ns.out:
        write_json(ns.out, scores)
    else:
        print(json.dumps(scores, indent=1))
    return scores


def main(argv: list[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    try:
        {"fit": run_fit, "score": run_score}[ns.command](ns)
    except (UserError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
