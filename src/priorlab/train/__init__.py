"""Training phases: the shared loop (:mod:`priorlab.train.trainer`)."""

from priorlab.train.trainer import TrainingDiverged, TrainResult, fit, fit_prior, kl_weight

__all__ = ["TrainResult", "TrainingDiverged", "fit", "fit_prior", "kl_weight"]
