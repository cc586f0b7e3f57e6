"""Snapshot kinds (tilelang_golden/static/kinds.py): one class per kind of file under golden/, and a new kind is one
class."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import SMALL_CASE

import tilelang_golden.catalog.loading
import tilelang_golden.family
from tilelang_golden.catalog.cases import Case, all_cases
from tilelang_golden.static import kinds
from tilelang_golden.static.engine import check_case
from tilelang_golden.static.kinds import (
    KINDS,
    DeclaredError,
    Facts,
    KernelSource,
    MachineFacts,
    SnapshotKind,
    Summary,
    case_kinds,
    kind_of,
)
from tilelang_golden.static.report.verdict import build_verdict
from tilelang_golden.static.session import LoweringSession
from tilelang_golden.static.snapshots import case_files as case_files_module
from tilelang_golden.static.snapshots.case_files import case_files, source_file
from tilelang_golden.static.snapshots.changes import CaseOutcome, FileChange
from tilelang_golden.static.snapshots.results import Status
from tilelang_golden.static.snapshots.snapshot import SnapshotStore

CASE = next(c for c in all_cases(tilelang_golden.catalog.loading.load_families()) if c.id == SMALL_CASE)


class PtxStandIn(SnapshotKind):
    """What a PTX kind would be, standing in for the assembly with the kernel's MMA lines: its suffix, its words,
    which cases have it, how it renders. Reading and comparing are the base kind's (text), but a change of it is
    named a source change, as a real assembly's would be."""

    suffix = ".ptx"
    subject = "PTX"

    def render(self, case: Case, inputs) -> str:
        return "".join(
            f"{line.strip()}\n" for step in inputs.lower().kernels for line in step.cuda.splitlines() if "mma" in line
        )

    def compare(self, path: str, golden: str, produced: str, prefix: str):
        return self.mismatch(prefix + path, FileChange.SOURCE, diff=self.raw_diff(path, golden, produced, prefix))


def test_every_file_of_a_case_has_one_kind_and_a_case_lists_its_files_by_kind():
    hip = Case(CASE.family, CASE.variant, "gfx942")
    assert [type(k) for k in case_kinds(CASE)] == [KernelSource, MachineFacts, Facts]
    assert case_files(CASE) == (f"{CASE.id}.cu", f"{CASE.id}.machine.yaml", f"{CASE.id}.yaml")
    assert source_file(CASE) == f"{CASE.id}.cu"
    assert case_files(hip) == (f"{hip.id}.hip", f"{hip.id}.yaml")
    declared = Case(CASE.family, dataclasses.replace(CASE.variant, does_not_lower={"sm_90": "a loop"}), "sm_90")
    assert [type(k) for k in case_kinds(declared)] == [DeclaredError] and case_files(declared)[0].endswith(".error")
    paths = ("a.cu", "a.hip", "a.machine.yaml", "a.yaml", "a.error", "f/SUMMARY.md", "x")
    subjects = {path: kind_of(path).subject for path in paths}
    assert subjects == {
        "a.cu": "CUDA",
        "a.hip": "HIP",
        "a.machine.yaml": "machine code",
        "a.yaml": "facts",
        "a.error": "error",
        "f/SUMMARY.md": "summary",
        "x": "text",
    }
    assert isinstance(kind_of("f/SUMMARY.md"), Summary) and not any(k.applies_to(CASE) for k in KINDS[-1:])


def test_a_new_kind_is_one_class_and_its_name(tmp_path, monkeypatch):
    """A `.ptx` stand-in, added to KINDS and its name to the snapshot layer's naming rules, nowhere else: every case
    of a CUDA target produces it, the engine writes, compares and names its change, and the verdict reads that
    change in the kind's words."""
    cuda = dict(case_files_module.SNAPSHOT_FILES)[".cu"]
    monkeypatch.setattr(case_files_module, "SNAPSHOT_FILES", (*case_files_module.SNAPSHOT_FILES, (".ptx", cuda)))
    monkeypatch.setattr(kinds, "KINDS", (*KINDS, PtxStandIn()))
    golden, pending = SnapshotStore(tmp_path / "golden"), SnapshotStore(tmp_path / "pending")
    assert case_files(CASE)[-1] == f"{CASE.id}.ptx"

    written = check_case(CASE, LoweringSession(), golden, pending, regen=True)
    assert written.status is Status.PASSED and written.written[f"{CASE.id}.ptx"] == "created", written
    ptx = golden.read(f"{CASE.id}.ptx")
    assert ptx and "mma" in ptx and pending.read(f"{CASE.id}.ptx") == ptx
    assert check_case(CASE, LoweringSession(), golden, pending).outcome is CaseOutcome.PASSED

    golden.write(f"{CASE.id}.ptx", ptx.replace("mma", "wmma", 1))
    result = check_case(CASE, LoweringSession(), golden, pending)
    (mismatch,) = result.mismatches
    assert (result.status, result.outcome, mismatch.path) == (
        Status.FAILED,
        CaseOutcome.CHANGED,
        f"golden/{CASE.id}.ptx",
    )
    assert (mismatch.subject, mismatch.label) == ("PTX", "PTX changed")
    assert f"golden/{CASE.id}.ptx: PTX changed" in result.text
    (entry,) = build_verdict([result]).entries
    assert entry.headline == "PTX changed, no fact changed"
    assert entry.sections[0].label == "PTX: 2 changed lines" and entry.accept.startswith("nox -s regen-golden -- -k")


@pytest.mark.parametrize("kind", [KernelSource("cuda"), Facts(), Summary(), SnapshotKind()], ids=lambda k: k.subject)
def test_a_missing_snapshot_is_named_by_its_kind(kind):
    found = kinds.describe_mismatch(f"f/v/sm_80{kind.suffix}", None, "text\n", "golden/")
    assert (found.kind, found.subject) == (FileChange.MISSING, kind.subject)
