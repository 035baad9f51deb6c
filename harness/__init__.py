"""Benchmark and evaluation harness for retrieval-augmented reasoning."""

__version__ = "0.1.0"
