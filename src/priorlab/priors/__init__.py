"""Latent priors: ``nn.Module`` factories of ``torch.distributions.Distribution`` objects.

A prior module's ``forward(x)`` returns p(z) (possibly depending on the
observation batch, e.g. VSC's pseudo-input selector); learnable priors keep
their parameters as module parameters or buffers.
"""

from priorlab.priors.standard_normal import StandardNormalPrior

__all__ = ["StandardNormalPrior"]
