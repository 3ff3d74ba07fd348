"""Training phases: the shared loop (:mod:`priorlab.train.trainer`)."""

from priorlab.train.trainer import TrainingDiverged, TrainResult, fit, kl_weight

__all__ = ["TrainResult", "TrainingDiverged", "fit", "kl_weight"]
