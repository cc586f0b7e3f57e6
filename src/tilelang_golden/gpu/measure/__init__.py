"""Measuring a running kernel: its numerics against a reference, its time beside its reference, sweeps."""
