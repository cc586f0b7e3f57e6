"""What a regen refuses, it refuses before writing anything, and a case's first static run says it already: a new case
whose kernel certainly reads shared memory before writing it (upstream's gated delta net without an initial state)
fails its first static run with that read beside `no snapshot committed`, and a regen of it writes none of its files;
so does a regen of a case refused for any other reason (facts that contradict the machine code, two lowerings that
differ, an unacknowledged regression).

The cheap cases are a committed gemm_num_stages case's files, changed as each refusal needs and handed to check_case
as a run's lowerings would hand them (nothing lowered); one case is lowered for real, through the session."""

from __future__ import annotations

import re
from pathlib import Path

import kernel_styles as styles
import pytest
from conftest import REPO, num_stages_case

import tilelang_golden.catalog.loading
from tilelang_golden.catalog.cases import Case
from tilelang_golden.catalog.loading import Registry
from tilelang_golden.static.engine import check_case
from tilelang_golden.static.produce.uninitialized import CERTAIN
from tilelang_golden.static.snapshots.case_files import case_files
from tilelang_golden.static.snapshots.changes import CaseOutcome
from tilelang_golden.static.snapshots.snapshot import SnapshotStore

GOLDEN = REPO / "golden"
CASE = "gemm_num_stages/ns3_128x128x32/sm_80"  # 3 stages filled by cp.async, mma.sync: no warning, no spill
READ = (
    f"shared buffer A_shared in gemm_kernel: {CERTAIN} (the read by T.gemm(A_shared, B_shared, C_local) precedes "
    "every write)"
)


class GivenFiles:
    """What check_case asks of a run's lowerings, answered with given files; `fresh`: what a second lowering gives."""

    def __init__(self, files: dict[str, str], fresh: dict[str, str] | None = None) -> None:
        self.given, self.fresh, self.sources = files, fresh or files, {}

    def build(self, family, variant) -> None:
        return None

    def files(self, case: Case, *, fresh: bool = False) -> dict[str, str]:
        return dict(self.fresh if fresh else self.given)


def committed(case: Case) -> dict[str, str]:
    return {path: (GOLDEN / path).read_text() for path in case_files(case)}


def changed(files: dict[str, str], suffix: str, old: str, new: str) -> dict[str, str]:
    """`files` with `old` replaced by `new` once in the file whose name ends with `suffix`."""
    (path,) = [path for path in files if path.endswith(suffix) and not (suffix == ".yaml" and ".machine." in path)]
    assert files[path].count(old) == 1, f"{old!r} in {path}"
    return {**files, path: files[path].replace(old, new)}


def with_read(files: dict[str, str]) -> dict[str, str]:
    """The facts warning of a certain uninitialized read, as uninitialized.py words one."""
    return changed(files, ".yaml", "warnings: []", f"warnings:\n- '{READ}'")


def without_mma(files: dict[str, str]) -> dict[str, str]:
    """Machine facts without MMA instructions: facts asking for mma.sync contradict them."""
    machine = next(path for path in files if path.endswith(".machine.yaml"))
    text, count = re.subn(r"    mma:\n(?:      \w+: \d+\n)+", "    mma: {}\n", files[machine])
    assert count == 1
    return {**files, machine: text}


def spilling(files: dict[str, str]) -> dict[str, str]:
    return changed(files, ".machine.yaml", "spill_store_bytes: 0", "spill_store_bytes: 64")


def stores(tmp_path: Path) -> tuple[SnapshotStore, SnapshotStore]:
    return SnapshotStore(tmp_path / "golden"), SnapshotStore(tmp_path / "pending")


def snapshot_files(golden: SnapshotStore) -> dict[str, str]:
    return {path: golden.read(path) or "" for path in golden.files()}


# refusal -> (the committed files it starts from, or none: a first snapshot; what this run produces; the second
# lowering's files, where they differ; what the refusal says)
REFUSALS = {
    "uninitialized read": (None, with_read, None, "what its lowering warned about fails its check, so nothing under"),
    "contradiction": (None, without_mma, None, "contradict each other, so nothing under golden/ was written"),
    "nondeterminism": (None, lambda f: f, with_read, "two lowerings of the same case differ"),
    "regression": (lambda f: f, spilling, None, "its change is a regression"),
    "uninitialized read, snapshot committed": (lambda f: f, with_read, None, "what its lowering warned about fails"),
}


@pytest.mark.parametrize("refusal", REFUSALS)
def test_a_regen_that_refuses_a_case_writes_none_of_its_files(refusal, tmp_path):
    snapshot, produced, second, said = REFUSALS[refusal]
    case = num_stages_case(3, "sm_80")
    golden, pending = stores(tmp_path)
    for path, text in (snapshot(committed(case)) if snapshot else {}).items():
        golden.write(path, text)
    before = snapshot_files(golden)
    files = produced(committed(case))
    result = check_case(case, GivenFiles(files, second(files) if second else None), golden, pending, regen=True)
    assert result.failed and said in result.text, result.text
    assert not result.written and snapshot_files(golden) == before, "nothing under golden/ written for it"
    assert all(pending.read(path) == text for path, text in files.items()), "kept for review"


def test_the_first_static_run_of_a_new_case_names_what_the_regen_would_refuse_beside_no_snapshot(tmp_path):
    case = num_stages_case(3, "sm_80")
    golden, pending = stores(tmp_path)
    result = check_case(case, GivenFiles(with_read(without_mma(committed(case)))), golden, pending)
    assert result.failed and result.outcome is CaseOutcome.NEW
    lines = result.text.splitlines()
    assert lines[0].startswith(f"{case.id}: its facts and its machine facts contradict each other (pending/")
    assert f"{case.id}: what its lowering warned about fails its check:" in lines
    assert READ in lines
    assert [line for line in lines if "no snapshot committed" in line] == [
        f"golden/{path}: missing (no snapshot committed for this case)" for path in case_files(case)
    ]
    assert "to accept these changes" not in result.text and result.accept is None  # a regen would refuse it
    assert not golden.files()


def test_a_new_case_that_a_regen_would_write_is_offered_the_regen(tmp_path):
    case = num_stages_case(3, "sm_80")
    golden, pending = stores(tmp_path)
    result = check_case(case, GivenFiles(committed(case)), golden, pending)
    assert result.failed and result.text.splitlines()[0].endswith("missing (no snapshot committed for this case)")
    assert result.text.endswith(f'to accept these changes: nox -s regen-golden -- -k "{case.id}"')


# -- a real lowering: the gated delta net's state, stored before anything sets it ----------------------------------


def test_a_new_gated_delta_net_is_refused_by_its_first_static_run_and_its_regen_writes_nothing(
    golden_session, monkeypatch
):
    family = styles.family(
        styles.state_written_late, {"block_rows": 8}, name="gated_delta_state", outputs=[1], targets=["sm_80"]
    )
    case = Case(family, family.variants[0], "sm_80")
    monkeypatch.setattr(
        tilelang_golden.catalog.loading, "load_families", lambda *packages, **options: Registry((family,), ())
    )
    read = f"shared buffer state in scan_kernel: {CERTAIN} (on the first iteration of loop k, the read by"
    first = golden_session("-k", case.id)
    first.assert_outcomes(failed=1)
    first.stdout.fnmatch_lines(
        [
            f"*{case.id}: what its lowering warned about fails its check:",
            f"{read}*",
            "Fix the kernel in kernels/gated_delta_state.py; *",
            f"golden/{case.id}.cu: missing (no snapshot committed for this case)",
        ]
    )
    assert "to accept these changes" not in first.stdout.str()
    regen = golden_session("--regen", "-k", case.id)
    regen.assert_outcomes(failed=1)
    regen.stdout.fnmatch_lines(
        [
            f"*{case.id}: what its lowering warned about fails its check, so nothing under golden/ was written*",
            f"{read}*",
            "*golden files: 0 created, 0 updated, 0 deleted, 0 unchanged*",
        ]
    )
    assert not golden_session.golden.exists() or not any(golden_session.golden.rglob("*")), "nothing under golden/"
    assert {path.name for path in (golden_session.pending / "gated_delta_state/only").iterdir()} == {
        "sm_80.cu",
        "sm_80.yaml",
        "sm_80.machine.yaml",
    }  # written for review
