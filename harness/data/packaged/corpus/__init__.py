"""Packaged data files (built by scripts/build_data.py)."""
