"""How the static session's items are named in pytest's output: by what each checks, in the repository's own
folders (`golden/gemm/v0/sm_90`, `kernels/gemm.py::declaration`), never by the plugin's file inside a venv."""

from __future__ import annotations

import re
from collections.abc import Mapping

import pytest

from tilelang_golden.catalog.cases import Case
from tilelang_golden.catalog.loading import BrokenFamily
from tilelang_golden.family import Family
from tilelang_golden.static.snapshots.acknowledged import ledger_path
from tilelang_golden.static.snapshots.snapshot import MANIFEST
from tilelang_golden.static.variant_effects import summary_path


def keeps_ids_apart() -> bool:
    """Whether this pytest keeps an item's id apart from `item._nodeid` (9.2 and later: `_pytest.nodeid`)."""
    try:
        import _pytest.nodeid  # noqa: F401
    except ImportError:
        return False
    return True


def set_node_id(item: pytest.Item, nodeid: str) -> None:
    """pytest 9.2 and later read an item's id from `item._id` (a `_pytest.nodeid.NodeId`); earlier ones, and
    pytest-xdist's loadgroup, from `item._nodeid`."""
    if keeps_ids_apart():
        from _pytest.nodeid import coerce_node_id

        item._id = coerce_node_id(nodeid)
    else:
        item._nodeid = nodeid


def item_name(item: pytest.Item, golden: str, groups: Mapping[str, tuple[Family, list[Case]]]) -> str:
    """What an item checks, as pytest names it in its summary: a case by its snapshots' path without suffix
    (`golden/gemm/v0/sm_90`), a summary, a family's ledger or the manifest by its file, a family's load, declaration
    or checks by its file (`kernels/gemm.py::declaration`), the orphan check and an item of no family (pytest's empty
    parameter set) by the folder (`golden/::orphans`)."""
    params = item.callspec.params if hasattr(item, "callspec") else {}
    value = next(iter(params.values()), None)
    test = getattr(item, "originalname", item.name)
    if isinstance(value, Case):
        return f"{golden}{value.id}"
    if isinstance(value, BrokenFamily):
        return f"{value.file}::loads"
    if isinstance(value, Family) and test == "test_regressions_ledger":
        return f"{golden}{ledger_path(value.name)}"
    if isinstance(value, Family):
        return f"{golden}{summary_path(value)}" if test == "test_variant_effects" else f"{value.file}::declaration"
    if isinstance(value, str) and value in groups:
        family, _ = groups[value]
        return f"{family.file}::checks" + ("" if value == family.name else f"[{value}]")
    if test == "test_manifest":
        return f"{golden}{MANIFEST}"
    return f"{golden}::{test.removeprefix('test_no_')}"


GROUP_SUFFIX = re.compile(r"@[^/@\]\s]+$")  # pytest-xdist's loadgroup


def checks_nothing(item: pytest.Item) -> bool:
    """pytest's stand-in for a check with no values (no family failed to load, none has variant pairs to summarize),
    which would only be a skip that names the plugin's file."""
    marker = item.get_closest_marker("skip")
    return marker is not None and str(marker.kwargs.get("reason", "")).startswith("got empty parameter set")


def locate(report: pytest.TestReport, golden: str) -> None:
    """Where pytest says a report comes from, in the repository's own words: its failure's heading is the item's name
    (a case's snapshots' path), and a skip is filed under the snapshot folder, so that the skips of one cause fold into
    one line there (never the plugin's file inside a venv)."""
    name = GROUP_SUFFIX.sub("", report.nodeid)
    report.location = (name.split("::")[0], None, name)
    if report.skipped and isinstance(report.longrepr, tuple):
        report.longrepr = (golden.rstrip("/"), None, report.longrepr[2])
