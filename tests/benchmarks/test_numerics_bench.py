"""benchmarks/numerics.py on the CPU: it stops without a GPU, and its mutants change what they say they change
(the GPU run itself is the lead's measurement, docs/gpu.md)."""

from __future__ import annotations

import gpu_fakes as fake
import pytest
import torch
from script_runner import run_script

from benchmarks import numerics as bench
from tilelang_golden.catalog.loading import load_families
from tilelang_golden.gpu.measure.numerics import NumericsCase, check_numerics, make_inputs
from tilelang_golden.gpu.run import device
from tilelang_golden.gpu.run.compile import Argument

SHAPE = {"M": 128, "N": 48, "K": 32}
SEEDS = [1, 2, 3]
GEMM = fake.gemm_family("small_gemm", [fake.variant("v")], shape=SHAPE)
CACHE = fake.FakeCache()


def right(a, b, c):
    c.copy_((a.float() @ b.float()).half())


def check(change):
    case = change(fake.numerics_case(GEMM, right, cache=CACHE))
    (result,) = check_numerics([case], SEEDS, device="cpu", memory=CACHE).values()
    return result


def test_without_a_gpu_it_stops_with_status_2_saying_why(monkeypatch):
    def no_device():
        raise device.NoCudaDevice("no CUDA device is visible")

    monkeypatch.setattr(device, "require_cuda", no_device)
    status, out, err = run_script(bench.main)
    assert status == 2 and out == ""
    assert err == "benchmarks.numerics: no CUDA device is visible\n"


def test_fewer_than_three_seeds_are_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stopped:
        bench.main(["--seeds", "1", "1", "2"])
    assert stopped.value.code == 2 and "at least 3 distinct seeds" in capsys.readouterr().err


def test_the_output_mutants_pass_todays_gate_or_not_but_stay_in_the_poisoned_memory():
    for mutant in bench.MUTANTS:
        result = check(mutant.change)
        assert all(s.error is None for s in result.seeds), "an in-place change keeps the output where it was"
        assert not result.passed, mutant.name
    scaled = check(bench.MUTANTS[0].change)
    assert all(s.within_tolerance for s in scaled.seeds) and all(
        "scale" in o.exceeded for s in scaled.seeds for o in s.outputs
    )


def test_an_input_mutant_changes_what_the_kernel_sees_and_not_what_it_is_compared_with():
    assert check(bench.on_input(0, 1.0)).passed, "unchanged input: the reference still matches"
    alpha = check(bench.on_input(0, 1.005))
    assert all(s.within_tolerance and not s.passed for s in alpha.seeds)
    assert all(o.errors.scale == pytest.approx(0.005, abs=3e-4) for s in alpha.seeds for o in s.outputs)


def test_rows_flatten_all_but_the_last_dimension():
    assert bench.rows(torch.zeros(2, 3, 5, 7)).shape == (30, 7)
    assert bench.rows(torch.zeros(9)).shape == (9, 1)


# Each registered family at a CPU-sized problem, its inputs' names, and the input its intermediate mutant scales: the
# first that moves its output (a norm's X does not: its output does not scale with X).
GEMM_DIMENSIONS = {"M": 64, "N": 48, "K": 32}
SMALL = {
    "gemm_num_stages": (GEMM_DIMENSIONS, "AB", "A"),
    "gemm_relu_schedules": (GEMM_DIMENSIONS, "AB", "A"),
    "linear_bf16": (GEMM_DIMENSIONS, "XW", "X"),
    "rms_norm": ({"rows": 16, "hidden": 256}, "XW", "W"),
    "layer_norm": ({"rows": 16, "hidden": 256}, "XWB", "W"),
    "softmax": ({"rows": 16, "cols": 256}, "X", "X"),
    "flash_attention": ({"batch": 1, "heads": 2, "seq": 64, "dim": 16}, "QKV", "Q"),
}


@pytest.mark.parametrize("family", sorted(SMALL))
def test_each_familys_intermediate_mutant_scales_the_first_input_that_moves_its_output(family):
    found = {f.name: f for f in load_families().families}[family]
    dimensions, names, expected = SMALL[family]
    params = {**found.params(found.variants[0]), **dimensions}
    inputs = make_inputs(found, params, 1, "cpu")
    arguments = [
        Argument(tuple(t.shape), str(t.dtype).removeprefix("torch."), name)
        for t, name in zip(inputs, names, strict=True)
    ]
    output = Argument((1,), "float32", "out")  # not looked at: the mutant is chosen from the reference alone
    case = NumericsCase(family, found, params, None, [*arguments, output], (len(inputs),), ())
    mutant = bench.intermediate(case, 1, "cpu")
    assert mutant is not None and mutant.what.startswith(f"{expected} x 1.005, ")


def test_no_intermediate_mutant_where_no_input_moves_the_output():
    constant = fake.gemm_family(
        "constant", [fake.variant("v")], shape=SHAPE, reference=lambda p, a, b: torch.ones(p["M"], p["N"])
    )
    assert bench.intermediate(fake.numerics_case(constant, right, cache=CACHE), 1, "cpu") is None


def test_each_familys_first_variant_is_mutated_once():
    two = fake.gemm_family("two", [fake.variant("a"), fake.variant("b")], shape=SHAPE)
    cases = [
        fake.numerics_case(family, right, cache=CACHE, name=n) for family, n in ((two, "a"), (two, "b"), (GEMM, "v"))
    ]
    assert [c.key for c in bench.first_variants(cases)] == ["two/a", "small_gemm/v"]
