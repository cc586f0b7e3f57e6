"""What each case costs a static run that lowers it, committed beside the snapshots as `<golden>/COSTS.yaml`.

The static workflow's shards (`--shard I/N`, tilelang_golden.catalog.shards) are balanced by it. Every shard job reads
the same committed file, so each computes the same split without talking to the others; in the snapshot folder, it
travels with the snapshots (the regen workflow's patch of that folder carries it) and is no orphan.

A case's cost is the seconds its check took to build it and produce its files where it missed the lowering cache
(`CheckResult.seconds` of a result whose `lowering` is `lowered`): lowering and compiling, what a push to main pays
for every case. It is recorded

- by every regen, for each case it lowered that has no record yet, dropping the records of cases no family has any
  more; the other records stay as they are, so a regen that changes nothing leaves the file alone on any machine;
- by `tilelang-golden costs --record PENDING`, from the results of a cold static run (REFRESH): every case it
  lowered, a record changing only where the new figure is off by more than TOLERANCE, so the noise of one run does
  not rewrite the file.

Figures keep two significant digits. A case without a record costs the median of its family's records, else of all
records, else DEFAULT_SECONDS. A file that cannot be read is named with what to do (`Costs.problem`) and counts as
empty: every case then costs DEFAULT_SECONDS, and the shards are balanced by their number of cases.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from tilelang_golden.catalog.shards import assign, loads
from tilelang_golden.files import atomic_write
from tilelang_golden.static.snapshots.results import PENDING_DIR, CheckResult, ResultsError, read_results

if TYPE_CHECKING:
    from tilelang_golden.catalog.loading import Registry

COSTS = "COSTS.yaml"
HEADER = (
    "# Seconds each case costs a static run that lowers it (a lowering-cache miss), on the machine that recorded it:\n"
    "# what the shards of `--shard I/N` are balanced by. Written by `nox -s regen-golden` (new cases) and\n"
    '# `tilelang-golden costs --record` (docs/ci.md, "The shard count").\n'
)
# A record is measured again only where a new figure is off by more than this share: one run's noise keeps it.
TOLERANCE = 0.3
# What a case costs where nothing is recorded at all: the shards are then balanced by their number of cases.
DEFAULT_SECONDS = 1.0
# How to measure every case again: one worker, since workers on the same cores slow each other's cases.
REFRESH = f"`tilelang-golden costs --record {PENDING_DIR.as_posix()}` after `nox -s static -- --no-cache -n 1`"


class CostsError(ValueError):
    """The costs file cannot be read; the message names it and what it holds."""


def read_costs(path: Path) -> dict[str, float]:
    """Case id -> seconds, as recorded in `path`; none where there is no file."""
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise CostsError(f"{path}: not valid YAML ({error})".replace("\n", " ")) from None
    table = data.get("seconds") if isinstance(data, dict) and set(data) == {"seconds"} else None
    if not isinstance(table, dict):
        raise CostsError(f"{path}: expected one mapping, `seconds:`, of case ids to seconds")
    wrong = [
        f"{case!r}: {value!r}"
        for case, value in table.items()
        if not (isinstance(case, str) and case.count("/") == 2) or type(value) not in (int, float) or not value > 0
    ]
    if wrong:
        shown = ", ".join(wrong[:3]) + (f" and {len(wrong) - 3} more" if len(wrong) > 3 else "")
        raise CostsError(f"{path}: expected case ids (family/variant/target) with positive seconds, got {shown}")
    return {case: float(value) for case, value in table.items()}


def render_costs(table: Mapping[str, float]) -> str:
    return HEADER + yaml.safe_dump({"seconds": dict(sorted(table.items()))}, default_flow_style=False)


def rounded(seconds: float) -> float:
    """Two significant digits, 0.01 s at the least."""
    return float(f"{max(seconds, 0.01):.2g}")


@dataclass(frozen=True)
class Costs:
    """A run's view of the costs file: its records, and why it could not be read (`problem`: it then counts as
    empty)."""

    path: Path
    seconds: Mapping[str, float]
    problem: str = ""
    _medians: dict[str, float] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_family: dict[str, list[float]] = {}
        for case, seconds in self.seconds.items():
            by_family.setdefault(case.split("/", 1)[0], []).append(seconds)
        self._medians.update({family: statistics.median(values) for family, values in by_family.items()})
        self._medians[""] = statistics.median(self.seconds.values()) if self.seconds else DEFAULT_SECONDS

    def of(self, case: str) -> float:
        """The case's recorded seconds, else its family's median, else every record's."""
        recorded = self.seconds.get(case)
        return recorded if recorded is not None else self._medians.get(case.split("/", 1)[0], self._medians[""])


def load_costs(golden: Path) -> Costs:
    """The costs of the snapshot folder `golden`; a file that cannot be read is said so, never raised."""
    path = golden / COSTS
    try:
        return Costs(path, read_costs(path))
    except CostsError as error:
        problem = (
            f"{error}; every case counts {DEFAULT_SECONDS:g} s, so the shards are balanced by their number of "
            f"cases. Rewrite it with {REFRESH}, or delete it and run `nox -s regen-golden`"
        )
        return Costs(path, {}, problem)


def group_costs(members: Iterable[tuple[str, str | None]], costs: Costs) -> dict[str, float]:
    """Group -> the seconds its cases cost, from (group, case id or None for a check that lowers nothing)."""
    table: dict[str, float] = {}
    for group, case in members:
        table[group] = table.get(group, 0.0) + (costs.of(case) if case is not None else 0.0)
    return table


def measured(results: Iterable[CheckResult]) -> dict[str, float]:
    """Case id -> seconds, for the cases a run lowered (not those it read from the lowering cache, nor those that did
    not lower)."""
    return {r.check: r.seconds for r in results if r.case and r.lowering == "lowered" and r.seconds > 0}


def updated(
    old: Mapping[str, float], new: Mapping[str, float], keep: Callable[[str], bool], refresh: bool
) -> dict[str, float]:
    """The records once `new` is measured: a case without a record gets one; with `refresh`, a record off by more than
    TOLERANCE is measured again; a case `keep` refuses (no family has it) is dropped."""
    table = {case: seconds for case, seconds in old.items() if keep(case)}
    for case, seconds in new.items():
        if keep(case) and (case not in table or (refresh and abs(seconds - table[case]) > TOLERANCE * table[case])):
            table[case] = rounded(seconds)
    return table


def known_cases(registry: Registry) -> Callable[[str], bool]:
    """Whether a case id is one a family of `registry` has; a family that failed to load keeps its records."""
    from tilelang_golden.catalog.cases import all_cases

    cases = {case.id for case in all_cases(registry)}
    broken = {family.name for family in registry.broken}
    return lambda case: case in cases or case.split("/", 1)[0] in broken


def record(path: Path, new: Mapping[str, float], keep: Callable[[str], bool], refresh: bool) -> str | None:
    """Write the records once `new` is measured (`updated`); a line saying what changed, None where nothing did. A file
    that cannot be read is rewritten from `new` alone, and the line says so."""
    try:
        old, note = read_costs(path), ""
    except CostsError as error:
        old, note = {}, f" ({error}: rewritten)"
    table = updated(old, new, keep, refresh)
    if table == old and not note:
        return None
    atomic_write(path, render_costs(table))
    added = sum(case not in old for case in table)
    changed = sum(case in old and table[case] != old[case] for case in table)
    dropped = sum(case not in table for case in old)
    return f"{path.as_posix()}: {len(table)} cases, {added} recorded, {changed} measured again, {dropped} dropped{note}"


def record_regen(registry: Registry, golden: Path, pending: Path) -> str | None:
    """The regen's records: each case it lowered and wrote that has none (a case it refused has no snapshot, so no
    record either), and none of a case no family has."""
    try:
        results = read_results(pending)
    except ResultsError:
        results = []
    return record(golden / COSTS, measured(r for r in results if r.written), known_cases(registry), refresh=False)


def plan_lines(registry: Registry, costs: Costs, configured: int) -> list[str]:
    """What the recorded costs predict: the library's total, and per shard count the largest and smallest shard."""
    from tilelang_golden.catalog.cases import all_cases

    cases = all_cases(registry)
    table = group_costs(((case.group, case.id) for case in cases), costs)
    unrecorded = sum(case.id not in costs.seconds for case in cases)
    lines = [
        f"{len(cases)} cases in {len(table)} groups, {sum(table.values()):.0f} s of lowering in all "
        f"({unrecorded} without a record: their family's median, else every record's)",
        "shards  largest s  smallest s  spread",
    ]
    for count in range(1, max(4, configured) + 1):
        shares = loads(table, assign(table, count))
        spread = f"{max(shares) / min(shares):.2f}" if min(shares) > 0 else "-"
        mark = "   <- shards in pyproject.toml" if count == configured else ""
        lines.append(f"{count:>6}  {max(shares):>9.0f}  {min(shares):>10.0f}  {spread:>6}{mark}")
    return lines


def main(argv: Sequence[str]) -> int:
    """`tilelang-golden costs [--record PENDING]`: record a cold run's costs, and show what they predict per shard."""
    from tilelang_golden.catalog.loading import load_families, on_targets
    from tilelang_golden.config import ConfigError, read_config

    parser = argparse.ArgumentParser(
        prog="tilelang-golden costs",
        description="The recorded cost of every case (<golden>/COSTS.yaml) and the shards it predicts.",
    )
    parser.add_argument(
        "--record",
        type=Path,
        metavar="PENDING",
        help=f"first record the cases a cold static run lowered, from its pending folder (e.g. {PENDING_DIR})",
    )
    args = parser.parse_args(argv)
    try:
        settings = read_config()
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    loaded = load_families(*settings.families, snapshot_folder=f"{settings.golden.as_posix()}/")
    registry = on_targets(loaded, settings.targets)
    if args.record is not None:
        try:
            new = measured(read_results(args.record))
        except ResultsError as error:
            print(error, file=sys.stderr)
            return 2
        if not new:
            print(f"{args.record}: no case was lowered in that run; run {REFRESH}", file=sys.stderr)
            return 2
        line = record(settings.golden / COSTS, new, known_cases(registry), refresh=True)
        print(line or f"{(settings.golden / COSTS).as_posix()}: unchanged (every figure within {TOLERANCE:.0%})")
    costs = load_costs(settings.golden)
    if costs.problem:
        print(costs.problem, file=sys.stderr)
    print("\n".join(plan_lines(registry, costs, settings.shards)))
    return 0
