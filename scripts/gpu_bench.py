"""GPU benchmark of issue 15, runnable without installing priorlab (``src/`` goes on ``sys.path``) and
without dvc / dvclive, PyYAML or tqdm (stand-ins from ``priorlab.minimal_deps`` where missing).

    python scripts/gpu_bench.py --out DIR          # on a machine with one GPU (about 3 minutes on an H100)
    python scripts/gpu_bench.py --out DIR --tiny   # a dry run on a CPU (small nets, few steps)

What it measures and writes (``DIR/gpu_bench.json``, after every measurement): see
:mod:`priorlab.gpu_bench`.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))
os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars in the benchmark's output

import priorlab  # noqa: E402,F401  (before torch: priorlab sets OMP_WAIT_POLICY)
from priorlab.minimal_deps import install  # noqa: E402

STAND_INS = install()

from priorlab.gpu_bench import main  # noqa: E402

if __name__ == "__main__":
    if STAND_INS:
        print(f"gpu_bench: stand-ins for the missing {', '.join(STAND_INS)} (priorlab.minimal_deps)")
    raise SystemExit(main())
