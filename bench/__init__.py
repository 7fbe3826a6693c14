"""Benchmarks: see bench/harness.py for the interface and bench/run.py for make bench."""
