"""Shards of a run: `--shard I/N`, and which groups of cases each of N shards runs, balanced by what they cost.

Groups stay whole (the cases of one group share their lowerings and compiles; docs/internals.md), so a shard is a set
of groups. The groups are dealt longest first, each to the shard with the least cost so far (longest processing time
first): within 4/3 of the best split whatever the costs, and within a few per cent when many groups are small beside
the largest. Every tie is broken by name and by shard number, so every shard job, given the same groups and costs,
computes the same split without talking to the others (tilelang_golden.static.snapshots.costs says where the costs
come from).
"""

from __future__ import annotations

from collections.abc import Mapping


def parse_shard(text: str) -> tuple[int, int]:
    """`"2/4"` -> (2, 4); shards are numbered from 1."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected I/N with integers, e.g. --shard 1/4") from None
    if not 1 <= index <= count:
        raise ValueError(f"--shard {text!r}: need 1 <= I <= N")
    return index, count


def assign(costs: Mapping[str, float], count: int) -> list[list[str]]:
    """The groups of each of `count` shards (index 0 is shard 1), every group in exactly one, from group -> its cost
    in seconds: the costliest group first (then by name), to the shard with the least cost so far (then the fewest
    groups, then the lowest number)."""
    shards: list[list[str]] = [[] for _ in range(count)]
    loads = [0.0] * count
    for group in sorted(costs, key=lambda name: (-costs[name], name)):
        chosen = min(range(count), key=lambda index: (loads[index], len(shards[index]), index))
        shards[chosen].append(group)
        loads[chosen] += costs[group]
    return shards


def loads(costs: Mapping[str, float], shards: list[list[str]]) -> list[float]:
    """Each shard's cost: the sum of its groups'."""
    return [sum(costs[group] for group in groups) for groups in shards]
