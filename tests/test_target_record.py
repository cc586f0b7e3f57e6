"""The one Target record per snapshot target: everything decoded from its architecture, once."""

from __future__ import annotations

import pytest

from kernels import flash_attention, gemm_num_stages, gemm_tcgen05, rms_norm
from tilelang_golden.family import target_record, targets_where
from tilelang_golden.targets import TARGETS, Features, cuda, hip


def features(cp_async=False, tma=False, tensor_memory=False, lds_copies=False, mfma=False, pipelining=True):
    return Features(cp_async, tma, tensor_memory, lds_copies, mfma, pipelining)


def test_every_target_has_the_features_its_architecture_gives_it():
    """By TileLang 0.1.15's rules: sm_120 (consumer Blackwell) has TMA but no tensor memory; gfx942 copies into LDS
    but is not software-pipelined (only gfx950 is, on ROCm)."""
    sm80 = features(cp_async=True)
    hopper = features(cp_async=True, tma=True)
    expected = {
        "sm_80": sm80,
        "sm_89": sm80,
        "sm_90": hopper,
        "sm_100a": features(cp_async=True, tma=True, tensor_memory=True),
        "sm_120": hopper,
        "gfx942": features(lds_copies=True, mfma=True, pipelining=False),
        "gfx950": features(lds_copies=True, mfma=True),
    }
    assert {name: target.features for name, target in TARGETS.items()} == expected


def test_the_tvm_description_is_the_one_lowering_has_always_been_given():
    """Part of the lowering cache's key and of every snapshot: keys, their order and values stay as they were."""
    described = {name: list(target.description.items()) for name, target in TARGETS.items()}
    assert described == {
        **{name: [("kind", "cuda"), ("arch", name)] for name in ("sm_80", "sm_89", "sm_90", "sm_100a", "sm_120")},
        **{name: [("kind", "hip"), ("mcpu", name)] for name in ("gfx942", "gfx950")},
    }
    assert TARGETS["sm_90"].description is not TARGETS["sm_90"].description, "a fresh dict: no caller can change it"


@pytest.mark.parametrize(
    ("name", "capability", "gfx", "compile_arch", "device", "warp", "suffix"),
    [
        ("sm_89", (8, 9), None, "sm_89", "sm_89", 32, ".cu"),
        ("sm_90", (9, 0), None, "sm_90a", "sm_90", 32, ".cu"),
        ("sm_100a", (10, 0), None, "sm_100a", "sm_100", 32, ".cu"),
        ("sm_120", (12, 0), None, "sm_120a", "sm_120", 32, ".cu"),
        ("gfx942", None, "942", "gfx942", "gfx942", 64, ".hip"),
    ],
)
def test_a_target_is_decoded_from_its_architecture(name, capability, gfx, compile_arch, device, warp, suffix):
    target = TARGETS[name]
    assert (target.compute_capability, target.gfx_version, target.compile_arch) == (capability, gfx, compile_arch)
    assert (target.device_architecture, target.warp_size, target.source_suffix) == (device, warp, suffix)


def test_an_architecture_that_is_not_one_is_refused():
    with pytest.raises(ValueError, match="sm_<major><minor>"):
        cuda("ampere", 1024)
    with pytest.raises(ValueError, match="gfx<version>"):
        hip("mi300x", 1024)
    assert hip("gfx1100", 64 * 1024).warp_size == 32, "RDNA runs wave32"
    assert cuda("sm_100f", 1024).compile_arch == "sm_100f", "a family-specific arch is compiled as it is"


def test_families_name_targets_by_what_they_have():
    """The deviations and declarations the families make, read through the records, give the targets measured."""
    assert targets_where(lambda t: t.features.tensor_memory) == ("sm_100a",) == gemm_tcgen05.FAMILY.target_names
    causal_ns2 = next(v for v in flash_attention.FAMILY.variants if v.name == "causal_ns2")
    assert list(causal_ns2.does_not_lower) == ["sm_80", "sm_89", "gfx950"]
    threads512 = next(v for v in rms_norm.FAMILY.variants if v.name == "threads512")
    assert list(threads512.does_not_lower) == ["sm_100a", "sm_120"]
    deviating = {name: sorted(gemm_num_stages.deviations(target_record(name))) for name in TARGETS}
    assert deviating == {
        "sm_80": [],
        "sm_89": [],
        **{name: sorted(gemm_num_stages.WARP_SPECIALIZED) for name in ("sm_90", "sm_100a", "sm_120")},
        "gfx942": sorted(gemm_num_stages.NOT_PIPELINED),
        "gfx950": [],
    }
