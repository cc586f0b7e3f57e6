"""Kernel families: one module per family, each defining `FAMILY = Family(...)`.

Every module here whose name does not start with `_` is a family and is found by the harness
(`harness.family.load_families`); adding a family is adding one file. A family imports from the
harness only `harness.family` (what it declares) and `harness.analysis` (what its checks may
compute); tests/test_layers.py holds that. README, "Adding a kernel family", walks through a
complete example. The targets every family is lowered for are a project setting:
`harness.targets`.
"""
