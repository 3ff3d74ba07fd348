"""Natural-image patches for sparse coding (paper 000's natural-image experiment) from the two
photographs scikit-learn ships (``sklearn.datasets.load_sample_images``: china.jpg, flower.jpg,
427 x 640 RGB).

The seed text does not describe its natural-image preprocessing.  ``"dog_on_off"`` follows the
practice of the maximal-causes line of work (Puertas, Bornschein & Lücke 2010) for a max-rule
model with non-negative fields: grey level in [0, 1] → difference-of-Gaussians filter on the whole
photograph (centre σ₁, surround σ₂ pixels; a model of retinal centre-surround cells) → random
``P x P`` patches → each patch scaled by the global std of the filtered photographs → ON / OFF
channels ``[max(x, 0), max(-x, 0)]`` (``D = 2P²``, all values ≥ 0, as the max rule's occlusion
needs).  ``"centre"``: grey patches with their own mean removed (``D = P²``).
"""

from __future__ import annotations

import numpy as np


def grey_photographs() -> list[np.ndarray]:
    """The sample photographs as float64 grey images in [0, 1] (ITU-R 601 luma)."""
    from sklearn.datasets import load_sample_images

    return [np.asarray(img, dtype=np.float64) @ np.array([0.299, 0.587, 0.114]) / 255.0
            for img in load_sample_images().images]


def dog_filter(img: np.ndarray, sigmas: tuple[float, float]) -> np.ndarray:
    """Difference of Gaussians ``G_σ₁ * img - G_σ₂ * img`` (reflecting borders)."""
    from scipy.ndimage import gaussian_filter

    return gaussian_filter(img, sigmas[0], mode="reflect") - gaussian_filter(img, sigmas[1], mode="reflect")


def sample_patches(n: int, patch_size: int, rs: np.random.RandomState, preprocess: str = "dog_on_off",
                   sigmas: tuple[float, float] = (1.0, 3.0)) -> np.ndarray:
    """``n`` patches float32 ``[n, D]`` (module docstring); photograph, then corner, drawn uniformly."""
    if preprocess not in ("dog_on_off", "centre"):
        raise ValueError(f"preprocess must be 'dog_on_off' or 'centre', got {preprocess!r}")
    imgs = grey_photographs()
    if preprocess == "dog_on_off":
        imgs = [dog_filter(img, sigmas) for img in imgs]
        scale = float(np.concatenate([img.ravel() for img in imgs]).std())
        imgs = [img / scale for img in imgs]
    P = int(patch_size)
    which = rs.randint(len(imgs), size=n)
    out = np.empty((n, P * P))
    for i, k in enumerate(which):
        img = imgs[k]
        r, c = rs.randint(img.shape[0] - P + 1), rs.randint(img.shape[1] - P + 1)
        out[i] = img[r : r + P, c : c + P].ravel()
    if preprocess == "centre":
        return (out - out.mean(1, keepdims=True)).astype(np.float32)
    return np.concatenate([np.maximum(out, 0.0), np.maximum(-out, 0.0)], 1).astype(np.float32)


def on_off_to_image(w: np.ndarray, patch_size: int) -> np.ndarray:
    """A field ``[2P²]`` (ON, OFF) as the ``P x P`` image ON − OFF; a ``[P²]`` field reshaped."""
    w = np.asarray(w)
    P2 = patch_size * patch_size
    if w.shape[-1] == 2 * P2:
        w = w[..., :P2] - w[..., P2:]
    return w.reshape(*w.shape[:-1], patch_size, patch_size)
