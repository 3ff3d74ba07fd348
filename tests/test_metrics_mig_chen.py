"""Chen et al.'s MIG estimator (paper 004's metric) against cases with a known answer: separated
posteriors carry the factor's full entropy, an independent latent none, and overlapping Gaussian
posteriors the mutual information of a 1-D Gaussian mixture computed by quadrature."""

import numpy as np
import pytest

from priorlab.metrics.mig_chen import mig_chen, mutual_information


def _gaussian_code(n: int, values: int, spacing: float, std: float, seed: int = 0):
    """Factor v uniform on ``values`` values; latent 0: posterior N(spacing * v, std²) (exact means),
    latent 1: N(noise, 1) independent of v; factor 1 independent uniform on 3 values."""
    rng = np.random.RandomState(seed)
    v = rng.randint(values, size=n)
    w = rng.randint(3, size=n)
    mu = np.stack([spacing * v, rng.standard_normal(n)], 1)
    logvar = np.stack([np.full(n, 2 * np.log(std)), np.zeros(n)], 1)
    return mu, logvar, np.stack([v, w], 1)


def _mixture_mi(values: int, spacing: float, std: float) -> float:
    """I(z; v) for z | v ~ N(spacing v, std²), v uniform: H(mixture) − H(N(0, std²)), by quadrature."""
    grid = np.linspace(-8 * std, spacing * (values - 1) + 8 * std, 200001)
    dens = sum(np.exp(-0.5 * ((grid - spacing * k) / std) ** 2) / (std * np.sqrt(2 * np.pi)) for k in range(values))
    dens /= values
    h_mix = -np.trapezoid(np.where(dens > 0, dens * np.log(np.maximum(dens, 1e-300)), 0.0), grid)
    return float(h_mix - 0.5 * np.log(2 * np.pi * np.e * std ** 2))


def test_separated_posteriors_give_a_gap_of_one_and_an_independent_latent_none():
    mu, logvar, f = _gaussian_code(4000, 4, spacing=2.0, std=0.05)
    out = mutual_information(mu, logvar, f, n_samples=2000, random_state=0)
    assert out["h_factor"][0] == pytest.approx(np.log(4), abs=0.01)
    assert out["mi"][0, 0] == pytest.approx(np.log(4), abs=0.03)  # all of the factor's entropy
    assert abs(out["mi"][1, 0]) < 0.03 and abs(out["mi"][0, 1]) < 0.03  # independent pairs: none
    res = mig_chen(mu, logvar, f, n_samples=2000, random_state=0)
    assert res["per_factor"]["0"] == pytest.approx(1.0, abs=0.03)
    assert abs(res["per_factor"]["1"]) < 0.03 and res["mig"] == pytest.approx(0.5, abs=0.03)
    assert mig_chen(mu, logvar, f, n_samples=2000, random_state=0, exclude=(1,))["mig"] == \
        pytest.approx(1.0, abs=0.03)


@pytest.mark.parametrize("spacing", [0.5, 1.0])
def test_overlapping_posteriors_match_the_mixture_entropy_by_quadrature(spacing):
    mu, logvar, f = _gaussian_code(4000, 3, spacing=spacing, std=0.5, seed=1)
    exact = _mixture_mi(3, spacing, 0.5)
    assert 0.1 < exact < np.log(3) - 0.1  # a case in between
    out = mutual_information(mu, logvar, f, n_samples=4000, random_state=1)
    assert out["mi"][0, 0] == pytest.approx(exact, abs=0.03)


def test_seeded_and_validated():
    mu, logvar, f = _gaussian_code(500, 3, 1.0, 0.3)
    a = mig_chen(mu, logvar, f, n_samples=300, random_state=5)
    assert mig_chen(mu, logvar, f, n_samples=300, random_state=5) == a
    with pytest.raises(ValueError, match=r"\[N, D\]"):
        mig_chen(mu[:, 0], logvar, f)
    with pytest.raises(ValueError, match="no factor left"):
        mig_chen(mu, logvar, f, exclude=(0, 1))


def test_permutation_floor_is_the_estimators_bias_on_independent_factors():
    """Factors permuted against the code carry no information, so the floor is what the estimator
    returns for a true MIG of 0: near 0 for broad posteriors, clearly above 0 for sharp ones with a
    many-valued factor (its conditional aggregates have few points), and below a coded factor's MIG."""
    from priorlab.metrics.mig_chen import gaps, permutation_floor

    rng = np.random.RandomState(3)
    n = 3000
    f = np.stack([rng.randint(3, size=n), rng.randint(40, size=n)], 1)
    mu = np.stack([0.5 * f[:, 1] + 0.1 * rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(n)], 1)
    for std, low, high in ((1.0, -0.01, 0.01), (0.01, 0.02, 0.5)):
        logvar = np.full_like(mu, 2 * np.log(std))
        out = mutual_information(mu, logvar, f, n_samples=1000, random_state=0)
        floors = permutation_floor(out, mu, logvar, f, 3, n_samples=1000, random_state=1, exclude=(0,))
        assert len(floors) == 3 and all(low < x < high for x in floors), (std, floors)
        assert gaps(out, exclude=(0,))["mig"] > max(floors) + 0.1  # the coded factor stands out
    same = permutation_floor(out, mu, logvar, f, 2, n_samples=1000, random_state=1, exclude=(0,))
    assert same == permutation_floor(out, mu, logvar, f, 2, n_samples=1000, random_state=1, exclude=(0,))
