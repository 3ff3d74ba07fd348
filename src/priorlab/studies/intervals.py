"""95 % intervals for the effects the claims are decided on (pure: numbers in, an :class:`Estimate` out).

Every function returns the point estimate, the interval and the number of independent units it
rests on (seeds, data sets, splits, runs).  With fewer than two units no spread can be estimated:
the interval is (−∞, ∞) and any claim resting on it is inconclusive — one run decides nothing.

* :func:`unit_means`: replicates that share a unit (seeds on one pretraining) averaged into one value
  first, so that n counts independent units.
* :func:`mean_t` / :func:`paired_difference` / :func:`welch_difference`: Student-t intervals of a
  mean, a mean paired difference and an unpaired difference of means (Welch–Satterthwaite df).
* :func:`bootstrap`: percentile bootstrap of any statistic of paired units (e.g. the median of
  per-data-set differences), with an explicit ``random_state``.
* :func:`clopper_pearson` (exact binomial) and :func:`newcombe_difference` (difference of two
  independent proportions, Newcombe's hybrid Wilson score interval, method 10 of Newcombe 1998);
  :func:`newcombe_paired_difference` (two proportions on the same units: method 10 of Newcombe 1998b).
* :func:`accuracy`: a mean test accuracy over replicates scored on one shared test set, its binomial
  variance added to the between-replicate variance; :func:`paired_ratio`: the ratio of two
  accuracies on the same test points (delta method with their covariance and both arms' replicate
  spread), e.g. an accuracy as a share of a supervised ceiling.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

LEVEL = 0.95
INF = float("inf")


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its ``level`` interval [low, high], the units ``n`` and the method."""

    value: float
    low: float
    high: float
    n: int
    method: str
    se: float = float("nan")  # standard error where the method has one (for n_to_decide)
    se_fixed: float = 0.0  # the part of ``se`` that more units do not reduce (a test set they all share)

    def __post_init__(self) -> None:
        if not (self.low <= self.high) and not (math.isnan(self.low) or math.isnan(self.high)):
            raise ValueError(f"interval [{self.low}, {self.high}] is empty")

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    def text(self, digits: int = 3) -> str:
        """``0.123 [0.100, 0.150]`` (``0.123 [no interval]`` from one unit)."""
        if math.isnan(self.value):
            return "–"
        if not self.bounded:
            return f"{self.value:.{digits}f} [no interval: n = {self.n}]"
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


def _clean(values) -> np.ndarray:
    v = np.asarray(values, dtype=float).ravel()
    if np.isnan(v).any():
        raise ValueError("an interval over values containing NaN: drop or report the missing units first")
    return v


def unit_means(values: Sequence[float], units: Sequence) -> np.ndarray:
    """The mean of ``values`` within each of ``units`` (first-seen order): replicates that share a unit
    (seeds on one pretraining) become one number, so an interval over the result counts units, not
    seeds (a two-level design analysed on its top level; equal weight per unit)."""
    v = _clean(values)
    if len(v) != len(units):
        raise ValueError(f"{len(v)} values for {len(units)} unit labels")
    order = list(dict.fromkeys(units))
    return np.array([v[[u == key for u in units]].mean() for key in order], dtype=float)


def nested_mean(values: Sequence[float], units: Sequence, level: float = LEVEL) -> Estimate:
    """The mean over independent units of their seeds' means (:func:`unit_means`) with a t interval on
    k − 1 df (k units), whose variance is floored at what the unit means carry from their seeds alone,
    ``s_w² · mean_i(1 / m_i)`` (``s_w²``: the pooled within-unit variance, ``m_i``: seeds of unit i).
    Var(unit mean) = σ_b² + σ_w² / m, and the spread of k = 3 unit means can fall far below its σ_w² / m
    part by chance (integer counts whose unit means coincide give an interval of width 0); the floor makes
    the interval conservative, never narrower than the seeds allow.  No unit with two seeds: :func:`mean_t`
    of the unit means."""
    v = _clean(values)
    if len(v) != len(units):
        raise ValueError(f"{len(v)} values for {len(units)} unit labels")
    order = list(dict.fromkeys(units))
    groups = [v[[u == key for u in units]] for key in order]
    means = np.array([g.mean() for g in groups])
    est = mean_t(means, level, "t over unit means")
    df_within = sum(len(g) - 1 for g in groups)
    if len(means) < 2 or df_within == 0:
        return est
    s_w2 = sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / df_within
    floor = s_w2 * float(np.mean([1.0 / len(g) for g in groups]))
    var = float(means.var(ddof=1))
    if var >= floor:
        return est
    se = math.sqrt(floor / len(means))
    h = float(stats.t.ppf(0.5 + level / 2, len(means) - 1)) * se
    return Estimate(est.value, est.value - h, est.value + h, len(means),
                    "t over unit means, variance floored at the seeds'", se)


def mean_t(values: Sequence[float], level: float = LEVEL, method: str = "t") -> Estimate:
    """Mean with its Student-t interval (n − 1 df); (−∞, ∞) from fewer than two values."""
    v = _clean(values)
    if len(v) == 0:
        return Estimate(float("nan"), -INF, INF, 0, method)
    m = float(v.mean())
    if len(v) < 2:
        return Estimate(m, -INF, INF, len(v), method)
    se = float(v.std(ddof=1) / math.sqrt(len(v)))
    h = float(stats.t.ppf(0.5 + level / 2, len(v) - 1)) * se
    return Estimate(m, m - h, m + h, len(v), method, se)


def paired_difference(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Estimate:
    """Mean of ``a_i − b_i`` over paired units (same seed / data set / split) with its t interval."""
    a, b = _clean(a), _clean(b)
    if a.shape != b.shape:
        raise ValueError(f"paired values need equal lengths, got {len(a)} and {len(b)}")
    return mean_t(a - b, level, "paired t")


def welch_difference(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Estimate:
    """``mean(a) − mean(b)`` of independent samples, Welch–Satterthwaite t interval; n = min size."""
    a, b = _clean(a), _clean(b)
    d = float(a.mean() - b.mean()) if len(a) and len(b) else float("nan")
    n = int(min(len(a), len(b)))
    if n < 2:
        return Estimate(d, -INF, INF, n, "Welch t")
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0.0:
        return Estimate(d, d, d, n, "Welch t", 0.0)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    h = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return Estimate(d, d - h, d + h, n, "Welch t", se)


def bootstrap(units: Sequence, statistic: Callable[[np.ndarray], float], random_state: int,
              n_boot: int = 4000, level: float = LEVEL, method: str = "bootstrap") -> Estimate:
    """Percentile bootstrap of ``statistic`` over resampled units (rows of ``units``; paired data
    stay paired because a unit is a row).  (−∞, ∞) from fewer than two units."""
    u = np.asarray(units, dtype=float)
    value = float(statistic(u)) if len(u) else float("nan")
    if len(u) < 2:
        return Estimate(value, -INF, INF, len(u), method)
    rng = np.random.default_rng(random_state)
    idx = rng.integers(0, len(u), size=(n_boot, len(u)))
    draws = np.array([statistic(u[i]) for i in idx], dtype=float)
    lo, hi = np.quantile(draws, [0.5 - level / 2, 0.5 + level / 2])
    return Estimate(value, float(lo), float(hi), len(u), method, float(draws.std(ddof=1)))


def clopper_pearson(k: int, n: int, level: float = LEVEL) -> Estimate:
    """Exact binomial interval of a rate ``k / n``."""
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k = {k}, n = {n}")
    if n == 0:
        return Estimate(float("nan"), 0.0, 1.0, 0, "Clopper–Pearson")
    a = 1 - level
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return Estimate(k / n, lo, hi, n, "Clopper–Pearson", math.sqrt(k / n * (1 - k / n) / n))


def wilson(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson score interval of ``k / n``."""
    z = float(stats.norm.ppf(0.5 + level / 2))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_difference(k1: int, n1: int, k2: int, n2: int, level: float = LEVEL) -> Estimate:
    """``k1/n1 − k2/n2`` of independent proportions, Newcombe's hybrid score interval (method 10)."""
    if n1 == 0 or n2 == 0:
        return Estimate(float("nan"), -1.0, 1.0, 0, "Newcombe")
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1, level)
    l2, u2 = wilson(k2, n2, level)
    d = p1 - p2
    lo = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    hi = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return Estimate(d, lo, hi, min(n1, n2), "Newcombe")


def newcombe_paired_difference(a: int, b: int, c: int, d: int, level: float = LEVEL) -> Estimate:
    """``(b − c) / n`` of two proportions measured on the same ``n`` units (a 2×2 table: ``a`` both
    succeed, ``b`` only the first, ``c`` only the second, ``d`` neither), Newcombe's (1998b) method 10:
    Wilson intervals of both margins combined by square-and-add with the correlation φ of the table
    (its numerator ad − bc less n/2 when positive, floored at 0; φ = 0 when a margin is empty)."""
    n = a + b + c + d
    if min(a, b, c, d) < 0:
        raise ValueError(f"a 2x2 table needs non-negative counts, got {(a, b, c, d)}")
    if n == 0:
        return Estimate(float("nan"), -1.0, 1.0, 0, "Newcombe paired")
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n, level)
    l2, u2 = wilson(a + c, n, level)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    num = a * d - b * c
    phi = 0.0 if margins == 0 else (max(num - n / 2, 0.0) if num > 0 else num) / math.sqrt(margins)
    diff = p1 - p2
    lo = diff - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    hi = diff + math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return Estimate(diff, lo, hi, n, "Newcombe paired")


def accuracy(values: Sequence[float], n_test: int, level: float = LEVEL) -> Estimate:
    """Mean accuracy over replicates all scored on the same ``n_test`` test points: variance = the
    between-replicate variance / r + the test set's binomial variance p(1 − p) / n_test (shared by
    every replicate, so not divided by r and not seen in their spread).  One replicate: no interval
    (its seed-to-seed spread is unknown)."""
    v = _clean(values)
    r = len(v)
    if r == 0:
        return Estimate(float("nan"), -INF, INF, 0, "t + binomial")
    p = float(v.mean())
    if r < 2:
        return Estimate(p, -INF, INF, 1, "t + binomial")
    seeds, binom = float(v.var(ddof=1)) / r, p * (1 - p) / n_test
    se = math.sqrt(seeds + binom)
    df = (seeds + binom) ** 2 * (r - 1) / seeds**2 if seeds > 0 else math.inf  # Satterthwaite: binomial part known
    h = float(stats.t.ppf(0.5 + level / 2, df) if math.isfinite(df) else stats.norm.ppf(0.5 + level / 2)) * se
    return Estimate(p, max(0.0, p - h), min(1.0, p + h), r, "t + binomial", se, math.sqrt(binom))


def paired_ratio(num: np.ndarray, den: np.ndarray, level: float = LEVEL) -> Estimate:
    """The ratio of two mean accuracies scored on the *same* test points, e.g. a semi-supervised
    accuracy as a share of its supervised ceiling.  ``num``: [units, points] 0/1 (or any per-point
    score) of the claim's independent units (seeds on one pretraining averaged first); ``den``:
    [replicates, points] of the reference, trained independently of them.

    R = Ā / C̄ with a delta-method variance of three parts (normal-theory, t with Satterthwaite df):

    * the test points, shared by both arms: the per-point linearisation d_i = (ā_i − R c̄_i) / C̄
      (ā_i, c̄_i: point means over units / replicates), var(d)/n — the ratio estimator's variance of
      Cochran (1977, eq. 6.9, no finite-population term) with s_y² + R² s_x² − 2R s_xy in it, so the
      two arms' covariance on the same points is carried;
    * the units' spread s_A² / U of their accuracies, and the reference's R² s_C² / C, over C̄².

    The unit × point interaction enters both the point and the unit part (conservative by at most
    σ²_int / (U n)).  Fewer than two units or two reference replicates: no interval (the spread
    of either is unknown)."""
    a, c = np.atleast_2d(np.asarray(num, float)), np.atleast_2d(np.asarray(den, float))
    if a.shape[1] != c.shape[1]:
        raise ValueError(f"the two arms are scored on different test points ({a.shape[1]} vs {c.shape[1]})")
    u, k, n = len(a), len(c), a.shape[1]
    abar, cbar = float(a.mean()), float(c.mean())
    method = "ratio (delta method, paired points)"
    if u < 2 or k < 2 or n < 2 or cbar == 0:
        return Estimate(abar / cbar if cbar else float("nan"), -INF, INF, u, method)
    r = abar / cbar
    d = (a.mean(0) - r * c.mean(0)) / cbar
    parts = np.array([d.var(ddof=1) / n, a.mean(1).var(ddof=1) / u / cbar**2,
                      r**2 * c.mean(1).var(ddof=1) / k / cbar**2])
    dfs = np.array([n - 1, u - 1, k - 1], float)
    var = float(parts.sum())
    if var == 0:
        return Estimate(r, r, r, u, method, 0.0)
    df = var**2 / float((parts**2 / dfs).sum())  # Satterthwaite
    h = float(stats.t.ppf(0.5 + level / 2, df)) * math.sqrt(var)
    return Estimate(r, r - h, r + h, u, method, math.sqrt(var), math.sqrt(parts[0]))


def slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of ``y`` on ``x``."""
    x, y = _clean(x), _clean(y)
    xc = x - x.mean()
    return float((xc * (y - y.mean())).sum() / (xc * xc).sum())
