"""Which of a run's items one shard runs (`--shard I/N`): whole xdist groups, dealt by what their cases cost.

Each group costs the recorded seconds of its cases (tilelang_golden.static.snapshots.costs; a check that lowers nothing
costs none), and catalog.shards deals the groups of the selected items over the N shards. Every shard job selects
the same items and reads the same costs file, so the shards together run every selected check exactly once, but the
checks over every case (UNSHARDED: the orphan check), which an unsharded run does.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tilelang_golden.catalog.cases import Case
from tilelang_golden.catalog.shards import assign
from tilelang_golden.static.snapshots.costs import Costs, group_costs

# The marker of a check that needs every case (the orphan check): sharded runs leave it out.
UNSHARDED = "unsharded"


def group_of(item: pytest.Item) -> str:
    """The item's xdist group, which `--dist loadgroup` keeps on one worker; "session" for a check of none."""
    marker = item.get_closest_marker("xdist_group")
    return marker.args[0] if marker else "session"


def _case_id(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("case") if callspec else None
    return case.id if isinstance(case, Case) else None


def shard_items(items: Sequence[pytest.Item], shard: tuple[int, int], costs: Costs) -> list[pytest.Item]:
    """The items of shard `shard` (I, N)."""
    table = group_costs(((group_of(item), _case_id(item)) for item in items), costs)
    index, count = shard
    mine = set(assign(table, count)[index - 1])
    return [item for item in items if group_of(item) in mine and not item.get_closest_marker(UNSHARDED)]
