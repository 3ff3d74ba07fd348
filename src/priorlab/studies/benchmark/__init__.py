"""The cross-prior benchmark (issue 45; the ``benchmark_fit`` and ``benchmark`` stages): every prior of
the library on the same data, nets, training and seeds, scored with one metric suite — the table no
single paper gives: *which prior, on this kind of data, gives what?*

The grid is ``benchmark`` of the params (:class:`~priorlab.config.BenchmarkParams`): a row per
``benchmark.priors`` entry (a ``models`` entry trained from scratch, optionally at a set strength), a
table per ``benchmark.setups`` entry (a data set with its nets and latent size), a point per seed of
``benchmark.seeds`` (each from scratch: the seeds are independent units).  A prior enters by one line.

Modules: :mod:`.fit` (a ``benchmark_fit`` cell per prior: trains — or reads paper 004's identical
``isa_fit`` models — and scores), :mod:`.synthetic` (a ``benchmark_synthetic`` cell per prior on paper
003's synthetic data, reading that study's identical fits), :mod:`.plan` (the ``benchmark_plan`` stage:
each cell's input), :mod:`.scores` (the scores the evaluate stage does not give: pure), :mod:`.aggregate`
(cells -> frame -> estimates), :mod:`.report` (tables, figures, the generated summary paragraph, the
sparse coding table read from paper 000's cells, ``metrics/benchmark``; the stage).
"""

from __future__ import annotations

NAME = "benchmark"  # its stages, model folder, metrics folder and report folder
TITLE = "Cross-prior benchmark: every prior on the same data, nets, training and seeds"
