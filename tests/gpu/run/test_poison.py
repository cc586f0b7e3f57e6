"""Unwritten output fails the numeric gate: the memory a kernel's returned outputs land in is poisoned first.

On the CPU with a stand-in for PyTorch's caching allocator (`gpu_fakes.FakeCache`): a right kernel
passes, one that leaves a row unwritten fails with its NaN elements, and one whose output is not in
the poisoned memory fails as unproven. On a CUDA GPU with a real eager TileLang kernel (`T.const`
dimensions, a `T.empty` output), through the check's own compilation and the real allocator.
"""

import gpu_fakes as fake
import pytest
import tilelang
import tilelang.language as T
import torch

from tilelang_golden.catalog.cases import Case
from tilelang_golden.family import Family, Tolerance, Variant, Work
from tilelang_golden.gpu.measure.numerics import check_numerics
from tilelang_golden.gpu.run.compile import Argument
from tilelang_golden.gpu.run.device import find_nvcc, require_cuda
from tilelang_golden.gpu.run.poison import poison, unpoisoned

SHAPE = {"M": 64, "N": 48, "K": 32}
SEEDS = [1, 2, 3]
GEMM = fake.gemm_family("small_gemm", [fake.variant("v")], shape=SHAPE)
CACHE = fake.FakeCache()


def right(a, b, c):
    c.copy_((a.float() @ b.float()).half())


def last_row_unwritten(a, b, c):
    c[:-1].copy_((a.float() @ b.float()).half()[:-1])


def fresh(a, b):
    return (a.float() @ b.float()).half()  # the right values, in memory the check never filled


def check(write=None, run=None):
    case = fake.numerics_case(GEMM, write, run=run, cache=CACHE)
    return check_numerics([case], SEEDS, device="cpu", memory=CACHE)[case.key]


def test_a_right_kernel_in_the_poisoned_memory_passes():
    result = check(right)
    assert result.passed and all(s.error is None and len(s.outputs) == 1 for s in result.seeds)


def test_an_unwritten_row_stays_poisoned_and_fails_with_its_nan_elements():
    result = check(last_row_unwritten)
    assert not result.passed and all(s.error is None and s.nonfinite == SHAPE["N"] for s in result.seeds)
    assert result.failures()[0].startswith(f"seed 1: {SHAPE['N']} NaN/Inf elements (unwritten output stays NaN)")


def test_an_output_outside_the_poisoned_memory_fails_even_when_it_is_right():
    result = check(run=fresh)
    assert not result.passed and all(s.outputs == [] for s in result.seeds), "an unproven output is not compared"
    assert result.failures()[0].startswith("seed 1: output C could not be poisoned: ")


def test_the_memory_is_poisoned_afresh_for_every_seed():
    """A kernel returning one buffer of its own on every call: only the first call's is poisoned."""
    kept = []

    def keeps_its_buffer(a, b):
        if not kept:
            kept.append(CACHE.take((SHAPE["M"], SHAPE["N"]), torch.float16))
        right(a, b, kept[0])
        return kept[0]

    result = check(run=keeps_its_buffer)
    assert [s.passed for s in result.seeds] == [True, False, False]
    assert "could not be poisoned" in result.failures()[0]


def test_the_outputs_memory_is_poisoned_from_the_signature_on_an_emptied_cache():
    cache = fake.FakeCache()
    stale = cache.empty((2, 3), torch.float32)
    outputs = [Argument((2, 3), "float32"), Argument((5,), "int32"), Argument((2,), "bool")]
    ranges = poison(outputs, cache)
    floats, integers, flags = cache.cached
    assert all(block is not stale for block in cache.cached), "emptied first: nothing older is handed out"
    assert floats.shape == (2, 3) and floats.dtype == torch.float32 and bool(floats.isnan().all())
    assert integers.dtype == torch.int32 and bool((integers == torch.iinfo(torch.int32).min).all())
    assert flags.dtype == torch.bool and not bool(flags.any())
    assert ranges == [(t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in cache.cached]


def test_only_memory_inside_a_poisoned_range_counts_as_poisoned():
    block = torch.empty(100)
    ranges = [(block.data_ptr(), block.data_ptr() + 4 * 50)]  # its first half
    inside = [block[:50], block[10:20], block[:50].view(5, 10)[:, ::2], block[60:60]]
    assert unpoisoned(inside, ranges) == []
    assert unpoisoned([block[40:60], block, block[:51], torch.empty(10)], ranges) == [0, 1, 2, 3]
    assert unpoisoned([block.view(10, 10)[:, :5]], ranges) == [0], "its rows reach into the second half"


# -- a real eager kernel on a CUDA GPU -----------------------------------------------------------------

ROWS, COLS = 16, 128


@tilelang.jit
def doubled(X, rows_skipped: int = 0):
    """Y = 2 X, one block a row; the last `rows_skipped` rows are never written."""
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float32)
    Y = T.empty((rows, cols), T.float32)
    with T.Kernel(rows - rows_skipped, threads=cols) as bx:
        for j in T.Parallel(cols):
            Y[bx, j] = X[bx, j] * 2
    return Y


DOUBLED = Family(
    name="poison_probe",
    shape={"rows": ROWS, "cols": COLS},
    variants=[Variant("every_row", doubled), Variant("last_row_unwritten", doubled, {"rows_skipped": 1})],
    inputs=lambda p, generator, device: [
        torch.randn(p["rows"], p["cols"], generator=generator, device=device, dtype=torch.float32)
    ],
    reference=lambda p, x: 2 * x,
    tolerance=Tolerance(atol=0, rtol=0),  # doubling is exact
    speed_reference=lambda p, x: 2 * x,
    speed_reference_label="2 * x",
    work=lambda p: Work(flops=p["rows"] * p["cols"], bytes=8 * p["rows"] * p["cols"]),
    file="tests/gpu/run/test_poison.py",
)


@pytest.mark.skipif(
    not torch.cuda.is_available() or find_nvcc() is None, reason="needs a CUDA GPU and nvcc to compile for it"
)
def test_a_real_eager_kernel_is_called_as_users_call_it_and_its_unwritten_row_fails(monkeypatch):
    from tilelang_golden.gpu.pairs import numerics_case
    from tilelang_golden.gpu.run.compile import compile_cases

    monkeypatch.setattr(tilelang, "disable_cache", lambda: None)  # keep this process's cache setting
    target = require_cuda().target  # each case is compiled for its target: this device's
    compiled = compile_cases([Case(DOUBLED, v, target) for v in DOUBLED.variants])
    assert [c.error for c in compiled] == [None, None]
    assert all(tuple(c.outputs) == (1,) for c in compiled), "its T.empty result, returned"
    results = check_numerics([numerics_case(c) for c in compiled], SEEDS)
    right, unwritten = (results[f"poison_probe/{v.name}"] for v in DOUBLED.variants)
    # No seed errs: each returned output was proven to lie in the memory poisoned before the call.
    assert right.passed and all(s.error is None for s in right.seeds + unwritten.seeds), right.failures()
    assert not unwritten.passed and all(s.nonfinite == COLS and s.mismatches == COLS for s in unwritten.seeds)
