"""``python -m priorlab fit|score ...``: the ``priorlab`` command (:mod:`priorlab.console`)."""

import sys

from priorlab.console import main

sys.exit(main())
