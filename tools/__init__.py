"""The repository's maintenance command lines (the snapshot format's doc generator), run from the repository root as
`python -m tools.MODULE`."""
