"""The static session's shards, dealt by the costs file: the groups each shard runs, what a shard says of its costs,
a costs file that cannot be read, and the costs a regen records. tests/workflows/test_workflows.py checks that the
workflow's shards and its orphan job select every check exactly once."""

from __future__ import annotations

from conftest import SMALL_CASE, collected_cases

from tilelang_golden.catalog.cases import all_cases
from tilelang_golden.catalog.loading import load_families
from tilelang_golden.static.snapshots.costs import COSTS, read_costs, render_costs


def test_a_shard_runs_the_groups_its_recorded_costs_give_it(golden_session):
    """One family recorded as costing more than all the others together: the first shard runs it alone, the second
    everything else."""
    cases = all_cases(load_families())
    groups: dict[str, set[str]] = {}
    for case in cases:
        groups.setdefault(case.family.name, set()).add(case.group)
    # a family whose cases make one group of their own
    heavy = next(name for name, held in groups.items() if len(held) == 1 and list(groups.values()).count(held) == 1)
    costs = {case.id: 1000.0 if case.family.name == heavy else 0.1 for case in cases}
    golden_session.golden.mkdir()
    (golden_session.golden / COSTS).write_text(render_costs(costs))

    def shard(index: int) -> list[str]:
        return collected_cases(golden_session("--collect-only", "-q", "--shard", f"{index}/2").stdout.lines)

    first, second = shard(1), shard(2)
    assert sorted(first) == sorted(case.id for case in cases if case.family.name == heavy)
    assert sorted(first + second) == sorted(case.id for case in cases)


def test_a_shard_says_what_its_cases_were_predicted_to_cost_and_an_unreadable_costs_file_is_named(golden_session):
    golden_session.golden.mkdir()
    (golden_session.golden / COSTS).write_text("seconds: [\n")
    result = golden_session("--shard", "1/2", "-k", SMALL_CASE)
    result.stdout.fnmatch_lines(
        [
            f"WARNING: {golden_session.golden / COSTS}: not valid YAML*every case counts 1 s, so the shards are "
            "balanced by their number of cases. Rewrite it with `tilelang-golden costs --record*",
            f"shard 1/2: 1 cases, predicted 1 s of lowering ({(golden_session.golden / COSTS).as_posix()}), "
            "lowered 1 in * s",
        ]
    )


def test_a_regen_records_the_costs_of_new_cases_and_drops_those_no_family_has(golden_session):
    assert golden_session("--regen", "-k", SMALL_CASE).ret == 0
    path = golden_session.golden / COSTS
    (recorded,) = read_costs(path).values()
    assert recorded > 0
    path.write_text(render_costs({SMALL_CASE: 99.0, "gone/variant/sm_90": 1.0}))
    regen = golden_session("--regen", "-k", SMALL_CASE)
    regen.stdout.fnmatch_lines([f"{path.as_posix()}: 1 cases, 0 recorded, 0 measured again, 1 dropped"])
    assert read_costs(path) == {SMALL_CASE: 99.0}, "a case recorded keeps its record whatever this machine took"
    again = golden_session("--regen", "-k", SMALL_CASE)
    assert again.ret == 0 and COSTS not in again.stdout.str(), "a regen that changes nothing leaves the file alone"
