"""The words a headline uses for changed fact fields: one table from fields to topics, in the order a reader wants
them (the machine facts first), and the headline built from it. Standard library only, as the verdict is."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

from tilelang_golden.static.snapshots.changes import FactChange


@dataclass(frozen=True)
class Topic:
    """A family of fact fields, as a headline names it."""

    pattern: str  # fnmatch pattern over the field's path joined by `.` (indices included)
    words: str
    values: bool = False  # the headline shows `before -> after` (short, telling values)
    value_contains: str = ""  # the topic applies only where the old or new value holds this text
    unit: str | None = None  # a one-number topic: the headline says `registers 168 -> 232`, with this unit after


# The one table from fact fields to words; the first match wins; a field matching none is named by its key. The
# machine facts (`.machine.yaml`) come first: they are what the GPU runs.
TOPICS = (
    Topic("registers", "registers", values=True, unit=""),
    Topic("occupancy.blocks_per_sm", "occupancy", values=True, unit=" blocks/SM"),
    Topic("spill_store_bytes", "spill stores", values=True, unit=" B"),
    Topic("spill_load_bytes", "spill loads", values=True, unit=" B"),
    Topic("sass.mma*", "tensor-core MMA (SASS)", values=True),
    Topic("sass.async_copies*", "async copies (SASS)", values=True),
    Topic("sass.tma*", "TMA (SASS)", values=True),
    Topic("sass.local_memory*", "local memory (SASS)", values=True),
    Topic("stack_frame_bytes", "stack frame", values=True, unit=" B"),
    Topic("static_shared_memory_bytes", "static shared memory", values=True, unit=" B"),
    Topic("occupancy*", "occupancy detail", values=True),
    Topic("sass*", "machine instructions (SASS)", values=True),
    Topic("barriers", "named barriers", values=True, unit=""),
    Topic("toolchain*", "toolchain", values=True),
    Topic("*num_stages*", "pipeline", values=True),
    Topic("shared_buffers.*.shape.0", "pipeline", values=True),  # a pipelined buffer's version dimension
    Topic("pipelines*", "pipeline"),
    Topic("*software_pipeline_*", "pipeline"),
    Topic("warp_specialized", "warp specialization", values=True),
    Topic("gemms.*.warps", "warp partition", values=True),
    Topic("gemms.*.warp_tile", "warp partition", values=True),
    Topic("gemms.*.policy", "warp partition", values=True),
    Topic("layouts.*", "warp partition", value_contains="fragment"),  # a fragment's layout is its warps' tiling
    Topic("gemms.*.tile", "GEMM tile", values=True),
    Topic("gemms*", "GEMM"),
    Topic("sync.cp_async*", "copies"),
    Topic("sync.tma_load*", "copies"),
    Topic("sync.lds_cop*", "copies"),
    Topic("mma*", "MMA"),
    Topic("dynamic_shared_memory_bytes", "shared memory", values=True),
    Topic("shared_memory*", "shared memory", values=True),
    Topic("shared_buffers*", "shared memory"),
    Topic("layouts.*", "shared memory", values=True),
    Topic("sync.syncthreads*", "synchronization"),
    Topic("sync.mbarrier*", "synchronization"),
    Topic("sync*", "synchronization"),
    Topic("rasterization*", "rasterization", values=True),
    Topic("conversions*", "conversions"),
    Topic("warp_shuffles*", "warp shuffles"),
    Topic("launch*", "launch (grid/threads)", values=True),
    Topic("warnings*", "compiler warnings"),
    Topic("params*", "parameters", values=True),
    Topic("loops*", "loops"),
    Topic("instructions*", "instructions"),
    Topic("vector_stores*", "vector stores"),
    Topic("shared_addressing*", "shared-memory addressing"),
)
# A headline names at most this many fields of one topic before it counts them.
NAMED_FIELDS = 2


def topic_of(change: FactChange) -> Topic:
    dotted = ".".join(str(part) for part in change.path)
    for topic in TOPICS:
        if fnmatch.fnmatchcase(dotted, topic.pattern) and (
            not topic.value_contains or topic.value_contains in change.before + change.after
        ):
            return topic
    return Topic(dotted, str(change.path[0]) if change.path else "<root>")


def _short_name(change: FactChange) -> str:
    kernel = f"{change.kernel}: " if change.kernel else ""
    return kernel + ".".join(str(part) for part in change.path)


def _topics(changes: Iterable[FactChange]) -> dict[str, list[FactChange]]:
    """Topic words -> its changes (one per field and values), in the table's order."""
    order = {topic.words: index for index, topic in enumerate(TOPICS)}
    by_topic: dict[str, list[FactChange]] = {}
    for change in dict.fromkeys(changes):
        by_topic.setdefault(topic_of(change).words, []).append(change)
    return dict(sorted(by_topic.items(), key=lambda item: order.get(item[0], len(order))))


def leading_topic(changes: Iterable[FactChange]) -> str:
    """The first topic, in the table's order, that the changes touch: what an entry is about."""
    return next(iter(_topics(changes)), "")


def facts_headline(changes: Iterable[FactChange]) -> str:
    """`pipeline (num_stages 3 -> 2, +4 fields), warp partition (layouts.Y_l) changed`: each topic once, in the
    table's order, with the values of the fields its table row shows values of, or else its fields' names, or
    their count."""
    parts = []
    for words, found in _topics(changes).items():
        unit = topic_of(found[0]).unit
        if unit is not None:  # one number per kernel
            shown = dict.fromkeys(f"{c.kernel + ': ' if c.kernel else ''}{c.before} -> {c.after}{unit}" for c in found)
            parts.append(f"{words} {', '.join(shown)}")
            continue
        valued = [c for c in found if topic_of(c).values]
        shown = list(dict.fromkeys(f"{c.path[-1] if c.path else ''} {c.before} -> {c.after}" for c in valued))
        names = list(dict.fromkeys(_short_name(c) for c in found if c not in valued))
        if not shown and len(names) <= NAMED_FIELDS:
            detail = ", ".join(names)
        else:
            rest = len(shown) - NAMED_FIELDS + len(names) if len(shown) > NAMED_FIELDS else len(names)
            detail = ", ".join(shown[:NAMED_FIELDS] or [f"{len(names)} fields"])
            detail += f", +{rest} fields" if rest and shown else ""
        parts.append(f"{words} ({detail})")
    return ", ".join(parts) + " changed"
