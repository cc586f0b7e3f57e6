"""The unit of work: one variant lowered for one target, and how a run selects cases."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from kernels import TARGETS, Variant, all_variants


@dataclass(frozen=True)
class Case:
    """One snapshot: a variant lowered for a target."""

    variant: Variant
    target: str

    @property
    def id(self) -> str:
        """`family/variant/target`, also the snapshot's path under `golden/` (without suffix)."""
        return f"{self.variant.key}/{self.target}"


@functools.cache
def all_cases() -> tuple[Case, ...]:
    """Every registered variant for every target, in declaration order."""
    return tuple(Case(v, t) for v in all_variants() for t in TARGETS)


def parse_shard(text: str) -> tuple[int, int]:
    """`"2/4"` -> (2, 4); shards are numbered from 1."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected I/N with integers, e.g. --shard 1/4") from None
    if not 1 <= index <= count:
        raise ValueError(f"--shard {text!r}: need 1 <= I <= N")
    return index, count


def in_shard(position: int, shard: tuple[int, int]) -> bool:
    """Round-robin assignment: every position belongs to exactly one of the N shards."""
    index, count = shard
    return position % count == index - 1


def select_shard(items: Sequence, shard: tuple[int, int]) -> list:
    return [item for position, item in enumerate(items) if in_shard(position, shard)]
