"""A classifier as a model the shared trainer fits: a net whose outputs are class logits, trained with
cross-entropy on the batch's labels (the supervised ceiling of paper 001's semi-supervised factor,
:mod:`priorlab.studies.fmvae_experiments.supervised_ceiling`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from priorlab.models.protocol import Batch, LogValue, Model, StepContext


class Classifier(Model):
    """``net(x)`` are the logits; a step is Adam on the mean cross-entropy of the batch's labels."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def train_step(self, batch: Batch, step: int, ctx: StepContext) -> dict[str, LogValue]:
        if batch.labels is None:
            raise ValueError("a classifier trains on labelled rows (TrainingSet.labels)")
        loss = F.cross_entropy(self(batch.x), batch.labels)
        ctx.optimizer.zero_grad()
        loss.backward()
        ctx.optimizer.step()
        return {"loss": loss.detach()}

    def represent(self, x: Tensor) -> Tensor:
        """The logits."""
        return self(x)

    @torch.no_grad()
    def correct(self, x: Tensor, y: Tensor, prepare, batch: int = 500) -> Tensor:
        """Per row of ``x``: whether its arg-max logit is the label ``y`` (bool), in evaluation mode."""
        was = self.training
        self.eval()
        hits = torch.cat([self(prepare(x[s : s + batch])).argmax(1) == y[s : s + batch] for s in range(0, len(x), batch)])
        self.train(was)
        return hits
