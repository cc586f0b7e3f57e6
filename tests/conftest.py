from __future__ import annotations

import functools
from pathlib import Path

import pytest
import tilelang  # noqa: F401  (imported once here: in-process pytester runs must not re-import it)

# An in-process pytester run drops the modules first imported during it from sys.modules afterwards. These two
# break when imported again: PyYAML's C loader keeps the node classes of its first import (a YAML mapping then
# reads as an unknown tag), and torch's dynamo registers an operator library that may be registered only once
# (torch imports it on the first random tensor made on the meta device: the declaration check's).
import torch._dynamo  # noqa: F401
import yaml  # noqa: F401

import tilelang_golden.static
from kernels.gemm_num_stages import FAMILY as NUM_STAGES_FAMILY
from kernels.gemm_num_stages import variant as num_stages_variant
from tilelang_golden.catalog.cases import Case
from tilelang_golden.catalog.loading import load_families
from tilelang_golden.static.engine import check_case
from tilelang_golden.static.session import LoweringSession
from tilelang_golden.static.snapshots.snapshot import SnapshotStore
from tilelang_golden.upgrade.preview import CaseRow, case_row

load_families()  # import the kernel modules before pytester snapshots sys.modules

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
# The module's file, found without importing it: each in-process session must import it afresh, so that
# its parametrization reads the families as a test has patched them.
GOLDEN_TEST = Path(tilelang_golden.static.__file__).with_name("session_items.py")
# A case that lowers in a fraction of a second: used wherever any case would do.
SMALL_CASE = "gemm_num_stages/ns0_64x64x32/sm_90"
# Every subprocess's time limit: a net for a hang, never a judgment of speed. Minutes beyond the slowest one on a
# busy 2-core machine (a golden session lowering two families, about 2 minutes there), within the CI job's 30.
SUBPROCESS_LIMIT_S = 600


def classify_case(case: Case, golden: SnapshotStore, pending: SnapshotStore, lowerings: LoweringSession) -> CaseRow:
    """One case's row of an upgrade preview, as the preview reads it from its static session's result."""
    return case_row(check_case(case, lowerings, golden, pending))


def collected_items(lines: list[str]) -> list[str]:
    """The item ids `--collect-only -q` prints, one a line, before its blank line and count."""
    return lines[: lines.index("")] if "" in lines else list(lines)


def collected_cases(lines: list[str], golden: str = "golden/") -> list[str]:
    """The case ids among `--collect-only -q` lines: a case's item is named by its snapshots' path without suffix,
    `<golden>family/variant/target`."""
    return [
        line.removeprefix(golden)
        for line in lines
        if line.startswith(golden) and line.count("/") == golden.count("/") + 2 and "::" not in line
    ]


@functools.cache
def num_stages_case(n: int, target: str, tile: tuple[int, int, int] = (128, 128, 32)) -> Case:
    """The seed GEMM with N stages for a target: one Case for the same arguments, so the tests that lower it share
    its lowering in `lowerings` (whose memos hold the very Variant they were given)."""
    return Case(NUM_STAGES_FAMILY, num_stages_variant(n, *tile), target)


@pytest.fixture(scope="session")
def lowerings() -> LoweringSession:
    """The tests' own lowerings, shared as one run of the harness shares them (each in-process golden session
    makes its own)."""
    return LoweringSession()


@pytest.fixture(scope="session")
def shared_machine_code(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """One machine code cache for every golden session of the test run (each xdist worker's too): its entries are
    keyed on the CUDA text and every input of the compile, so any run may read any other's."""
    base = tmp_path_factory.getbasetemp()
    return (base if worker_id == "master" else base.parent) / "machine-code"


@pytest.fixture
def golden_session(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_machine_code):
    """Run the golden pytest session in-process against a temporary golden/ folder.

    The runs of one test share a lowering cache of their own, as one user's runs share theirs: a static run after a
    regen reads what the regen lowered, and a case is lowered again only where something it is made from changed (the
    cache's key; a test that changes what the key does not see, or counts lowerings, passes `--no-cache` or its own
    `--lowering-cache`). Runs share no lowerings in memory: each is a new process's. The machine code cache is the
    test run's (`shared_machine_code`); a test that counts compiles passes its own `--machine-code-cache`.
    """
    golden = tmp_path / "golden"
    pending = tmp_path / "pending"
    monkeypatch.delenv("CI", raising=False)

    def run(*args: str) -> pytest.RunResult:
        # Never the repository's caches.
        own = (f"--lowering-cache={tmp_path / 'lowering-cache'}",)
        cache = () if any(a.startswith(("--lowering-cache", "--no-cache")) for a in args) else own
        machine = (f"--machine-code-cache={shared_machine_code}",)
        shared = () if any(a.startswith(("--machine-code-cache", "--no-cache")) for a in args) else machine
        return pytester.runpytest_inprocess(
            "-p",
            "tilelang_golden.static.plugin",
            str(GOLDEN_TEST),
            "-p",
            "no:cacheprovider",
            f"--golden-dir={golden}",
            f"--pending-dir={pending}",
            *cache,
            *shared,
            *args,
        )

    run.golden = golden  # type: ignore[attr-defined]
    run.pending = pending  # type: ignore[attr-defined]
    return run
