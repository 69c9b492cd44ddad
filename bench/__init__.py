"""Benchmarks: each prints its figures and the ratio to a baseline measured in the same run."""
