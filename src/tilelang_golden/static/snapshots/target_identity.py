"""Which targets emit byte-identical kernel source for the same variant, read from a folder of snapshots.

Every target keeps its own file (git stores identical contents once, and a reviewer sees one file
per target in a diff); this report says where two of them are the same, so a reviewer reads one
and knows the other, and sees the day an upgrade makes them part.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations

from tilelang_golden.static.snapshots.snapshot import SnapshotStore, strip_cuda_header
from tilelang_golden.targets import TARGETS

# How many variants a line names before it only counts the rest.
NAMED_DIFFERENCES = 4


@dataclass(frozen=True)
class TargetPair:
    """Two targets and the variants (`family/variant`) that both lowered, split by whether their source is equal."""

    first: str
    second: str
    identical: tuple[str, ...]
    different: tuple[str, ...]

    def line(self) -> str:
        """`a = b: n of m variants`, naming the smaller side: the variants that differ, or those that do not."""
        both = len(self.identical) + len(self.different)
        text = f"{self.first} = {self.second}: {len(self.identical)} of {both} variants"
        if not self.different:
            return text
        label, named = (
            ("differ", self.different) if len(self.different) <= len(self.identical) else ("same", self.identical)
        )
        more = len(named) - NAMED_DIFFERENCES
        return f"{text} ({label}: {', '.join(named[:NAMED_DIFFERENCES])}{f' and {more} more' if more > 0 else ''})"


def _sources(store: SnapshotStore) -> dict[str, dict[str, str]]:
    """`family/variant` -> target -> kernel source without its header, for every source file in the store."""
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for path in store.files():
        variant, _, file_name = path.rpartition("/")
        target = next((t for t, r in TARGETS.items() if file_name == f"{t}{r.source_suffix}"), None)
        text = store.read(path) if target is not None and variant.count("/") == 1 else None
        if text is not None:
            found[variant][target] = strip_cuda_header(text)
    return found


def identical_target_pairs(store: SnapshotStore) -> list[TargetPair]:
    """Every pair of targets (project order) with at least one variant whose source is byte-identical on both."""
    sources = _sources(store)
    pairs: list[TargetPair] = []
    for first, second in combinations(TARGETS, 2):
        both = sorted(v for v, by_target in sources.items() if first in by_target and second in by_target)
        identical = tuple(v for v in both if sources[v][first] == sources[v][second])
        if identical:
            pairs.append(TargetPair(first, second, identical, tuple(v for v in both if v not in identical)))
    return pairs


def identity_lines(store: SnapshotStore) -> list[str]:
    """The report's lines: one per pair of targets that share source somewhere; none when no pair does."""
    return [pair.line() for pair in identical_target_pairs(store)]
