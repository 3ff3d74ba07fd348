"""Figures (matplotlib, Agg backend, PNG written atomically)."""

import matplotlib

matplotlib.use("Agg")
