"""The mutants the GPU numerics must fail: each loads as a family of one variant under its real family's name,
and each really changes the kernel it mutates; a mutation that no longer applies is refused by name."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest

import tilelang_golden.catalog.loading
import tilelang_golden.family
from tilelang_golden.catalog.build import build_kernel

# mutant family -> the module of the family it mutates (a leading `_`: not registered until the harness can
# declare its outputs or its several kernels).
REAL = {
    "attention_backward_chain": "kernels.attention_backward_chain",
    "attention_backward_dq_layout": "kernels.attention_backward_dq_layout",
    "decode_splitkv": "kernels.decode_splitkv",
    "gemm_streamk": "kernels.gemm_streamk",
    "gqa_attention": "kernels.gqa_attention",
    "hadamard": "kernels.hadamard",
    "fp8_cast": "kernels.fp8_cast",
    "gemm_splitk": "kernels.gemm_splitk",
    "inplace_update": "kernels.inplace_update",
}


@pytest.fixture(scope="module")
def mutants() -> Iterator[tilelang_golden.catalog.loading.Registry]:
    yield tilelang_golden.catalog.loading.load_families(
        "tests.mutant_families"
    )  # found from the repository root (pyproject)


def test_every_mutant_loads_as_one_variant_of_its_real_family(mutants):
    assert not mutants.broken
    assert sorted(f.name for f in mutants.families) == sorted(REAL)
    for mutant in mutants.families:
        real = importlib.import_module(REAL[mutant.name]).FAMILY
        (variant,) = mutant.variants
        assert variant.params == real.variant(variant.name).params
        assert variant.kernel is not real.variant(variant.name).kernel


@pytest.mark.parametrize("name", sorted(REAL))
def test_each_mutant_traces_to_another_kernel(mutants, name):
    """The mutant's kernels (a chain's every launch) differ from the real variant's, as traced for its snapshot."""
    mutant = next(f for f in mutants.families if f.name == name)
    (variant,) = mutant.variants
    real = importlib.import_module(REAL[name]).FAMILY

    def traced(family, variant):
        return [launch.prim_func.script() for launch in build_kernel(family, variant).launches]

    assert traced(real, real.variant(variant.name)) != traced(mutant, variant)


def test_a_mutation_that_does_not_apply_once_is_refused(mutants):
    from tests.mutant_families import mutate

    real = importlib.import_module(REAL["fp8_cast"]).per_token_cast_to_fp8
    with pytest.raises(ValueError, match=r"'T.float16' occurs 0 times in its source, not once"):
        mutate(real, "T.float16", "T.float32")
    with pytest.raises(ValueError, match=r"'T.float32' occurs \d+ times in its source, not once"):
        mutate(real, "T.float32", "T.float16")
