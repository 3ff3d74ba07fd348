"""stagerun: the machinery that runs priorlab's DVC stages — the parallel runner (``repro``), shards
over machines (``shard``), a Slurm array (``slurm``), plans for a target without DVC (``plan``), the
forked stage processes (``prefork``) and the one adapter over DVC's internals (``dvc_adapter``).

It imports :mod:`priorlab` and is never imported by it; the stages (``stages/*.py``) depend on
``src/priorlab`` alone (through the ``code`` stage's digest of it), so an edit here leaves every stage of
``dvc.lock`` up to date.
"""
