"""Shared memory read before anything writes it (static/produce/uninitialized.py): small kernels lowered on the CPU,
a certain finding failing its case until acknowledged, a possible one recorded only, correct kernels left alone."""

from __future__ import annotations

import dataclasses
import functools

import kernel_styles as styles
import pytest
import tilelang.language as T
from conftest import num_stages_case

import tilelang_golden.catalog.loading
from tilelang_golden.catalog.cases import Case
from tilelang_golden.catalog.loading import Registry
from tilelang_golden.static.produce.facts import extract_facts
from tilelang_golden.static.produce.produced import unacknowledged_warnings
from tilelang_golden.static.snapshots.snapshot import load_yaml

CERTAIN = "certainly read before any write"


def copied_out_before_written(rows: int, cols: int, block_rows: int = 8) -> T.PrimFunc:
    """Y = X, but the shared tile is copied out before X is copied in: Y gets whatever the tile held."""

    @T.prim_func
    def copy(X: T.Tensor((rows, cols), "float16"), Y: T.Tensor((rows, cols), "float16")):
        with T.Kernel(rows // block_rows, threads=128) as bx:
            tile = T.alloc_shared((block_rows, cols), "float16")
            T.copy(tile, Y[bx * block_rows, 0])
            T.copy(X[bx * block_rows, 0], tile)

    return copy


def copied_in_then_out(rows: int, cols: int, block_rows: int = 8) -> T.PrimFunc:
    """Y = X through a shared tile: global to shared, then shared to global."""

    @T.prim_func
    def copy(X: T.Tensor((rows, cols), "float16"), Y: T.Tensor((rows, cols), "float16")):
        with T.Kernel(rows // block_rows, threads=128) as bx:
            tile = T.alloc_shared((block_rows, cols), "float16")
            T.copy(X[bx * block_rows, 0], tile)
            T.copy(tile, Y[bx * block_rows, 0])

    return copy


def written_if(rows: int, cols: int, block_rows: int = 8) -> T.PrimFunc:
    """The shared tile is filled only for blocks past the first; every block copies it out."""

    @T.prim_func
    def copy(X: T.Tensor((rows, cols), "float16"), Y: T.Tensor((rows, cols), "float16")):
        with T.Kernel(rows // block_rows, threads=128) as bx:
            tile = T.alloc_shared((block_rows, cols), "float16")
            if bx > 0:
                T.copy(X[bx * block_rows, 0], tile)
            T.copy(tile, Y[bx * block_rows, 0])

    return copy


def read_late_in_loop(rows: int, cols: int, block_rows: int = 8) -> T.PrimFunc:
    """Each iteration but the first copies out the tile the iteration before it copied in (right as written)."""

    @T.prim_func
    def shift(X: T.Tensor((rows, cols), "float16"), Y: T.Tensor((rows, cols), "float16")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((block_rows, cols), "float16")
            for k in T.serial(rows // block_rows):
                if k > 0:
                    T.copy(tile, Y[(k - 1) * block_rows, 0])
                T.copy(X[k * block_rows, 0], tile)

    return shift


def row_sum_through_shared(rows: int, cols: int, block_rows: int = 8) -> T.PrimFunc:
    """Row sums of a tile staged in shared memory, reduced by T.reduce_sum (which lowers with a workspace)."""

    @T.prim_func
    def row_sum(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((rows,), "float32")):
        with T.Kernel(rows // block_rows, threads=128) as bx:
            tile = T.alloc_shared((block_rows, cols), "float32")
            values = T.alloc_fragment((block_rows, cols), "float32")
            sums = T.alloc_fragment((block_rows,), "float32")
            T.copy(X[bx * block_rows, 0], tile)
            T.copy(tile, values)
            T.reduce_sum(values, sums, dim=1)
            T.copy(sums, Y[bx * block_rows])

    return row_sum


def tree_sum(rows: int, cols: int, block_rows: int = 1) -> T.PrimFunc:
    """Row sums by a tree in shared memory: each step, the lower half of the threads adds the upper half in."""

    @T.prim_func
    def row_sum(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((rows,), "float32")):
        with T.Kernel(rows // block_rows, threads=128) as bx:
            tx = T.get_thread_binding(0)
            partial = T.alloc_shared((128,), "float32")
            partial[tx] = T.float32(0)
            for j in T.serial(cols // 128):
                partial[tx] = partial[tx] + X[bx * block_rows, j * 128 + tx]
            for step in T.serial(7):
                if tx < (64 >> step):
                    partial[tx] = partial[tx] + partial[tx + (64 >> step)]
            if tx == 0:
                Y[bx * block_rows] = partial[0]

    return row_sum


def producer_consumer(rows: int, cols: int, block_rows: int = 8) -> T.PrimFunc:
    """Half the threads copy a row into shared memory, the other half copy it out: one condition, two sides."""

    @T.prim_func
    def copy(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((rows, cols), "float32")):
        with T.Kernel(rows // block_rows, threads=256) as bx:
            tx = T.get_thread_binding(0)
            row = T.alloc_shared((block_rows, 128), "float32")
            for i, j in T.grid(block_rows, cols // 128):
                if tx >= 128:
                    Y[bx * block_rows + i, j * 128 + tx - 128] = row[i, tx - 128]
                else:
                    row[i, tx] = X[bx * block_rows + i, j * 128 + tx]

    return copy


def scheduled_copies_first(rows: int, cols: int, block_rows: int = 32) -> T.PrimFunc:
    """A GEMM written consumer first, whose explicit schedule runs the copies a stage ahead: the first iteration copies
    both tiles, then multiplies them."""
    size = min(rows, cols)

    @T.prim_func
    def gemm(A: T.Tensor((size, size), "float16"), C: T.Tensor((size, size), "float16")):
        with T.Kernel(size // 128, size // 128, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, block_rows), "float16")
            B_s = T.alloc_shared((block_rows, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.clear(C_l)
            for k in T.Pipelined(size // block_rows, stage=[1, 0, 0], order=[0, 1, 2]):
                T.gemm(A_s, B_s, C_l)
                T.copy(A[by * 128, k * block_rows], A_s)
                T.copy(A[k * block_rows, bx * 128], B_s)
            T.copy(C_l, C[by * 128, bx * 128])

    return gemm


def consumer_before_producer(rows: int, cols: int, block_rows: int = 64) -> T.PrimFunc:
    """Upstream's manual warp specialization with the consumer written first: the GEMM warps wait on an mbarrier
    that the copy warps, written after them, arrive on."""
    size = min(rows, cols)

    @T.prim_func
    def gemm(A: T.Tensor((size, size), "float16"), C: T.Tensor((size, size), "float16")):
        with T.Kernel(size // 128, size // 128, threads=256) as (bx, by):
            A_s = T.alloc_shared((128, block_rows), "float16")
            B_s = T.alloc_shared((block_rows, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            with T.ws(0):
                T.clear(C_l)
            for k in T.Pipelined(size // block_rows, num_stages=2):
                with T.ws(0):
                    T.barrier_wait(ready, k % 2)
                    T.gemm(A_s, B_s, C_l)
                    T.barrier_arrive(done)
                with T.ws(1):
                    T.barrier_wait(done, (k + 1) % 2)
                    T.tma_copy(A[by * 128, k * block_rows], A_s, barrier=ready)
                    T.tma_copy(A[k * block_rows, bx * 128], B_s, barrier=ready)
                    T.barrier_arrive(ready)
            with T.ws(0):
                T.copy(C_l, C[by * 128, bx * 128])

    return gemm


@functools.cache
def case(kernel, target: str = "sm_80", block_rows: int = 8) -> Case:
    """`kernel` as a family of its own, one variant for `target` (one Case per arguments: lowered once a run)."""
    family = styles.family(kernel, {"block_rows": block_rows}, name=kernel.__name__, outputs=[1], targets=[target])
    return Case(family, family.variants[0], target)


def acknowledged(plain: Case, **acknowledgments: str) -> Case:
    variant = dataclasses.replace(plain.variant, acknowledged_warnings=acknowledgments)
    family = dataclasses.replace(plain.family, variants=[variant])
    return Case(family, variant, plain.target)


def warnings(lowerings, of: Case) -> list[str]:
    """The case's warnings of shared memory read before any write (TileLang's own are left out)."""
    return [w for w in extract_facts(lowerings.lower(of))["warnings"] if "read before any write" in w]


@pytest.mark.parametrize("target", ["sm_80", "sm_90", "gfx942"])
def test_a_shared_tile_copied_out_before_it_is_written_is_certain(target, lowerings):
    assert warnings(lowerings, case(copied_out_before_written, target)) == [
        f"shared buffer tile in copy_kernel: {CERTAIN} (the read by T.copy(tile, Y) precedes every write)"
    ]  # no path, no line, no address: the same text on every machine


def test_a_loop_that_reads_its_state_before_writing_it_reads_stale_memory_on_its_first_iteration(lowerings):
    assert warnings(lowerings, case(styles.state_written_late)) == [
        f"shared buffer state in scan_kernel: {CERTAIN} (on the first iteration of loop k, the read by "
        "T.copy(state, Y) precedes every write)"
    ]


def test_a_certain_finding_fails_its_case_naming_the_fix(lowerings):
    found = case(copied_out_before_written)
    refusal = unacknowledged_warnings(found, extract_facts(lowerings.lower(found)))
    assert refusal == (
        "copied_out_before_written/only/sm_80: what its lowering warned about fails its check:\n"
        f"shared buffer tile in copy_kernel: {CERTAIN} (the read by T.copy(tile, Y) precedes every write)\n"
        "Fix the kernel in kernels/copied_out_before_written.py; if it is right as written, say why on variant "
        f"'only': Variant(acknowledged_warnings={{'{CERTAIN}': \"<why>\"}})"
    )


def test_an_acknowledged_certain_finding_passes(lowerings):
    found = case(copied_out_before_written)
    facts = extract_facts(lowerings.lower(found))
    assert unacknowledged_warnings(acknowledged(found, **{CERTAIN: "Y is overwritten later"}), facts) is None
    by_buffer = acknowledged(found, **{"shared buffer tile in copy_kernel": "Y is overwritten later"})
    assert unacknowledged_warnings(by_buffer, facts) is None
    other = acknowledged(found, **{"read before initialization": "TileLang's own warning, not this one"})
    assert unacknowledged_warnings(other, facts) is not None


def test_a_write_under_a_condition_only_makes_a_possible_finding_that_does_not_fail(lowerings):
    found = case(written_if)
    facts = extract_facts(lowerings.lower(found))
    assert facts["warnings"] == [
        "shared buffer tile in copy_kernel: possibly read before any write (only a write under a condition, "
        "T.copy(X, tile), precedes the read by T.copy(tile, Y))"
    ]
    assert unacknowledged_warnings(found, facts) is None


def test_a_read_under_a_condition_in_a_loop_that_writes_later_is_possible(lowerings):
    assert warnings(lowerings, case(read_late_in_loop)) == [
        "shared buffer tile in shift_kernel: possibly read before any write (the read by T.copy(tile, Y) is under a "
        "condition in loop k, which writes it: an earlier iteration may have)"
    ]


def test_split_barriers_make_a_read_before_a_later_write_possible(lowerings):
    """Other threads may run the later write first: the mbarriers order them, and the analysis does not follow
    them."""
    found = warnings(lowerings, case(consumer_before_producer, "sm_90", block_rows=64))
    assert found == [
        f"shared buffer {name} in gemm_kernel: possibly read before any write (the read by T.gemm(A_s, B_s, C_l) "
        "precedes every write in program order, but split barriers may run other threads' write first)"
        for name in ("A_s", "B_s")
    ]


@pytest.mark.parametrize("target", ["sm_80", "sm_90", "gfx942"])
@pytest.mark.parametrize(
    "kernel",
    [copied_in_then_out, row_sum_through_shared, tree_sum, producer_consumer],
    ids=lambda kernel: kernel.__name__,
)
def test_correct_kernels_have_no_finding(kernel, target, lowerings):
    """Global to shared to global, a reduction, writes by some threads for all, the two sides of a condition on
    threads."""
    assert warnings(lowerings, case(kernel, target, block_rows=1 if kernel is tree_sum else 8)) == []


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_a_pipeline_schedule_that_runs_the_copies_first_is_walked_in_that_order(target, lowerings):
    assert warnings(lowerings, case(scheduled_copies_first, target, block_rows=32)) == []


@pytest.mark.parametrize(("target", "copies"), [("sm_80", "cp_async_copies"), ("sm_90", "tma_loads")])
def test_a_pipelined_gemm_filling_shared_memory_asynchronously_has_no_finding(target, copies, lowerings):
    """Three stages of cp.async on sm_80, of TMA under warp specialization on sm_90: the IR read is the one before
    either exists, where each T.copy writes its tile before T.gemm reads it."""
    facts = extract_facts(lowerings.lower(num_stages_case(3, target)))
    (kernel,) = facts["kernels"]
    assert kernel["sync"][copies] > 0
    assert facts["warnings"] == []


def test_the_static_check_fails_a_certain_finding_until_acknowledged_and_records_a_possible_one(
    golden_session, monkeypatch
):
    certain, possible = case(copied_out_before_written), case(written_if)

    def registry(*cases: Case) -> None:
        families = Registry(tuple(c.family for c in cases), ())
        monkeypatch.setattr(tilelang_golden.catalog.loading, "load_families", lambda *packages, **options: families)

    registry(certain, possible)
    selected = f"{certain.id} or {possible.id}"
    result = golden_session("--regen", "-k", selected)
    result.assert_outcomes(failed=1, passed=1)  # the certain one is refused, none of its files written
    result.stdout.fnmatch_lines(["*copied_out_before_written/only/sm_80: what its lowering warned about fails*"])
    assert not (golden_session.golden / certain.family.name).exists()
    (written,) = load_yaml((golden_session.golden / f"{possible.id}.yaml").read_text())["warnings"]
    assert written.startswith("shared buffer tile in copy_kernel: possibly read before any write")
    registry(acknowledged(certain, **{CERTAIN: "Y is overwritten by the next kernel"}), possible)
    golden_session("--regen", "-k", certain.id).assert_outcomes(passed=1)
    golden_session("-k", selected).assert_outcomes(passed=2)
