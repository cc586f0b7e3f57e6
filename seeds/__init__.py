"""The seed reproductions, one command line per seed, each run from the repository root as `python -m seeds.MODULE`."""
