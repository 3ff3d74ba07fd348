"""GPU benchmark of issue 15, runnable without installing priorlab (``src/`` goes on ``sys.path``) and
without dvc / dvclive.  It needs torch, numpy, scikit-learn, PyYAML and tqdm; on a machine that has
torch but not the last two (and no package index), `make gpu-deps` here puts their pinned wheels,
unpacked, in ``.gpu_deps/`` to carry along:

    PYTHONPATH=.gpu_deps python scripts/gpu_bench.py --out DIR   # one GPU (about 3 minutes on an H100)
    python scripts/gpu_bench.py --out DIR --tiny                 # a dry run on a CPU (small nets, few steps)

What it measures and writes (``DIR/gpu_bench.json``, after every measurement): see
:mod:`priorlab.gpu_bench`.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))
os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars in the benchmark's output

import priorlab  # noqa: E402,F401  (before torch: priorlab sets OMP_WAIT_POLICY)
from priorlab.gpu_bench import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
