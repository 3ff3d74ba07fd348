"""Paper 000's study (the ``mssc_experiments`` stage): max-rule vs linear spike-and-slab sparse coding
on the bars test and on natural-image patches.  The stage only aggregates: the models are trained by
the ``mssc_fit`` stages (:mod:`.fit`, one per ``models`` entry and bars entry) and the ``mssc_patches``
stages (one per ``models`` entry), whose rows it reads (:func:`.aggregate.read_cells`).

The grid is ``mssc_study`` of the params (:class:`~priorlab.config.MsscStudyParams`): every
``models`` entry (kinds ``mssc`` / ``linear_ssc``) on every ``bars`` data set entry (occluding and
linearly superposed bars), once per seed.  Figures (:mod:`.report`): learned W vs the true bars, the
recovery table (README), inferred vs true sparsity, patch dictionaries of both models.  The claim is
decided by :func:`.claims.recovery_claims`, whose criteria live in :mod:`priorlab.studies.criteria`.

Modules: :mod:`.fit` (the ``mssc_fit`` / ``mssc_patches`` cells), :mod:`.aggregate` (cells -> rows
and the recovery table), :mod:`.claims` (rows -> claims), :mod:`.report` (figures, README, summary,
the stage).
"""

from __future__ import annotations

NAME = "mssc_experiments"  # the paper's name: its stage, model folder, metrics folder and report folder
TITLE = "Max-rule vs linear spike-and-slab sparse coding: bars test and image patches (paper 000)"
PAPER = "000"
