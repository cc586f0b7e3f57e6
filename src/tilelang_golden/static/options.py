"""The golden sessions' command-line options, and the reading of the one that carries people's words: the regression
classes a regen may write, each with its reason (`--accept-regression CLASS=REASON`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tilelang_golden.regressions import REASON_PLACEHOLDER, RegressionClass, class_names, unwritten
from tilelang_golden.static.produce.lowering_cache import LoweringCache
from tilelang_golden.static.snapshots.results import PENDING_DIR

ACCEPT_REGRESSION = "--accept-regression"


def add_options(group: Any) -> None:
    """The options of `nox -s static` and `nox -s regen-golden` (pytest's option group `golden`)."""
    group.addoption("--regen", action="store_true", help="rewrite the selected snapshots instead of comparing")
    group.addoption(
        "--force-regen-under-ci", action="store_true", help="allow --regen although CI is set (for a regen job)"
    )
    group.addoption("--shard", default=None, metavar="I/N", help="run only shard I of N (numbered from 1)")
    group.addoption(
        "--golden-dir", default=None, help="snapshot folder (default: pyproject.toml's [tool.tilelang-golden] golden)"
    )
    group.addoption(
        "--families",
        nargs="+",
        default=None,
        metavar="PACKAGE",
        help="importable packages of family files, in order (default: pyproject.toml's [tool.tilelang-golden] "
        "families, else kernels)",
    )
    group.addoption(
        "--lowering-cache",
        default="build/lowering-cache",
        metavar="DIR",
        help="the content-addressed lowering cache (default: build/lowering-cache)",
    )
    group.addoption(
        "--machine-code-cache",
        default=None,
        metavar="DIR",
        help="the content-addressed store of compiled machine code, which a regen reads too (default: the lowering "
        "cache's machine-code folder)",
    )
    group.addoption("--no-cache", action="store_true", help="lower and compile every case; use neither cache")
    group.addoption(
        "--refresh-cache",
        action="store_true",
        help="lower every case and store it, checking that an entry under the same key holds the same files "
        "(what --regen always does)",
    )
    group.addoption(
        "--pending-dir",
        default=PENDING_DIR,
        type=Path,
        help=f"where every run writes what it produced, for review or upload (default: {PENDING_DIR})",
    )

    group.addoption(
        ACCEPT_REGRESSION,
        action="append",
        default=[],
        metavar="CLASS[,CLASS]=REASON",
        help="with --regen: write changes that are regressions of CLASS (tilelang_golden.regressions, e.g. spills), "
        "recording REASON in golden/<family>/REGRESSIONS.yaml; once per class",
    )


def accepted_regressions(values: Sequence[str], regen: bool, classes: Iterable[RegressionClass]) -> dict[str, str]:
    """class -> reason from the `--accept-regression` values; ValueError saying what to write instead."""
    if values and not regen:
        raise ValueError(f"{ACCEPT_REGRESSION} acknowledges what a regen writes: use it with --regen")
    known = class_names(classes)
    accepted: dict[str, str] = {}
    for value in values:
        names, _, reason = value.partition("=")
        reason = reason.strip()
        for name in (name.strip() for name in names.split(",")):
            if name not in known:
                raise ValueError(
                    f"{ACCEPT_REGRESSION} {value!r}: no regression class {name!r}; the classes are {known}"
                )
            if unwritten(reason):
                raise ValueError(
                    f"{ACCEPT_REGRESSION} {value!r}: say why the slower kernel is right after `=`, in place of "
                    f"{REASON_PLACEHOLDER!r} or a TODO; the reason is kept in the family's REGRESSIONS.yaml, where "
                    "review reads it"
                )
            if name in accepted:
                raise ValueError(f"{ACCEPT_REGRESSION} names {name!r} twice; give one reason per class")
            accepted[name] = reason
    return accepted


def lowering_cache(config: pytest.Config) -> LoweringCache | None:
    """The cache the options ask for; a regen never reads its lowerings: it lowers every case (twice) and refreshes
    them."""
    if config.getoption("--no-cache"):
        return None
    refresh = config.getoption("--regen") or config.getoption("--refresh-cache")
    machine_code = config.getoption("--machine-code-cache")
    return LoweringCache(Path(config.getoption("--lowering-cache")), not refresh, machine_code and Path(machine_code))
