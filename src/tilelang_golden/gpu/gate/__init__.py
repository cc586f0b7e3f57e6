"""Judging the measurements: the numeric gate, the timing gate against a baseline, the A/B gate, the verdict."""
