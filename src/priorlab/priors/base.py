"""The prior module every model's p(z) comes from.

A prior is an ``nn.Module`` whose ``forward(x=None)`` returns a
``torch.distributions.Distribution`` (it may depend on the observation batch,
e.g. VSC's pseudo-input selector).  Its learnable parameters are trained with
the model's optimiser in the groups it declares with :meth:`Prior.param_groups`:
by default one group at the training lr, or at its own ``lr`` when one is set
(e.g. the ISA exponents, paper 004).
"""

from __future__ import annotations

from torch import nn


class Prior(nn.Module):
    """Base class: ``lr`` > 0 trains this prior's parameters at their own learning rate."""

    def __init__(self, lr: float = 0.0):
        super().__init__()
        if lr < 0:
            raise ValueError(f"prior lr must be >= 0, got {lr!r}")
        self.lr = float(lr)

    def param_groups(self, lr: float) -> list[dict]:
        """Optimiser groups of this prior's trainable parameters (none when it has none)."""
        params = [p for p in self.parameters() if p.requires_grad]
        return [{"params": params, "lr": self.lr or lr, "name": "prior"}] if params else []
