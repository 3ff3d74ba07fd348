"""Paper 001's claims decided on the tables of :mod:`.aggregate`: the fig. 3 ELBO-vs-K claims (sec. 4.1)
and the semi-supervised accuracy, absolute and against the supervised ceiling (sec. 4.2, issue 10).
Pure: tables in, :class:`~priorlab.studies.claims.Claim` lists out."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from priorlab.studies.claims import Claim, fmt
from priorlab.studies.criteria import criterion
from priorlab.io import unpack_flags
from priorlab.studies.intervals import accuracy, mean_t, paired_difference, paired_ratio, slope, unit_means

SATURATION = 0.25  # "saturates": the last doubling gains at most this share of the total gain (001.elbo_saturates)


def elbo_vs_k_claims(frame: pd.DataFrame) -> list[Claim]:
    """The fig. 3 claims (criteria ``001.elbo_rises``, ``001.elbo_saturates``, ``001.kl_r_rises``,
    ``001.kl_z_falls``), the pretraining the unit (the runs of every K on one pretraining are paired;
    seeds on one pretraining averaged first): per unit the largest-K vs K = 1 ELBO difference, the last
    doubling's gain against 25 % of the total gain, and the slopes of KL[r], KL[z] on log2 K."""
    if frame.empty or frame["K"].nunique() < 3:
        return []
    ks = sorted(int(k) for k in frame["K"].unique())
    k1, prev, last = ks[0], ks[-2], ks[-1]
    unit = frame["unit"] if "unit" in frame else frame["seed"]
    means = frame.assign(unit=unit).groupby(["unit", "K"], sort=False)[["elbo", "kl_r", "kl_z"]].mean()
    wide = {c: means[c].unstack("K").dropna() for c in ("elbo", "kl_r", "kl_z")}
    e = wide["elbo"]
    seeds = f"{len(e)} pretrainings, {frame['seed'].nunique()} seeds"
    gain, last_gain = e[last] - e[k1], e[last] - e[prev]
    claims = [
        criterion("001.elbo_rises").decide([("", paired_difference(e[last], e[k1]))],
                                           f"K {ks}: mean ELBO {fmt(e.mean(), 2)} ({seeds})"),
        criterion("001.elbo_saturates").decide([("", mean_t(last_gain - SATURATION * gain))],
                                               f"last doubling {last_gain.mean():+.2f} of {gain.mean():+.2f} nats "
                                               f"({seeds})"),
    ]
    logk = np.log2(np.asarray(ks, float))
    for key, col in (("001.kl_r_rises", "kl_r"), ("001.kl_z_falls", "kl_z")):
        w = wide[col][ks]
        slopes = [slope(logk, row) for row in w.to_numpy(float)]
        claims.append(criterion(key).decide([("", mean_t(slopes))], f"{col.replace('_', '[')}] {fmt(w.mean(), 2)}; "
                                            f"slopes {fmt(slopes, 2)} per doubling"))
    return claims


def semi_supervised_claims(semi: dict[str, dict[str, Any]], models: dict[str, str], n_test: int) -> list[Claim]:
    """Sec. 4.2 per semi-supervised model (its runs over pretraining units, the seeds of one averaged
    first): the absolute criterion written first
    (``001.semi_supervised``: mean held-out accuracy, seed spread + test-set binomial) and the
    relative one (``001.semi_supervised_relative``: accuracy / supervised ceiling on the same test
    points, the ceiling's classifiers its replicates; untestable when the ceiling did not plateau)."""
    by_model: dict[str, list[str]] = {}
    for run in semi:
        by_model.setdefault(models[run], []).append(run)
    claims = []
    for runs in by_model.values():
        r0 = semi[runs[0]]
        subject = f"{r0['supervised_factor']}, {r0['labelled_fraction']:.0%} labels"
        scored = [r for r in runs if semi[r]["heldout_accuracy"] is not None]
        accs = [semi[r]["heldout_accuracy"] for r in scored]
        acc = accuracy(unit_means(accs, [semi[r].get("unit", r) for r in scored]) if accs else [], n_test)
        runs_text = f"{len(accs)} seeds: {fmt(accs)}"
        claims.append(criterion("001.semi_supervised").decide([("", acc)] if accs else [], runs_text, subject=subject))
        c, plateaued, c_n = r0.get("ceiling"), r0.get("ceiling_plateaued"), r0.get("ceiling_n_test")
        rel = criterion("001.semi_supervised_relative")
        if c is None or not accs:
            claims.append(rel.decide([], f"{runs_text}; no supervised ceiling", subject=subject))
            continue
        ceils = r0["ceiling_replicates"]
        failed = "" if plateaued else f"the ceiling {c:.3f} did not plateau (stopped by its step cap)"
        claims.append(rel.decide([("", paired_ratio(*correct_points(semi, scored, c_n)))],
                                 f"{runs_text}; ceiling {c:.3f} ({len(ceils)} classifiers: {fmt(ceils)}) on the same "
                                 f"{c_n} test points", failed, subject=subject))
    return claims


def correct_points(semi: dict[str, dict[str, Any]], runs: list[str], n_test: int) -> tuple[np.ndarray, np.ndarray]:
    """The per-point correctness of ``runs`` ([units, points]: the runs of one pretraining averaged)
    and of their ceiling's classifiers ([replicates, points]), on the ``n_test`` points both are scored on."""
    hits = np.stack([unpack_flags(semi[r]["heldout_correct"], n_test).astype(float) for r in runs])
    units = [semi[r].get("unit", r) for r in runs]
    by_unit = np.stack([hits[[u == v for u in units]].mean(0) for v in dict.fromkeys(units)])
    ceiling = np.stack([unpack_flags(t, n_test).astype(float) for t in semi[runs[0]]["ceiling_correct"]])
    return by_unit, ceiling
