"""Paper 001's run records as tables: the ELBO-vs-K frame (sec. 4.1, fig. 3; its CSV is the ``dvc plots``
data) with its seed means, and a semi-supervised run's accuracy against its supervised ceiling (sec. 4.2,
issue 10).  Pure: the ``evaluate`` records and the ``supervised_ceiling`` record in, tables out."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from priorlab.paths import DIAGNOSIS
from priorlab.studies.criteria import ACCURACY_GOAL
from priorlab.studies.fmvae_experiments import NAME
from priorlab.studies.fmvae_experiments.supervised_ceiling import ceiling_for, ceiling_setup, relative_verdict

GROUPS = {key: f"{NAME}/{key}" for key in ("elbo_vs_k", "semi_supervised", "factorial")}
DIAGNOSIS_GROUP = f"{DIAGNOSIS}/{NAME}/semi_supervised"  # issue 43: the arm of the semi-supervised claims


def elbo_vs_k_frame(results: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per run of the ELBO-vs-K group: K, seed, its unit (the pretrained setup it starts from)
    and the eq. 11 terms (nats per test point)."""
    rows = []
    for r in results:
        extra = r.get("model_extras")
        if r.get("group") != GROUPS["elbo_vs_k"] or extra is None or len(extra["num_components"]) != 1:
            continue
        k = extra["num_components"][0]
        rows.append({"run": r["run"], "K": k, "log2K": float(np.log2(k)), "seed": r["seed"], "unit": r["setup"],
                     "elbo": r["test"]["elbo"], "log_lik": r["test"]["log_lik"], "kl_z": extra["kl_z"],
                     "kl_r": extra["kl_r"], "kl": r["test"]["kl"], "iw_log_likelihood": r["test"]["iw_log_likelihood"],
                     "components_used": extra["components_used"][0]})
    return pd.DataFrame(rows).sort_values(["K", "seed"]).reset_index(drop=True) if rows else pd.DataFrame()


def elbo_vs_k_summary(frame: pd.DataFrame) -> dict[str, Any]:
    """Seed means per K of the eq. 11 terms (the README's table and the summary JSON)."""
    mean = frame.groupby("K")[["elbo", "log_lik", "kl_z", "kl_r"]].mean()
    return {"K": [int(k) for k in mean.index], "seeds_per_K": [int(v) for v in frame.groupby("K").size()],
            **{f"mean_{c}": [round(float(v), 3) for v in mean[c]] for c in mean.columns}}


def semi_supervised_entry(params, name: str, r: dict[str, Any], ceilings: dict[str, Any]) -> dict[str, Any]:
    """Accuracy, both criteria and the supervised ceilings (all resolutions) of a semi-supervised run."""
    extra = r["model_extras"]
    acc, factor = extra.get("heldout_accuracy"), extra.get("supervised_factor")
    setup = params.run(name).setup
    found = ceiling_for(ceilings, ceiling_setup(params, setup), factor)
    native = found["resolutions"][found["native"]] if found else None
    return {"supervised_factor": factor, "heldout_accuracy": acc, "goal": ACCURACY_GOAL, "unit": setup,
            "reached": acc is not None and acc >= ACCURACY_GOAL,
            "labelled_fraction": r["model_params"]["labelled_fraction"],
            "delta": r["model_params"]["delta"], "ceiling": native["accuracy"] if native else None,
            "ceiling_capped": bool(native and native["stopped"] == "max_steps"),
            "ceiling_plateaued": bool(native and native["stopped"] == "plateau"),
            "ceiling_n_test": native["n_test"] if native else None,
            "ceiling_replicates": [r["accuracy"] for r in native["replicates"]] if native else [],
            # which test points each got right: the relative claim pairs the run with the ceiling on them
            "heldout_correct": extra.get("heldout_correct"),
            "confusion": extra.get("heldout_confusion"),  # [label, assigned cluster] counts on the test points
            "ceiling_correct": [r["correct"] for r in native["replicates"]] if native else [],
            "ceilings": {res: e["accuracy"] for res, e in found["resolutions"].items()} if found else {},
            **relative_verdict(acc, native["accuracy"] if native else None)}
