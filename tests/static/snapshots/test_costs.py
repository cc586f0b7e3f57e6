"""The costs file (<golden>/COSTS.yaml): written and read back, what a regen and a refresh record, the fallback for a
case without a record, a file that cannot be read, and `tilelang-golden costs`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import SMALL_CASE

from tilelang_golden.catalog.cases import all_cases
from tilelang_golden.catalog.loading import load_families
from tilelang_golden.static.snapshots.costs import (
    COSTS,
    Costs,
    CostsError,
    group_costs,
    load_costs,
    main,
    measured,
    read_costs,
    record,
    render_costs,
    updated,
)
from tilelang_golden.static.snapshots.results import CheckResult, Status, append_result
from tilelang_golden.static.snapshots.snapshot import SnapshotStore


def everything(case: str) -> bool:
    return True


def test_the_costs_are_written_rounded_and_read_back(tmp_path):
    path = tmp_path / COSTS
    line = record(path, {"f/v/sm_90": 0.4237, "f/w/sm_90": 12.34, "f/x/sm_90": 0.001}, everything, refresh=False)
    assert line == f"{path.as_posix()}: 3 cases, 3 recorded, 0 measured again, 0 dropped"
    assert read_costs(path) == {"f/v/sm_90": 0.42, "f/w/sm_90": 12.0, "f/x/sm_90": 0.01}, "two digits, 0.01 s least"
    text = path.read_text()
    assert text.startswith("# Seconds each case costs") and "\nseconds:\n  f/v/sm_90: 0.42\n" in text
    assert record(path, {"f/v/sm_90": 0.4237}, everything, refresh=False) is None, "nothing new: the file stays"
    assert SnapshotStore(tmp_path).files() == set(), "not a snapshot: never an orphan"


def test_a_regen_records_new_cases_only_and_drops_those_no_family_has():
    """So a regen that changes nothing leaves the file as it is, on a machine of any speed."""
    old = {"f/v/sm_90": 1.0, "gone/v/sm_90": 2.0}
    new = {"f/v/sm_90": 9.0, "f/w/sm_90": 3.0}
    assert updated(old, new, lambda case: not case.startswith("gone/"), refresh=False) == {
        "f/v/sm_90": 1.0,
        "f/w/sm_90": 3.0,
    }


def test_a_refresh_measures_again_only_what_is_off_by_more_than_the_tolerance():
    old = {"f/a/sm_90": 1.0, "f/b/sm_90": 1.0, "f/c/sm_90": 1.0}
    new = {"f/a/sm_90": 1.29, "f/b/sm_90": 0.71, "f/c/sm_90": 1.46}
    assert updated(old, new, everything, refresh=True) == {"f/a/sm_90": 1.0, "f/b/sm_90": 1.0, "f/c/sm_90": 1.5}


def test_a_case_without_a_record_costs_its_familys_median_else_every_records():
    costs = Costs(Path(COSTS), {"a/x/sm_90": 1.0, "a/y/sm_90": 3.0, "b/x/sm_90": 10.0})
    assert costs.of("a/x/sm_90") == 1.0 and costs.of("a/z/sm_90") == 2.0 and costs.of("c/x/sm_90") == 3.0
    assert Costs(Path(COSTS), {}).of("c/x/sm_90") == 1.0, "nothing recorded: every case alike"
    members = [("g1", "a/x/sm_90"), ("g1", "a/y/sm_90"), ("g2", "b/x/sm_90"), ("session", None)]
    assert group_costs(members, costs) == {"g1": 4.0, "g2": 10.0, "session": 0.0}


def test_only_the_cases_a_run_lowered_are_measured():
    results = [
        CheckResult("f/a/sm_90", case=("f", "a", "sm_90"), lowering="lowered", seconds=1.5),
        CheckResult("f/b/sm_90", case=("f", "b", "sm_90"), lowering="cache", seconds=0.01),
        CheckResult("f/c/sm_90", Status.FAILED, case=("f", "c", "sm_90"), seconds=0.5),  # did not lower
        CheckResult("test_manifest", seconds=0.0),
    ]
    assert measured(results) == {"f/a/sm_90": 1.5}


UNREADABLE = {
    "not YAML": ("seconds: [\n", "not valid YAML"),
    "a list": ("- f/v/sm_90\n", "expected one mapping, `seconds:`"),
    "another key": ("seconds: {}\nminutes: {}\n", "expected one mapping, `seconds:`"),
    "not a case id": ("seconds:\n  f/v: 1.0\n", "expected case ids (family/variant/target) with positive seconds"),
    "negative": ("seconds:\n  f/v/sm_90: -1\n", "got 'f/v/sm_90': -1"),
    "a word": ("seconds:\n  f/v/sm_90: yes\n", "got 'f/v/sm_90': True"),
}


@pytest.mark.parametrize("kind", UNREADABLE)
def test_a_file_that_cannot_be_read_is_named_and_counts_as_empty(tmp_path, kind):
    text, problem = UNREADABLE[kind]
    path = tmp_path / COSTS
    path.write_text(text)
    with pytest.raises(CostsError, match=re.escape(problem)):
        read_costs(path)
    costs = load_costs(tmp_path)
    assert costs.seconds == {} and str(path) in costs.problem and problem in costs.problem
    assert "every case counts 1 s" in costs.problem and "tilelang-golden costs --record" in costs.problem
    line = record(path, {"f/v/sm_90": 2.0}, everything, refresh=False)
    assert line and line.endswith(": rewritten)") and read_costs(path) == {"f/v/sm_90": 2.0}


def test_the_costs_command_records_a_cold_run_and_predicts_the_shards(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.tilelang-golden]\ntargets = ["sm_90"]\nshards = 3\n')
    monkeypatch.chdir(tmp_path)
    cases = [case.id for case in all_cases(load_families()) if case.target == "sm_90"]
    other = next(case for case in cases if not case.startswith(SMALL_CASE.split("/")[0]))
    (tmp_path / "golden").mkdir()
    (tmp_path / "golden" / COSTS).write_text(render_costs({SMALL_CASE: 1.0, "gone/v/sm_90": 5.0}))
    pending = tmp_path / "pending"
    for case, seconds, lowering in ((SMALL_CASE, 1.2, "lowered"), (other, 4.0, "lowered"), (cases[-1], 9.0, "cache")):
        append_result(pending, CheckResult(case, case=tuple(case.split("/")), lowering=lowering, seconds=seconds))

    assert main(["--record", str(pending)]) == 0
    shown = capsys.readouterr().out
    assert read_costs(tmp_path / "golden" / COSTS) == {SMALL_CASE: 1.0, other: 4.0}, "within 30 %, new, dropped"
    assert f"golden/{COSTS}: 2 cases, 1 recorded, 0 measured again, 1 dropped" in shown, shown
    assert f"{len(cases)} cases in " in shown and "<- shards in pyproject.toml" in shown, shown
    assert [line.split()[0] for line in shown.splitlines() if line.endswith("pyproject.toml")] == ["3"], shown

    empty = tmp_path / "warm"
    append_result(empty, CheckResult(SMALL_CASE, case=tuple(SMALL_CASE.split("/")), lowering="cache"))
    assert main(["--record", str(empty)]) == 2
    assert "no case was lowered in that run; run `tilelang-golden costs --record" in capsys.readouterr().err
