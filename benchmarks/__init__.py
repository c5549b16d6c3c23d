"""Benchmark harness for render-service: ``python -m benchmarks.run --help``."""
