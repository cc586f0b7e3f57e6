"""Kernel families: one module per family, each defining `FAMILY = Family(...)`.

Every module here whose name does not start with `_` is a family and is found by the harness
(`tilelang_golden.catalog.loading.load_families`); adding a family is adding one file. A family imports from the
harness only `tilelang_golden.family` (what it declares) and `tilelang_golden.analysis` (what its checks may
compute); tests/test_layers.py holds that. README, "Adding a kernel family", walks through a
complete example. The targets every family is lowered for are a project setting:
`tilelang_golden.targets`.
"""
