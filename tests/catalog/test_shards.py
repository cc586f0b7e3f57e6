"""Shards balanced by cost: every group in exactly one shard, the same split in every job, within 15 % where the groups
allow it."""

from __future__ import annotations

import random

import pytest

from tilelang_golden.catalog.shards import assign, loads, parse_shard


def library(seed: int = 7, groups: int = 40) -> dict[str, float]:
    """A synthetic cost table shaped like this repository's: a few heavy groups (attention, large GEMMs on the
    pipelining targets), many light ones, spread over two orders of magnitude."""
    draw = random.Random(seed)
    return {f"family{index:02d}": round(draw.lognormvariate(1.5, 1.0), 2) for index in range(groups)}


@pytest.mark.parametrize("count", [2, 3, 4])
@pytest.mark.parametrize("seed", [7, 11, 13])
def test_the_shards_finish_within_15_percent_of_each_other(count, seed):
    costs = library(seed)
    shards = assign(costs, count)
    shares = loads(costs, shards)
    assert max(shares) / min(shares) <= 1.15, shares
    assert sorted(group for groups in shards for group in groups) == sorted(costs), "every group exactly once"


def test_round_robin_would_not_be_balanced():
    """What the assignment replaces: the groups dealt in turn, whatever they cost."""
    costs = library()
    names = list(costs)
    dealt = [names[index::2] for index in range(2)]
    shares = loads(costs, dealt)
    assert max(shares) / min(shares) > 1.15, shares


def test_the_split_is_the_same_in_every_job_whatever_the_order_of_the_groups():
    costs = library()
    order = list(costs.items())
    random.Random(1).shuffle(order)
    assert assign(dict(order), 3) == assign(costs, 3)
    # ties, broken by name and shard number
    equal = {"c": 1.0, "a": 1.0, "b": 1.0, "d": 1.0, "none": 0.0}
    assert assign(equal, 2) == [["a", "c", "none"], ["b", "d"]]


def test_a_group_larger_than_the_rest_gets_a_shard_of_its_own():
    """Groups stay whole: where one is larger than a fair share, the other shards share everything else."""
    costs = {"attention": 100.0, **{f"norm{index}": 5.0 for index in range(10)}}
    shards = assign(costs, 2)
    assert shards[0] == ["attention"] and loads(costs, shards) == [100.0, 50.0]


def test_more_shards_than_groups_leaves_shards_empty():
    """An empty shard is the session's to refuse (no golden case matches this selection)."""
    assert assign({"a": 2.0, "b": 1.0}, 3) == [["a"], ["b"], []]


NOT_A_SHARD = [("1/0", "need 1 <= I <= N"), ("3/2", "need 1 <= I <= N"), ("1", "expected I/N with integers"),
               ("a/2", "expected I/N")]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), NOT_A_SHARD)
def test_a_shard_is_i_of_n(text, message):
    assert parse_shard("2/4") == (2, 4)
    with pytest.raises(ValueError, match=message):
        parse_shard(text)
