"""Benchmarks and device checks: tools run by hand (``make bench``, ``python -m benchmarks.gpu_bench``),
not part of the library or the pipeline."""
