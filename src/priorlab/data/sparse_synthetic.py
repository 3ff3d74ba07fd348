"""The sparse VAE's synthetic benchmark (paper 003, §2.2 eq. 9 and §4).

z_i ~ N(0, [[1, ρ], [ρ, 1]]) and x_i = f(z_i) + ε_i with the sparse map
f(z) = (z1, 2 z1, 3 z1², 4 z2, 5 z2, 6 sin z2, 7 z1 z2): features 1–3 depend on z1 only,
4–6 on z2 only, 7 on both (the true support of W, :data:`TRUE_SUPPORT`).

Noise level: the text says σ² = 0.5 (std 0.707); the released code (``load_simulated_data``,
``sigma_true=0.5``) adds ``0.5 * randn``, i.e. std 0.5 (σ² = 0.25). The default here is the
code's **noise_std = 0.5**, because that is what produced the paper's figures and tables; pass
``noise_std=0.5 ** 0.5`` for the text's level. The split is an exact 50/50 random permutation (the
authors draw a fold per point, so their halves are only about equal).
"""

from __future__ import annotations

import numpy as np

from priorlab.data.base import as_random_state

N_FEATURES = 7
N_FACTORS = 2
TRUE_SUPPORT = np.array([[1, 0], [1, 0], [1, 0], [0, 1], [0, 1], [0, 1], [1, 1]], dtype=bool)
"""[7, 2]: which factor each feature depends on (features 1–3 → z1, 4–6 → z2, 7 → both)."""


def sparse_map(z: np.ndarray) -> np.ndarray:
    """f(z) of eq. 9 for z [N, 2] → [N, 7] (float64)."""
    z = np.asarray(z, dtype=np.float64)
    if z.ndim != 2 or z.shape[1] != N_FACTORS:
        raise ValueError(f"z must be [N, 2], got shape {z.shape}")
    z1, z2 = z[:, 0], z[:, 1]
    return np.stack([z1, 2 * z1, 3 * z1**2, 4 * z2, 5 * z2, 6 * np.sin(z2), 7 * z1 * z2], axis=1)


def make_sparse_synthetic(n: int = 1000, rho: float = 0.0, noise_std: float = 0.5,
                          test_fraction: float = 0.5, random_state=None) -> dict[str, np.ndarray]:
    """Draw one data set of the benchmark; ``random_state`` (seed or RandomState) is required.

    Returns ``x_train``, ``x_test`` float32 [n_split, 7]; ``sources_train``, ``sources_test`` float64
    [n_split, 2] (the true z); ``support`` bool [7, 2]. ρ ∈ (−1, 1) is the factor correlation
    (the paper uses 0, 0.2, …, 0.8 and 25 data sets per ρ).
    """
    if int(n) < 2:
        raise ValueError(f"n must be >= 2, got {n}")
    if not -1.0 < float(rho) < 1.0:
        raise ValueError(f"rho must lie in (-1, 1), got {rho}")
    if not float(noise_std) >= 0.0:
        raise ValueError(f"noise_std must be >= 0, got {noise_std}")
    n_test = int(round(int(n) * float(test_fraction)))
    if not 0 < n_test < int(n):
        raise ValueError(f"test_fraction {test_fraction} leaves an empty split of n = {n}")
    rs = as_random_state(random_state)
    chol = np.linalg.cholesky(np.array([[1.0, rho], [rho, 1.0]]))
    z = rs.standard_normal((int(n), N_FACTORS)) @ chol.T
    x = sparse_map(z) + float(noise_std) * rs.standard_normal((int(n), N_FEATURES))
    perm = rs.permutation(int(n))
    test, train = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    return {
        "x_train": x[train].astype(np.float32),
        "x_test": x[test].astype(np.float32),
        "sources_train": z[train],
        "sources_test": z[test],
        "support": TRUE_SUPPORT.copy(),
    }
