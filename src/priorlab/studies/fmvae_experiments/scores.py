"""What paper 001's figures compute on a trained factorial mixture prior VAE: decoded samples of the
prior z ~ p(z | k) (sec. 2.6, eq. 10), the most used components, the conditional-generation grid
(sec. 4.2 / fig. 6) and the factorial grid (fig. 8).  Model and generator in, images (tensors) out."""

from __future__ import annotations

import torch


@torch.no_grad()
def decoded_means(model, components: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Mean of p(x | z) for z ~ p(z | k) (sec. 2.6, eq. 10) at the given components [n, I] (-1 = draw k)."""
    z, _ = model.prior.sample(components.shape[0], generator, components)
    return model.likelihood.mean(model.decode(z.float()))


def top_components(model, factor: int, n: int) -> list[int]:
    """The ``n`` components of ``factor`` with the largest pseudo-counts (the most used ones)."""
    c = model.prior.pseudo_counts()[factor, : model.prior.num_components[factor]]
    return [int(k) for k in torch.argsort(c, descending=True)[:n]]


@torch.no_grad()
def conditional_grid(model, factor: int, rows: int, generator: torch.Generator) -> torch.Tensor:
    """Sec. 4.2 / fig. 6: per row the other factors' (k, z) are drawn once; the columns iterate
    k of ``factor`` over all its components with z_factor ~ p(z | k).  Images [rows * K, C, H, W]."""
    K, D = model.prior.num_components[factor], model.prior.latent_dim
    base, _ = model.prior.sample(rows, generator)  # [rows, I*D]
    comp = torch.full((rows * K, model.prior.num_factors), -1, dtype=torch.long)
    comp[:, factor] = torch.arange(K).repeat(rows)
    z_k, _ = model.prior.sample(rows * K, generator, comp)
    z = base.repeat_interleave(K, 0).clone()
    z[:, factor * D : (factor + 1) * D] = z_k[:, factor * D : (factor + 1) * D]
    return model.likelihood.mean(model.decode(z.float()))


@torch.no_grad()
def factorial_grid(model, n_per_factor: int, n_samples: int, generator: torch.Generator
                   ) -> tuple[torch.Tensor, list, list]:
    """Fig. 8: for the ``n_per_factor`` most used k_1 and k_2, the mean over ``n_samples`` decoded
    conditional samples z ~ p(z | k_1, k_2).  Returns (images [n1 * n2, C, H, W], k_1 list, k_2 list)."""
    if model.prior.num_factors != 2:
        raise ValueError(f"the factorial grid needs I = 2 factors, got {model.prior.num_factors}")
    k1s, k2s = top_components(model, 0, n_per_factor), top_components(model, 1, n_per_factor)
    images = []
    for a in k1s:
        for b in k2s:
            comp = torch.tensor([[a, b]]).expand(n_samples, 2)
            images.append(decoded_means(model, comp, generator).mean(0))
    return torch.stack(images), k1s, k2s
