"""Paper 003's synthetic recovery study (the ``sparse_vae_experiments`` stage): sparse VAE vs VAE,
β-VAE, VSC, PCA and FactorAnalysis on the §2.2 benchmark as the factor correlation ρ grows (fig. 2–4).
The same stage reports the MovieLens and single-cell experiments (table 1a, 3a, 4; fitted by the
``sparse_vae_real`` stage, :mod:`.real`) and writes the fidelity table (:mod:`.fidelity`).

The grid is ``sparse_vae_study`` (:class:`~priorlab.config.SparseVaeStudyParams`): per ρ,
``datasets_per_rho`` data sets (seed d draws data set d; the models are seeded with d too), every
``models`` entry trained from scratch by the shared trainer, and scikit-learn PCA / FactorAnalysis
fitted on the training half; the ``variant_models`` (the released code's loss scaling, VSC) on the
first ``variant_datasets_per_rho`` data sets, shown beside the claims, never deciding them.

Measured on the held-out half: MSE of the reconstruction at the posterior mean (PCA / FA: their
projection); DCI disentanglement with the true continuous z (``dci_mode: regression``, the released
code's ``GradientBoostingRegressor`` per factor; ``classification``: z binned into ``dci_bins``
training-quantile bins), importances fitted on all held-out points (the authors scored 16); for the
sparse VAE and the linear baselines the recovered support of W against the true one (features 1–3 ←
z1, 4–6 ← z2, 7 ← both): estimated columns are matched to the true factors by the Hungarian rule on
|corr(code, z)|; sparse VAE support = p*_jk > 0.5, linear support = |loading| ≥ 0.1 · the column's
max; precision, recall, F1 over the 7 × 2 entries. Active columns: the sparse VAE's columns with some
p* > 0.5 (paper: 2 of 5); the other deep models' active units (variance of the posterior mean over
the held-out points > 0.01). A fit *collapsed* when its MSE > 3 or it has fewer than 2 active columns:
reported as a rate per ρ, never dropped.

Every deep model has the σ prior of its objective (σ_j² ~ IG, App. C.2), as the released code gives
the VAE, β-VAE and VSC the sparse VAE's: with ``loss_scaling: paper`` the ``gaussian_ig`` likelihood
(σ_j² at the stochastic full-data MAP after every step); with ``released_code`` the released code's own
treatment, ``gaussian_ig_released`` (log σ_j from the data's std, learned by the model's Adam on the
code's σ objective), and θ ~ U(0, 1). Claims: :func:`.claims.decide_claims`, twice with equal weight —
*as written* on the ``models`` (``paper``) and *as released* on the ``variant_models``
(``released_code``), each on the medians over its data sets; the deep baselines are the ``vae``-kind
entries of each list.

Modules: :mod:`.fit` (the ``sparse_vae_fit`` cells, one per ρ), :mod:`.real` (the ``sparse_vae_real``
stage: the real-data fits and their scores), :mod:`.aggregate` (cells and real-data rows -> summaries
and the data-plot table), :mod:`.claims` (rows -> claims), :mod:`.report` (figure, README, summary,
the stage), :mod:`.fidelity` (the fidelity table).
"""

from __future__ import annotations

NAME = "sparse_vae_experiments"  # stage, module and report folder
TITLE = "Sparse VAE: synthetic recovery, MovieLens and single cell (paper 003)"
PAPER = "003"
