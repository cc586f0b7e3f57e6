"""The benchmarks that measured the harness's numbers (docs/measurements.md), run from the repository root as
`python -m benchmarks.MODULE`."""
