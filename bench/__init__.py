"""Benchmarks of strait, run with ``python -m bench.<name>`` (see bench/README.md)."""
