"""Paper 004's study, the claim (pure: the study's frame -> :class:`~priorlab.studies.claims.Claim`):
:func:`mig_claim` (criterion ``004.isa_mig``) and A.5's representative-run rule (:func:`representative`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from priorlab.studies.claims import Claim, fmt
from priorlab.studies.criteria import criterion
from priorlab.studies.intervals import welch_difference

CLAIM_BETAS = (1.0, 2.0)
CLAIM_SCORE = "chen_mig_no_shape"  # the paper's MIG: Chen et al.'s estimator, dSprites' shape left out


# --------------------------------------------------------------------------- the claim


def mig_claim(frame: pd.DataFrame, beta_model: str = "β-VAE", isa_model: str = "ISA-VAE",
              betas=CLAIM_BETAS, score: str = CLAIM_SCORE, floor: str = "chen_floor") -> Claim:
    """"At equal β, ISA-VAE reaches higher MIG than β-VAE, most clearly at β ∈ {1, 2}" (sec. 4, fig. 3),
    decided by criterion ``004.isa_mig``: per β the difference of the two models' Chen MIG without shape
    over seeds (Welch); untestable when, at some claim β, neither model's median reaches the measured
    noise floor (the largest permutation floor, column ``floor``, of the runs at that β)."""
    crit = criterion("004.isa_mig")
    sub = frame[frame["label"].isin([beta_model, isa_model]) & frame["strength"].isin(betas)] if len(frame) else frame
    parts, texts, below = [], [], []
    for b in betas:
        at = sub[sub["strength"] == b]
        a = at[at["label"] == isa_model][score].to_numpy(float)
        c = at[at["label"] == beta_model][score].to_numpy(float)
        if not (len(a) and len(c)):
            return crit.decide([], f"no runs of both models at β = {b:g}")
        parts.append((f"β={b:g}", welch_difference(a, c)))
        noise = float(at[floor].max())
        texts.append(f"β={b:g}: ISA {fmt(a)} vs β-VAE {fmt(c)}, noise floor {noise:.3f}")
        if max(np.median(a), np.median(c)) <= noise:
            below.append(f"β={b:g} (medians {np.median(a):.3f}, {np.median(c):.3f} ≤ floor {noise:.3f})")
    failed = f"both medians at or below the noise floor at {', '.join(below)}" if below else ""
    return crit.decide(parts, "; ".join(texts), failed)


def representatives(frame: pd.DataFrame, score: str = CLAIM_SCORE, betas=CLAIM_BETAS) -> pd.DataFrame:
    """A.5's representative run of each model at each claim β (:func:`representative` on ``score``)
    beside the median over seeds: the paper reports the former, the claim decides on all runs."""
    rows = []
    at = frame[frame["strength"].isin(betas) & (frame["kind"] != "factor_vae")]  # β, not FactorVAE's γ
    for (lab, b), f in at.groupby(["label", "strength"], sort=False):
        rep = representative(f, score)
        rows.append({"model": lab, "β / γ": b, "representative run": rep["run"],
                     f"{score} (representative)": rep[score], f"{score} (median)": float(f[score].median()),
                     "runs": len(f)})
    return pd.DataFrame(rows)


def representative(frame: pd.DataFrame, score: str = "mig") -> pd.Series:
    """A.5: the run nearest (Mahalanobis over MIG and reconstruction) to the mean of the runs in the
    upper 50% of MIG (``score``) scores, among the runs of one model (``frame``)."""
    top = frame[frame[score] >= frame[score].median()]
    pts = top[[score, "recon_log_lik"]].to_numpy(float)
    mean, var = pts.mean(0), pts.var(0) + 1e-12
    d = (((pts - mean) ** 2) / var).sum(1)  # diagonal covariance: the paper's "mean and variance"
    return top.iloc[int(np.argmin(d))]
