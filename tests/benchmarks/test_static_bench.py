"""The shard rule benchmarks/static.py applies (docs/ci.md, "The shard count")."""

from __future__ import annotations

from benchmarks.static import shard_count


def test_the_shard_count_follows_the_docs_thresholds():
    # W / (c O) up to 2 -> 1 shard, up to 6 -> 2, up to 12 -> 3, up to 20 -> 4
    for ratio, shards in ((0.5, 1), (2, 1), (2.1, 2), (6, 2), (6.1, 3), (12, 3), (20, 4), (20.5, 5)):
        assert shard_count(ratio * 2 * 45, 2, 45) == shards, ratio
