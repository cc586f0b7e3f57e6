"""Which targets emit the same kernel source (tilelang_golden/static/snapshots/target_identity.py), and where it is
reported."""

from __future__ import annotations

import io
from pathlib import Path

from tilelang_golden.static.snapshots.results import CheckResult, append_result
from tilelang_golden.static.snapshots.snapshot import SnapshotStore, cuda_header
from tilelang_golden.static.snapshots.target_identity import NAMED_DIFFERENCES, identical_target_pairs, identity_lines

KERNEL = "__global__ void k() {}\n"
OTHER = "__global__ void k() { __syncthreads(); }\n"


def snapshot(store: SnapshotStore, variant: str, target: str, source: str) -> None:
    suffix = ".hip" if target.startswith("gfx") else ".cu"
    # The header names the case and target, so files differ in it even when the kernels are equal.
    store.write(f"{variant}/{target}{suffix}", cuda_header(f"{variant}/{target}", target) + source)


def test_identical_source_is_reported_per_pair_with_the_variants_that_differ(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    for variant in ("f/a", "f/b", "g/c"):
        snapshot(store, variant, "sm_80", KERNEL)
        snapshot(store, variant, "sm_89", KERNEL if variant != "g/c" else OTHER)
        snapshot(store, variant, "gfx942", OTHER)
    store.write("f/a/sm_80.yaml", "facts: not source\n")
    store.write("f/SUMMARY.md", KERNEL)
    pairs = identical_target_pairs(store)
    assert [(p.first, p.second, p.identical, p.different) for p in pairs] == [
        ("sm_80", "sm_89", ("f/a", "f/b"), ("g/c",)),
        ("sm_89", "gfx942", ("g/c",), ("f/a", "f/b")),
    ]
    assert identity_lines(store) == [
        "sm_80 = sm_89: 2 of 3 variants (differ: g/c)",  # mostly the same: the exceptions are named
        "sm_89 = gfx942: 1 of 3 variants (same: g/c)",  # mostly different: the identical ones are named
    ]


def test_a_pair_with_no_identical_variant_is_not_listed(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    snapshot(store, "f/a", "sm_80", KERNEL)
    snapshot(store, "f/a", "sm_90", OTHER)
    snapshot(store, "f/b", "sm_90", KERNEL)  # only one target: nothing to compare
    assert identity_lines(store) == []


def test_long_difference_lists_are_counted(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    for index in range(2 * NAMED_DIFFERENCES + 4):
        snapshot(store, f"f/v{index:02}", "sm_80", KERNEL)
        snapshot(store, f"f/v{index:02}", "sm_89", KERNEL if index < NAMED_DIFFERENCES + 2 else OTHER)
    (line,) = identity_lines(store)
    assert line.startswith(f"sm_80 = sm_89: {NAMED_DIFFERENCES + 2} of {2 * NAMED_DIFFERENCES + 4} variants (differ: ")
    assert line.endswith(" and 2 more)")


def test_the_job_summary_lists_identical_targets_from_the_pending_folder(tmp_path: Path) -> None:
    pending = SnapshotStore(tmp_path / "pending")
    snapshot(pending, "f/a", "sm_80", KERNEL)
    snapshot(pending, "f/a", "sm_89", KERNEL)
    append_result(pending.root, CheckResult("f/a/sm_80", case=("f", "a", "sm_80")))
    out = io.StringIO()
    from tilelang_golden.static.report.job_summary import main

    assert main([str(pending.root)], environ={}, out=out) == 0
    assert "### Targets with byte-identical kernel source\n\n- sm_80 = sm_89: 1 of 1 variants\n" in out.getvalue()
    out = io.StringIO()
    main([str(pending.root), "--no-produced-files"], environ={}, out=out)
    assert "byte-identical" not in out.getvalue()
