"""The verdict benchmark copies a run's results as families of their own, and at ten times a library whose every case
changed the job summary and the pull request comment stay within GitHub's limits."""

from __future__ import annotations

from benchmarks.verdict_scale import COMMENT_LIMIT, SUMMARY_LIMIT, measure, scaled
from tilelang_golden.static.snapshots.changes import FactChange, FileChange, Mismatch
from tilelang_golden.static.snapshots.results import CheckResult, Status
from tilelang_golden.targets import TARGETS


def changed(family: str, variant: str, target: str) -> CheckResult:
    """A case whose facts and CUDA changed, as a TileLang bump changes every case (each its own numbers)."""
    case = f"{family}/{variant}/{target}"
    facts = Mismatch(f"golden/{case}.yaml", FileChange.FACTS, "facts", (FactChange(("registers",), "96", "128"),))
    source = Mismatch(f"golden/{case}.cu", FileChange.SOURCE, "CUDA", diff=(f"-  x = {variant};", f"+  y = {target};"))
    return CheckResult(case, Status.FAILED, (family, variant, target), mismatches=(facts, source), accept=case)


RESULTS = [changed(f"family{f}", f"v{v}", t) for f in range(17) for v in range(4) for t in TARGETS]


def test_copies_are_families_of_their_own():
    copies = scaled(RESULTS, 3)
    assert len(copies) == 3 * len(RESULTS)
    assert len({r.check for r in copies}) == len(copies)
    third = copies[2 * len(RESULTS)]
    assert third.check == "family0_x3/v0/sm_80" and third.mismatches[0].path == "golden/family0_x3/v0/sm_80.yaml"


def test_at_ten_times_the_summary_and_the_comment_fit():
    row = measure(RESULTS, 10)
    assert row["failed"] == 10 * len(RESULTS)
    assert row["summary_kib"] * 1024 <= SUMMARY_LIMIT and row["comment_chars"] <= COMMENT_LIMIT
