"""Paper 004's dSprites study (the ``isa_experiments`` stage): MIG vs β for β-VAE, β-TCVAE, ISA-VAE,
ISA-β-TCVAE and FactorVAE (vs γ).  The stage only aggregates: the models are trained and scored by the
``isa_fit`` stages (:mod:`.fit`: one per ``isa_study.models`` entry and seed, every strength of its
grid), whose rows it reads (:func:`.aggregate.read_rows`).

The grid is ``isa_study`` of the params (:class:`~priorlab.config.IsaStudyParams`): every entry of
``isa_study.models`` at every strength of its grid (β of kind ``vae``; the TC weight of kind
``beta_tcvae``, as the paper's ISA-β-TCVAE weights TC with β; γ of kind ``factor_vae``) × seeds,
trained from scratch with ``isa_study.train`` and scored with ``isa_study.evaluate`` (every metric
of the registry: MIG, MIG without the shape factor, DCI, FactorVAE score, β-VAE score, SAP, and the
test reconstruction log-likelihood E_q log p(x|z)).

Figures (:mod:`.report`): MIG vs strength per model (median, min-max over seeds; paper fig. 3), MIG vs
reconstruction (fig. 4), learned ISA exponents sorted per model (fig. 7), and latent-vs-factor
plots of the representative models (A.5's rule: the run closest, in Mahalanobis distance over
(MIG, reconstruction), to the mean of the upper half of MIG scores).  The claim is decided by
:func:`.claims.mig_claim` (criterion ``004.isa_mig`` of :mod:`priorlab.studies.criteria`).

Modules: :mod:`.fit` (the ``isa_fit`` cells), :mod:`.aggregate` (cells -> frame and tables),
:mod:`.claims` (frame -> claim), :mod:`.report` (figures, README, summary, the stage).
"""

from __future__ import annotations

NAME = "isa_experiments"  # the paper's name: its stage, model folder, metrics folder and report folder
TITLE = "ISA-VAE: Lp-nested prior vs β-VAE, β-TCVAE and FactorVAE on dSprites (paper 004)"
PAPER = "004"
