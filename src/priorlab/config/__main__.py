"""``python -m priorlab.config use PROFILE`` | ``check [PATH]``."""

from priorlab.config import main

raise SystemExit(main())
