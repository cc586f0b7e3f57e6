"""The GPU session on devices it does not have here: each device maps to its snapshot target (compute capability
on CUDA, gcnArchName on ROCm) or stops naming the target to add; every kernel is compiled for that target and
checked against its snapshot; a family that does not declare it is listed and counted as not run, never a pass.
PyTorch reports fake device properties (gpu_fakes.torch_device); nothing here runs on a GPU."""

from __future__ import annotations

import dataclasses
import sys
from types import SimpleNamespace

import gpu_fakes as fake
import pytest
from gpu_fakes import FACTS

from tilelang_golden.catalog.build import BuiltKernel
from tilelang_golden.catalog.chain import Launch
from tilelang_golden.gpu import check, command
from tilelang_golden.gpu.baseline_use import BaselineUse
from tilelang_golden.gpu.check import CheckPlan, run_gpu_check
from tilelang_golden.gpu.gate.baseline_file import baseline_key
from tilelang_golden.gpu.kernel_session import Kernels, KernelSession
from tilelang_golden.gpu.report.report import NOT_RUN, render_markdown, report_data
from tilelang_golden.gpu.run import compile
from tilelang_golden.gpu.run.compile import CompiledCase, compile_cases, read_driver_resources
from tilelang_golden.gpu.run.device import (
    NoCudaDevice,
    UnknownTarget,
    gpu_unavailable,
    require_cuda,
    target_for_architecture,
    target_for_capability,
    target_for_gcn_arch,
)
from tilelang_golden.gpu.selection import device_selection
from tilelang_golden.gpu.snapshot_agreement import snapshot_agreement
from tilelang_golden.static.snapshots.case_files import source_file
from tilelang_golden.static.snapshots.snapshot import FORMAT_VERSION, SnapshotStore, cuda_header
from tilelang_golden.targets import TARGETS

TARGETS_FILE = "the harness's tilelang_golden/targets.py"


# -- device -> target ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capability", "target"),
    [((8, 0), "sm_80"), ((8, 9), "sm_89"), ((9, 0), "sm_90"), ((10, 0), "sm_100a"), ((12, 0), "sm_120")],
)
def test_a_cuda_device_maps_to_its_target_by_compute_capability(monkeypatch, capability, target):
    assert target_for_capability(*capability) == target
    fake.torch_device(monkeypatch, capability)
    device = require_cuda()
    assert device.target == target and device.gcn_arch_name is None
    assert device.reports == f"compute capability {capability[0]}.{capability[1]}"
    assert set(device.versions) == {"cuda", "torch", "tilelang", "driver", "nvcc"} and device.runtime == "CUDA 13.0"


def test_the_nvcc_release_is_read_from_its_version_text(monkeypatch, tmp_path):
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    fake.torch_device(monkeypatch, (9, 0))
    assert require_cuda().versions["nvcc"] == "13.0.88"
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "none"))
    assert require_cuda().versions["nvcc"] == "unknown"


@pytest.mark.parametrize(
    ("gcn_arch_name", "target"),
    [("gfx942:sramecc+:xnack-", "gfx942"), ("gfx942", "gfx942"), ("gfx950:sramecc+:xnack-", "gfx950")],
)
def test_a_rocm_device_maps_to_its_target_by_gcn_arch_name(monkeypatch, gcn_arch_name, target):
    assert target_for_gcn_arch(gcn_arch_name) == target
    properties = {**fake.MI300X_PROPERTIES, "gcnArchName": gcn_arch_name}
    fake.torch_device(monkeypatch, (9, 4), properties, cuda=None, hip="6.4.43482")
    device = require_cuda()
    assert device.target == target, "the capability a ROCm build reports (9.4) names no target"
    assert device.reports == f"gcnArchName {gcn_arch_name}" and device.runtime == "ROCm (HIP) 6.4.43482"
    assert device.shared_memory_per_block_bytes == 65536 and device.as_dict()["gcn_arch_name"] == gcn_arch_name
    assert baseline_key(device.name, device.versions) == {
        "gpu": "AMD Instinct MI300X",
        "hip": "6.4.43482",
        "torch": device.versions["torch"],
        "tilelang": device.versions["tilelang"],
    }


def test_every_target_is_reached_from_exactly_one_device_architecture():
    architectures = {name: target.device_architecture for name, target in TARGETS.items()}
    assert len(set(architectures.values())) == len(TARGETS), f"two targets for one device: {architectures}"
    assert all(target_for_architecture(arch) == target for target, arch in architectures.items())
    assert architectures["sm_100a"] == "sm_100" and architectures["gfx942"] == "gfx942"


@pytest.mark.parametrize(
    ("capability", "to_add", "said"),
    [
        ((8, 6), "sm_86", "TileLang emitted the same source for sm_86 as for sm_80"),
        ((10, 3), "sm_103a", "sm_103a, not sm_103: arch-specific, as the project's sm_100a is"),
        ((12, 1), "sm_121", "compute capability 12.1 (sm_121)"),
    ],
)
def test_a_compute_capability_without_a_target_stops_naming_the_target_to_add(capability, to_add, said):
    with pytest.raises(UnknownTarget) as refused:
        target_for_capability(*capability)
    message = str(refused.value)
    assert f"add {to_add!r} to TARGETS in {TARGETS_FILE}" in message and "nox -s regen-golden" in message
    assert f"(cuda({to_add!r}, <shared memory per block, bytes>))" in message and said in message


def test_an_unknown_gcn_arch_stops_naming_the_target_to_add(monkeypatch):
    fake.torch_device(
        monkeypatch, (9, 0), {**fake.MI300X_PROPERTIES, "gcnArchName": "gfx90a:sramecc+:xnack-"}, cuda=None, hip="6.4"
    )
    with pytest.raises(UnknownTarget) as refused:
        require_cuda()
    message = str(refused.value)
    assert "gcnArchName 'gfx90a:sramecc+:xnack-' (gfx90a)" in message
    assert f"add 'gfx90a' to TARGETS in {TARGETS_FILE} (hip('gfx90a', <shared memory per block, bytes>))" in message


def test_the_entry_stops_with_status_2_on_a_device_without_a_target(monkeypatch, capsys):
    fake.torch_device(monkeypatch, (10, 3), {**fake.H200_PROPERTIES, "name": "NVIDIA B300"})
    assert command.main([]) == 2
    err = capsys.readouterr().err
    assert "gpu check stopped, nothing was checked: this GPU has compute capability 10.3 (sm_103)" in err
    assert f"add 'sm_103a' to TARGETS in {TARGETS_FILE}" in err


def test_a_torch_with_neither_cuda_nor_rocm_says_so(monkeypatch):
    fake.torch_device(monkeypatch, cuda=None, hip=None)
    with pytest.raises(NoCudaDevice, match="a build with neither CUDA nor ROCm; the GPU checks need a CUDA build"):
        require_cuda()


def test_a_rocm_build_without_a_visible_device_names_rocms_variables(monkeypatch):
    fake.torch_device(monkeypatch, cuda=None, hip="6.4", visible=False)
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "")
    with pytest.raises(NoCudaDevice, match="no ROCm device is visible .*HIP 6.4, HIP_VISIBLE_DEVICES=''"):
        require_cuda()


def test_nvcc_is_asked_for_on_a_cuda_device_only(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-toolkit"))
    fake.torch_device(monkeypatch, (9, 0))
    assert gpu_unavailable().startswith("no CUDA compiler")
    fake.torch_device(monkeypatch, (9, 4), fake.MI300X_PROPERTIES, cuda=None, hip="6.4")
    assert gpu_unavailable() is None


# -- compiled for the device's target, checked against its snapshot -------------------------------


@pytest.mark.parametrize(
    ("target", "compiled_for"),
    [
        ("sm_80", {"kind": "cuda", "arch": "sm_80"}),
        ("sm_89", {"kind": "cuda", "arch": "sm_89"}),
        ("sm_90", {"kind": "cuda", "arch": "sm_90a"}),
        ("sm_100a", {"kind": "cuda", "arch": "sm_100a"}),
        ("sm_120", {"kind": "cuda", "arch": "sm_120a"}),
        ("gfx942", {"kind": "hip", "mcpu": "gfx942"}),
        ("gfx950", {"kind": "hip", "mcpu": "gfx950"}),
    ],
)
def test_each_target_is_compiled_as_tilelangs_own_detection_would_on_its_device(target, compiled_for):
    assert TARGETS[target].compile_description == compiled_for


def test_every_case_is_compiled_for_its_own_target_never_auto(monkeypatch):
    asked: list[dict] = []

    def par_compile(funcs, ignore_error, target, **options):
        asked.append(target)
        attrs = {"mcpu": target["mcpu"]} if target["kind"] == "hip" else {"arch": target["arch"]}
        return [SimpleNamespace(kernel_source="", target=SimpleNamespace(attrs=attrs), artifact=None) for _ in funcs]

    built = BuiltKernel((Launch("k", SimpleNamespace(params=[], buffer_map={}, attrs=None)),), fake.GEMM_OUTPUTS)
    monkeypatch.setitem(sys.modules, "tilelang", SimpleNamespace(disable_cache=lambda: None, par_compile=par_compile))
    monkeypatch.setitem(sys.modules, "tvm_ffi", SimpleNamespace(get_global_func=lambda *a, **k: None))
    monkeypatch.setattr(compile, "build_kernel", lambda family, variant: built)
    cases = [fake.case(fake.GEMM_RELU, "v0_baseline", target) for target in ("gfx942", "sm_90")]
    compiled = compile_cases(cases)
    assert asked == [{"kind": "hip", "mcpu": "gfx942"}, {"kind": "cuda", "arch": "sm_90a"}]
    assert [c.compile_target for c in compiled] == ["gfx942", "sm_90a"]


def test_a_hip_kernel_is_checked_against_its_hip_snapshot_and_its_registers_are_not_asked_of_cuda(tmp_path):
    case = fake.case(fake.GEMM_RELU, "v0_baseline", "gfx942")
    store = SnapshotStore(tmp_path)
    store.write(f"{case.id}.yaml", FACTS.format(format=FORMAT_VERSION, shared=0))
    store.write(f"{case.id}.hip", cuda_header(case.id, "gfx942") + "__global__ void k() {}\n")
    compiled = CompiledCase(case, SimpleNamespace(kernel_source="__global__ void k() {}\n"), binaries=[b"hsaco"])
    compiled.launches = {"main_kernel": 0}
    result = snapshot_agreement(compiled, compiled.kernel.kernel_source, store)
    assert source_file(case).endswith("/gfx942.hip") and result.failures == () and result.cuda_matches is True
    read_driver_resources(compiled)
    assert compiled.registers_per_thread is None and "not yet ROCm's" in compiled.resources_note


def test_every_kernel_of_a_chain_is_read_from_the_driver_and_a_missing_binary_is_said(monkeypatch):
    case = fake.case(fake.GEMM_RELU, "v0_baseline", "sm_90")
    first, second = SimpleNamespace(name="dq"), SimpleNamespace(name="dkv")
    chain = compile.ChainKernel(lambda: None, {}, kernels=[first, second])
    read = {b"dq-cubin": {"dq": {"registers": 96, "static_shared_memory_bytes": 0}}}
    read[b"dkv-cubin"] = {"dkv": {"registers": 168, "static_shared_memory_bytes": 1024}}
    monkeypatch.setattr(compile, "_driver_attributes", lambda binary, kernel: read[binary])
    compiled = CompiledCase(case, chain, binaries=[b"dq-cubin", b"dkv-cubin"])
    read_driver_resources(compiled)
    assert compiled.kernel_resources == read[b"dq-cubin"] | read[b"dkv-cubin"]
    assert (compiled.registers_per_thread, compiled.static_shared_memory_bytes) == (168, 1024)
    unseen = CompiledCase(case, chain, binaries=[b"dq-cubin"])
    read_driver_resources(unseen)
    assert unseen.kernel_resources == {} and "binary was not seen" in unseen.resources_note


# -- families that do not declare the device's target ---------------------------------------------

TCGEN05 = fake.gemm_family("gemm_tcgen05", [fake.variant("v0"), fake.variant("v1")], targets=["sm_100a"])
NOT_LOWERING = dataclasses.replace(fake.variant("no"), does_not_lower={"sm_90": "a reason in words"})
DECLARED = fake.gemm_family("declared", [fake.variant("ok"), NOT_LOWERING], targets=["sm_80", "sm_90"])


@pytest.mark.parametrize("target", list(TARGETS))
def test_every_variant_is_either_run_or_listed_with_why_on_every_target(target):
    families = [TCGEN05, DECLARED, fake.GEMM_RELU]
    cases, left_out = device_selection(families, target)
    run = [c.key for c in cases]
    assert not set(run) & set(left_out)
    assert sorted([*run, *left_out]) == sorted(f"{f.name}/{v.name}" for f in families for v in f.variants)
    assert all(c.target == target for c in cases)


def test_a_family_narrowed_to_blackwell_is_reported_as_not_run_on_an_h200():
    cases, left_out = device_selection([TCGEN05, fake.GEMM_RELU], "sm_90")
    assert [c.id for c in cases] == ["gemm_relu_schedules/v0_baseline/sm_90"]
    why = "kernels/gemm_tcgen05.py declares targets ['sm_100a'] and this device is sm_90"
    assert left_out == {"gemm_tcgen05/v0": why, "gemm_tcgen05/v1": why}
    run = fake.run([fake.result(fake.V0, 49152)], not_run=left_out)
    assert run.passed, "a family that does not declare the device's target does not fail the run"
    assert report_data(run)["counts"] == {"pass": 1, "fail": 0, "does not fit": 0, NOT_RUN: 2}
    text = render_markdown(run)
    assert "- 1 passed, 0 failed, 0 do not fit on this GPU, 2 not run on sm_90" in text
    assert f"- **gemm_tcgen05/v1**: not run: {why}; not counted as a pass" in text


def test_a_run_with_nothing_runnable_on_the_device_stops_with_status_2_before_compiling(monkeypatch, tmp_path):
    monkeypatch.setattr(check, "require_cuda", fake.device)
    compiler = KernelSession(compiler=lambda cases: pytest.fail("nothing may be compiled"))
    logged: list[str] = []
    status = run_gpu_check(
        CheckPlan(
            lambda device: device_selection([TCGEN05], device.target)[0],
            not_run=lambda device: device_selection([TCGEN05], device.target)[1],
        ),
        output=tmp_path / "report",
        baseline=BaselineUse(tmp_path),
        kernels=Kernels.in_process(compiler),
        log=logged.append,
    )
    assert status == 2 and not (tmp_path / "report").exists()
    assert (
        "not run: gemm_tcgen05/v0: kernels/gemm_tcgen05.py declares targets ['sm_100a'] and this device is sm_90"
        in logged
    )
    assert logged[-1] == (
        "gpu check stopped, nothing was checked: no selected variant runs on NVIDIA H200 (sm_90); "
        "2 not run here, each listed above with why"
    )


def test_a_run_without_variants_never_passes():
    assert not fake.run([], not_run={"gemm_tcgen05/v0": "declares targets ['sm_100a']"}).passed
