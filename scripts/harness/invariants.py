"""Claims of the seed documents, checked on freshly extracted facts, independent of golden/.

Seed 01 (`num_stages`): five correctness criteria over one tile shape and target, evaluated
across the N values given. Seed 03 (four schedules): each variant differs from the baseline only
in its annotation lines, all four share one dataflow, and which of them change the CUDA at all.
"""

from __future__ import annotations

import difflib
import inspect
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import tilelang  # noqa: F401  (imported first: it puts its bundled TVM on sys.path)
from tvm import DataType, arith, tirx
from tvm.tirx.stmt_functor import pre_order_visit


@dataclass(frozen=True)
class Criterion:
    """One checked claim: its name, whether it holds, and the observed values behind the verdict."""

    name: str
    passed: bool
    observed: str


# -- seed 01 ----------------------------------------------------------------------------------

NUM_STAGES_CRITERIA = (
    "1. N >= 2: last stage is N - 1, both copies in stage 0",
    "2. N = 1: stages are still [0, 0, 1]",
    "3. N = 0: no pipeline annotation",
    "4. shared buffers' version dimension grows with N",
    "5a. cp_async_wait in-flight count grows with N",
    "5b. steady-state loop's __syncthreads() count does not grow with N",
)


def _stages(facts: Mapping[str, Any]) -> list[int] | None:
    pipelines = facts["pipelines"]
    return pipelines[0]["software_pipeline_stage"] if pipelines else None


def version_dimension(shape: list[int]) -> int | None:
    """The leading dimension software pipelining added to a 2-D tile buffer (its versions), or None."""
    return shape[0] if len(shape) == 3 else None


def _version_dim(facts: Mapping[str, Any]) -> int:
    """Versions of the A tile buffer; 1 when it has no version dimension."""
    return version_dimension(facts["shared_buffers"]["A_s"]["shape"]) or 1


def _in_flight(facts: Mapping[str, Any]) -> int | None:
    waits = facts["sync"]["cp_async_wait"]
    return max(waits) if waits else None


def _strictly_increasing(values: list[Any]) -> bool:
    return all(a is not None and b is not None and a < b for a, b in itertools.pairwise(values))


def num_stages_criteria(facts_by_n: Mapping[int, Mapping[str, Any]]) -> list[Criterion]:
    """Seed 01's criteria over the N values present (a criterion about absent N is skipped)."""
    ns = sorted(facts_by_n)
    results: list[Criterion] = []

    def shown(value_of: Callable[[Mapping[str, Any]], Any], among: list[int]) -> str:
        return ", ".join(f"N={n}: {value_of(facts_by_n[n])}" for n in among)

    deep = [n for n in ns if n >= 2]
    if deep:
        ok = all((s := _stages(facts_by_n[n])) is not None and s[-1] == n - 1 and s[:2] == [0, 0] for n in deep)
        results.append(Criterion(NUM_STAGES_CRITERIA[0], ok, shown(_stages, deep)))
    if 1 in facts_by_n:
        results.append(Criterion(NUM_STAGES_CRITERIA[1], _stages(facts_by_n[1]) == [0, 0, 1], shown(_stages, [1])))
    if 0 in facts_by_n:
        results.append(Criterion(NUM_STAGES_CRITERIA[2], facts_by_n[0]["pipelines"] == [], shown(_stages, [0])))
    positive = [n for n in ns if n >= 1]
    if len(positive) >= 2:
        versions = [_version_dim(facts_by_n[n]) for n in positive]
        results.append(Criterion(NUM_STAGES_CRITERIA[3], _strictly_increasing(versions), shown(_version_dim, positive)))
        in_flight = [_in_flight(facts_by_n[n]) for n in positive]
        results.append(Criterion(NUM_STAGES_CRITERIA[4], _strictly_increasing(in_flight), shown(_in_flight, positive)))
    if len(ns) >= 2:
        loop_syncs = [facts_by_n[n]["sync"]["syncthreads_main_loop"] for n in ns]
        steady = all(count <= loop_syncs[0] for count in loop_syncs)
        results.append(
            Criterion(NUM_STAGES_CRITERIA[5], steady, shown(lambda f: f["sync"]["syncthreads_main_loop"], ns))
        )
    return results


# -- seed 03 ----------------------------------------------------------------------------------


def _source_changes(baseline: Callable[..., Any], variant: Callable[..., Any]) -> list[tuple[list[str], list[str]]]:
    """(baseline lines, variant lines) of each differing block of source, the `def` line excluded."""
    old = inspect.getsource(baseline).splitlines()[1:]
    new = inspect.getsource(variant).splitlines()[1:]
    opcodes = difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
    return [(old[i1:i2], new[j1:j2]) for tag, i1, i2, j1, j2 in opcodes if tag != "equal"]


def source_lines_changed(baseline: Callable[..., Any], variant: Callable[..., Any]) -> int:
    """Lines of `variant`'s source that differ from `baseline`'s, the `def` line excluded."""
    return sum(max(len(old), len(new)) for old, new in _source_changes(baseline, variant))


def changed_source(baseline: Callable[..., Any], variant: Callable[..., Any]) -> list[str]:
    """The differing lines as `variant` has them (`- line` for a line it only removed), stripped."""
    lines: list[str] = []
    for old, new in _source_changes(baseline, variant):
        lines += [line.strip() for line in new] if new else [f"- {line.strip()}" for line in old]
    return lines


def dataflow(prim_func: Any) -> list[tuple[str, ...]]:
    """The order of tile operations, loops and stores with the buffers they touch.

    Schedule annotations (loop annotations, layout maps, GEMM warp policy, any non-buffer
    argument) are left out, so two kernels with one dataflow give the same list.
    """
    steps: list[tuple[str, ...]] = []

    def buffers_in(node: Any) -> tuple[str, ...]:
        names: list[str] = []

        def visit(n: Any) -> bool:
            if isinstance(n, (tirx.BufferLoad, tirx.BufferStore)):
                names.append(str(n.buffer.name))
            return True

        pre_order_visit(node, visit)
        return tuple(names)

    def visit(node: Any) -> bool:
        if isinstance(node, tirx.For):
            steps.append(("loop", str(node.extent)))
        elif isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call):
            steps.append((str(getattr(node.value.op, "name", node.value.op)), *buffers_in(node.value)))
            return False
        elif isinstance(node, tirx.BufferStore):
            steps.append(("store", *buffers_in(node)))
            return False
        return True

    pre_order_visit(prim_func.body, visit)
    return steps


def changed_cuda_lines(baseline: str, variant: str) -> int:
    """Lines removed plus lines added going from the baseline's CUDA to the variant's."""
    diff = difflib.unified_diff(baseline.splitlines(), variant.splitlines(), lineterm="", n=0)
    return sum(1 for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))


# The swizzle criterion seed 03 quotes from TileLang's examples (their own `make_swizzle_layout`
# helper, not the library's `make_swizzled_layout`): a tile swizzles only when its last
# dimension holds 64 bytes, otherwise the helper falls back to the identity layout.
SWIZZLE_CRITERION_BITS = 512


@dataclass(frozen=True)
class ExplicitLayout:
    """A shared buffer given a layout by `T.annotate_layout`, and what that layout does to it."""

    buffer: str
    shape: list[int]
    dtype: str
    last_dim_bytes: int
    meets_swizzle_criterion: bool  # shape[-1] * dtype bits == SWIZZLE_CRITERION_BITS
    elements_moved: int  # elements the layout stores away from their row-major offset
    elements: int


def explicit_layouts(prim_func: Any) -> list[ExplicitLayout]:
    """Every buffer a kernel annotates with a layout, the layout evaluated on its whole index space."""
    blocks: list[Any] = []

    def visit(node: Any) -> bool:
        if isinstance(node, tirx.SBlock):
            blocks.append(node)
        return True

    pre_order_visit(prim_func.body, visit)
    buffers = [b for block in blocks for b in block.alloc_buffers]
    analyzer = arith.Analyzer()
    found = []
    for block in blocks:
        for var, layout in (block.annotations.get("layout_map") or {}).items():
            buffer = next(b for b in buffers if b.data.same_as(var))
            shape = [int(d) for d in buffer.shape]
            out_shape = [int(d) for d in layout.get_output_shape()]
            moved = 0
            for index in itertools.product(*(range(d) for d in shape)):
                mapped = layout.map_forward_index([tirx.IntImm("int32", i) for i in index])
                offset = 0
                for value, extent in zip((int(analyzer.simplify(e)) for e in mapped), out_shape, strict=True):
                    offset = offset * extent + value
                moved += offset != _row_major(index, shape)
            bits = DataType(str(buffer.dtype)).bits
            found.append(
                ExplicitLayout(
                    buffer=str(buffer.name),
                    shape=shape,
                    dtype=str(buffer.dtype),
                    last_dim_bytes=shape[-1] * bits // 8,
                    meets_swizzle_criterion=shape[-1] * bits == SWIZZLE_CRITERION_BITS,
                    elements_moved=moved,
                    elements=math.prod(shape),
                )
            )
    return found


def _row_major(index: tuple[int, ...], shape: list[int]) -> int:
    offset = 0
    for i, extent in zip(index, shape, strict=True):
        offset = offset * extent + i
    return offset
