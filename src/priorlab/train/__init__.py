"""Training phases: the shared loop (:mod:`priorlab.train.trainer`)."""

from priorlab.train.trainer import Monitor, TrainingDiverged, TrainResult, fit, fit_prior, kl_weight

__all__ = ["Monitor", "TrainResult", "TrainingDiverged", "fit", "fit_prior", "kl_weight"]
