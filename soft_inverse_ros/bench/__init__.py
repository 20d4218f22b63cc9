"""Benchmarks run by ``soft-inverse-ros bench ...`` (figures go to BENCHMARKS.md)."""
