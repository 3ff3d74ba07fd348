"""Variational Sparse Coding experiments (paper 002): Smiley disentanglement (fig. 3, 9), ELBO vs
prior strength (fig. 1), spike activation per class (fig. 5), conditional generation (fig. 6, 7).

Runs are found by their ``group`` in ``runs:``:

* ``vsc_experiments/smiley``: VSC, β-VAE (a β grid) and β-TCVAE on Smiley setups of several latent sizes.
  Each model is encoded on the data set's freshly generated test split (the pipeline reads nothing
  else; ``python -m benchmarks.vsc_reference`` scores the trained runs on the authors' published set).
* ``vsc_experiments/elbo``: VSC over α and β-VAE over β on Fashion-MNIST (the test ELBO of each run's
  headline metrics, ``metrics/<group>/<run>.json``).

Definitions (all on the posterior mean, the framework's representation):

* source signal ``s_j = presence(group(j)) · v_j`` (the authors' ``S ∘ V``); correlation matrix
  ``A = |corr(s_j, z_d)|`` [18, D], shown with the paper's column ordering
  (``order_latents_by_source``: entries < 0.07 zeroed, latent → source maximising ``A_ij / mean_j A_ij``).
* contrast: ``correlation_contrast(A)``, the mean over sources of ``(top − second) / top``.
* block purity: over used latents (a non-zero column after thresholding), the mean share of the
  latent's column mass ``Σ_i A_id`` lying in the rows of the group of its assigned source (1 = the
  block-diagonal structure of fig. 3d).
* used latents: non-zero columns of the thresholded matrix (the paper's "exploited dimensions").
  Latents that are inactive on the test set (Var_x of the code ≤ ``evaluate.active_threshold``, the
  active-dims criterion) are zero columns: Pearson correlation is scale-free, so a VSC latent whose
  spike is off (codes γμ of order 1e-10) would otherwise still count as correlated.
* presence-aware MIG / DCI (:mod:`priorlab.metrics.presence`): 22 factors = 4 presence flags
  (scored on all points) + 18 binned sources, source ``j`` scored only on the points where its
  group is present (its value has no effect on the image otherwise).  MIG: per-factor gap on that
  subset, averaged; DCI: one classifier per factor on its subset, importance matrix [D, 22], D and
  C as usual, informativeness the mean test accuracy.

Modules: ``scores`` (the Smiley scores and spike statistics from codes and models), ``aggregate`` (the
trained runs and their metrics files -> scores per run, ELBO tables and the data-plot tables),
``claims`` (the ``002.*`` claims) and ``report`` (figures, ``README.md``, ``summary.json`` and the
stage entry :func:`priorlab.studies.vsc_experiments.report.run_vsc_experiments`).
"""

from __future__ import annotations

NAME = "vsc_experiments"  # stage, module and report folder
TITLE, PAPER = "Variational Sparse Coding (paper 002)", "002"
