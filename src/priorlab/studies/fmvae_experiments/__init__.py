"""Paper 001's experiments on trained factorial mixture prior VAEs (the ``fmvae_experiments`` stage).

* ELBO vs K (sec. 4.1, fig. 3): runs of group ``fmvae_experiments/elbo_vs_k`` (I = 1): the predictive bound
  eq. 11, its reconstruction term, KL[z] and KL[r] against log2 K over seeds, and the paper's
  claims tested on the numbers as measured (ELBO rises then saturates; KL[r] rises and KL[z]
  falls with K).
* Cluster figure (fig. 4): per mixture component, the mean and variance of decoded samples
  z ~ p(z | k) (eq. 10) and a few of them.
* Semi-supervised factors (sec. 4.2, group ``fmvae_experiments/semi_supervised``): held-out accuracy of the
  clamped factor's cluster assignment (from ``evaluate``) against the supervised ceiling of the
  ``supervised_ceiling`` stage (issue 10), and a conditional-generation grid iterating the supervised k_0 with
  the other factors fixed per row.
* Factorial grid (fig. 8, group ``fmvae_experiments/factorial``, I = 2): decoded means over (k_1, k_2).

The runs are trained and evaluated by the pipeline's ``train``/``evaluate`` stages (read through
:mod:`priorlab.studies.runs`): :mod:`.aggregate` tabulates their records, :mod:`.claims` decides the
paper's claims, :mod:`.scores` draws decoded samples from the trained models, :mod:`.report` writes the
figures, ``README.md`` and ``summary.json`` (:func:`.report.run_fmvae_experiments`, the stage entry);
:mod:`.supervised_ceiling` is the ``supervised_ceiling`` stage.
"""

from __future__ import annotations

NAME = "fmvae_experiments"  # stage, package and report folder
TITLE, PAPER = "Factorial mixture prior VAE (paper 001)", "001"
