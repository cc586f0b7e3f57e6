"""Fake families, cases, a stand-in for PyTorch's caching allocator, and a GpuRun built from fake timings and
numerics, for the GPU harness's CPU tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kernels._gemm import TOLERANCE, float32_matmul, gemm_inputs, gemm_work, torch_matmul, torch_matmul_relu
from tilelang_golden.catalog.cases import Case
from tilelang_golden.dtypes import torch_dtype
from tilelang_golden.family import RETURNED, Family, OutputKind, Params, Sweep, Variant
from tilelang_golden.gpu.gate.numerics_gate import ErrorStats, NumericsResult, Output, OutputCheck, SeedCheck
from tilelang_golden.gpu.kernel_session import KernelSession
from tilelang_golden.gpu.measure.numerics import NumericsCase
from tilelang_golden.gpu.measure.timing import PairedTiming, Timing, throughput
from tilelang_golden.gpu.report.results import GpuRun, SnapshotCheck, VariantResult
from tilelang_golden.gpu.run.compile import Argument, CompiledCase
from tilelang_golden.gpu.run.device import Device
from tilelang_golden.gpu.selection import not_runnable

LIMIT = 232448  # an H200's opt-in shared memory per block; the harness queries it on a real device
SEEDS = [11, 22, 33]
TARGET = "sm_90"
SHAPE = {"M": 8192, "N": 8192, "K": 8192}
NUM_STAGES = (0, 1, 2, 3, 4, 6)
TILES = ((128, 128, 32), (128, 256, 64))


def device(name: str = "NVIDIA H200", torch_version: str = "2.11.0+cu130") -> Device:
    return Device(name, (9, 0), TARGET, LIMIT, 132, {"cuda": "13.0", "torch": torch_version, "tilelang": "0.1.15"})


# -- families --------------------------------------------------------------------------------------


def variant(name: str, **params: Any) -> Variant:
    """A variant whose kernel is never built: the CPU tests give the harness compiled results directly."""
    return Variant(name, kernel=lambda **_: None, params=params)


def matmul_reference(p: Params, a: Any, b: Any) -> Any:
    return float32_matmul(a, b)


def relu_reference(p: Params, a: Any, b: Any) -> Any:
    import torch

    return torch.relu(float32_matmul(a, b))


def tile_of(p: Params) -> str:
    return f"{p['block_M']}x{p['block_N']}x{p['block_K']}"


def gemm_family(
    name: str, variants: Sequence[Variant], *, relu: bool = False, shape: Mapping[str, int] = SHAPE, **declared: Any
) -> Family:
    """A GEMM-like family, kernel(A, B) returning C = A @ B (or relu of it), declared as the seed families are.

    `declared` overrides any other field of the declaration (reference, tolerance, sweep, ...).
    `file` is what discovery would set, so messages that name the family file can be checked.
    """
    fields: dict[str, Any] = {
        "name": name,
        "shape": dict(shape),
        "variants": list(variants),
        "inputs": gemm_inputs,
        "reference": relu_reference if relu else matmul_reference,
        "tolerance": TOLERANCE,
        "speed_reference": torch_matmul_relu if relu else torch_matmul,
        "speed_reference_label": "torch.relu(torch.matmul(A, B))" if relu else "torch.matmul(A, B)",
        "work": gemm_work,
        "file": f"kernels/{name}.py",
    }
    return Family(**{**fields, **declared})


def gemm_arguments(p: Params, dtype: str = "float16") -> list[Argument]:
    """The GEMM's PrimFunc arguments (A, B, C), as it declares them; C, at position 2, is its output."""
    return [
        Argument((p["M"], p["K"]), dtype, "A"),
        Argument((p["K"], p["N"]), dtype, "B"),
        Argument((p["M"], p["N"]), dtype, "C"),
    ]


GEMM_OUTPUTS = {2: RETURNED}


# -- the caching allocator -------------------------------------------------------------------------


class FakeCache:
    """PyTorch's CUDA caching allocator as the numeric gate relies on it, on the CPU.

    What it hands out stays cached (it keeps the tensor, as the real cache keeps a freed block)
    until `settle`. `take` is the allocation TileLang makes for an output: the first cached tensor
    of that shape and dtype, as the real allocator picks the block just freed for that size, else
    fresh memory.
    """

    def __init__(self) -> None:
        self.cached: list[Any] = []

    def settle(self) -> None:
        self.cached.clear()

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        import torch

        self.cached.append(torch.empty(shape, dtype=dtype))
        return self.cached[-1]

    def take(self, shape: tuple[int, ...], dtype: Any) -> Any:
        import torch

        for index, tensor in enumerate(self.cached):
            if tuple(tensor.shape) == tuple(shape) and tensor.dtype == dtype:
                return self.cached.pop(index)
        return torch.empty(shape, dtype=dtype)


def returning(write: Callable[..., Any], outputs: Sequence[Argument], cache: FakeCache) -> Callable[..., Any]:
    """A kernel called as TileLang's are, `kernel(*arguments)`: like TileLang's adapter it allocates its returned
    outputs from the cache in order, `write(*arguments, *outputs)` fills them (and any argument it writes in
    place), and it returns them (a list unless there is one)."""

    def kernel(*arguments: Any) -> Any:
        made = [cache.take(a.shape, torch_dtype(a.dtype)) for a in outputs]
        write(*arguments, *made)
        return made[0] if len(made) == 1 else made

    return kernel


def numerics_case(
    family: Family,
    write: Callable[..., Any] | None = None,
    *,
    cache: FakeCache,
    run: Callable[..., Any] | None = None,
    arguments: Sequence[Argument] | None = None,
    outputs: Sequence[int] | Mapping[int, OutputKind] = GEMM_OUTPUTS,
    name: str = "v",
    key: str | None = None,
) -> NumericsCase:
    """The gate's case for variant `name` of a family (GEMM arguments unless given): a kernel that fills its
    outputs with `write(*arguments, *returned)`, allocating the returned ones from `cache`, or that runs as `run`
    itself. `outputs`: position -> kind, or the positions of returned outputs."""
    params = family.params(family.variant(name))
    arguments = gemm_arguments(params) if arguments is None else list(arguments)
    kinds = dict(outputs) if isinstance(outputs, Mapping) else {i: RETURNED for i in outputs}
    returned = [arguments[i] for i, kind in kinds.items() if kind == RETURNED]
    run = run or returning(write, returned, cache)
    tolerances = family.tolerances(family.variant(name), len(kinds))
    return NumericsCase(key or f"{family.name}/{name}", family, params, run, arguments, kinds, tolerances)


def stage_variant(num_stages: int, tile: tuple[int, int, int]) -> Variant:
    bm, bn, bk = tile
    return variant(f"ns{num_stages}_{bm}x{bn}x{bk}", block_M=bm, block_N=bn, block_K=bk, num_stages=num_stages)


# Seed 01 and seed 03 as the GPU path sees them: a num_stages sweep per tile shape, a GEMM + ReLU.
GEMM_NUM_STAGES = gemm_family(
    "gemm_num_stages",
    [stage_variant(n, tile) for tile in TILES for n in NUM_STAGES],
    sweep=Sweep(axis="num_stages", series=tile_of),
)
GEMM_RELU = gemm_family("gemm_relu_schedules", [variant("v0_baseline")], relu=True)


def case(family: Family, name: str, target: str = TARGET) -> Case:
    return Case(family, family.variant(name), target)


def sweep_case(num_stages: int, tile: tuple[int, int, int]) -> Case:
    """A case of the fake seed 01 family (num_stages in NUM_STAGES, tile in TILES)."""
    return case(GEMM_NUM_STAGES, stage_variant(num_stages, tile).name)


def single_case(name: str, family: str = "f", **declared: Any) -> Case:
    """The only variant of a GEMM-like family of its own (`f/<name>` by default)."""
    return case(gemm_family(family, [variant(name)], **declared), name)


V0 = case(GEMM_RELU, "v0_baseline")


# -- the GPU's clock -------------------------------------------------------------------------------


class FakeClock:
    """The GPU's time as the timer sees it, on the CPU: a launch advances it by its known duration, and
    `timer` reads it before and after each launch as CUDA events do (a
    `tilelang_golden.gpu.measure.timing.LaunchTimer`)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.launched: list[str] = []  # every launch's name, in order

    def launch(self, name: str, ms: float) -> Callable[[], None]:
        def run() -> None:
            self.launched.append(name)
            self.now += ms

        return run

    def timer(self, launches: Sequence[Callable[[], Any]]) -> list[float]:
        times = []
        for launch in launches:
            start = self.now
            launch()
            times.append(self.now - start)
        return times


# -- results and runs ------------------------------------------------------------------------------


# An fp16 GEMM output's error on each of SEEDS, the kernel's beside its precision twin's (TWIN_ERRORS): seed 22
# comes closest to a bound (its mean abs error, at 62 % of it).
TWIN_ERRORS = ErrorStats(max_abs=0.0625, mean_abs=0.0039, bias=1e-5, scale=2e-6, magnitude=72.0)
KERNEL_ERRORS = (
    ErrorStats(max_abs=0.0625, mean_abs=0.0040, bias=-2e-5, scale=3e-6, magnitude=72.0),
    ErrorStats(max_abs=0.0625, mean_abs=0.0041, bias=3e-5, scale=-7.4e-6, magnitude=72.0),
    ErrorStats(max_abs=0.0310, mean_abs=0.0039, bias=0.0, scale=1e-6, magnitude=72.0),
)


def output_check(output: Output, errors: ErrorStats) -> OutputCheck:
    """An output within its tolerance, with these errors beside the precision twin's TWIN_ERRORS."""
    return OutputCheck(output, max_abs_error=errors.max_abs, errors=errors, twin=TWIN_ERRORS)


def result(
    c: Case,
    shared: int,
    rounds_ms: tuple[float, ...] | None = (2.0, 2.02, 1.98),
    reference_ms: float = 1.0,
    numerics_ok: bool = True,
    gpu: Device | None = None,
    **compiled: Any,
) -> VariantResult:
    """A checked case on `gpu` (the fake H200 by default): compiled, matching its snapshot; timed unless it does
    not fit or rounds_ms is None. `compiled` overrides fields of its CompiledCase."""
    built = CompiledCase(
        **{
            "case": c,
            "kernel": object(),
            "arguments": gemm_arguments(c.params),
            "outputs": GEMM_OUTPUTS,
            "tolerances": (c.family.tolerance,),
            "launches": {"main_kernel": shared},
            "registers_per_thread": 168,
            "compile_target": "sm_90a",
            **compiled,
        }
    )
    gpu = gpu or device()
    snapshot = SnapshotCheck(f"golden/{c.id}.yaml", shared, cuda_matches=True)
    if not_runnable(built, snapshot, gpu.shared_memory_per_block_bytes):
        return VariantResult(built, gpu, snapshot)
    output = Output("C", c.family.tolerance)
    seeds = [SeedCheck(s, [output_check(output, KERNEL_ERRORS[i])]) for i, s in enumerate(SEEDS)]
    if not numerics_ok:
        seeds[1] = SeedCheck(SEEDS[1], [OutputCheck(output, mismatches=7, max_abs_error=3.5)])
    numerics = NumericsResult(
        c.family.label(c.params), [output], seeds, precision_twin=c.family.precision_twin_label(c.params)
    )
    paired = None
    if numerics_ok and rounds_ms is not None:
        # the reference measured beside the variant in every round, steady at reference_ms
        paired = PairedTiming(Timing(rounds_ms), Timing(tuple(reference_ms for _ in rounds_ms)))
    return VariantResult(built, gpu, snapshot, numerics=numerics, paired=paired)


def run(
    results: list[VariantResult],
    references: Mapping[str, float] | None = None,
    gpu: Device | None = None,
    **fields: Any,
) -> GpuRun:
    """The run `check_cases` would return for these results on `gpu` (the fake H200 by default);
    `fields` sets any other field of the GpuRun (a comparison, a remeasure).

    `references`: reference name (`VariantResult.reference`) -> its median ms; by default 1 ms for
    each reference a timed result names. Throughputs are computed from each family's work, as
    `check_cases` does, and the sweeps are built from the families' declarations.
    """
    from tilelang_golden.gpu.report.results import build_sweeps

    gpu = gpu or device()
    timed = [r for r in results if r.timing is not None]
    references = {r.reference: 1.0 for r in timed} if references is None else references
    work = {r.reference: r.compiled.case.family.work(r.compiled.case.params) for r in timed}
    return GpuRun(
        device=gpu,
        seeds=list(SEEDS),
        timer={"tool": "triton.testing.do_bench", "statistic": "median", "rounds": 3},
        variants=results,
        references={name: Timing((ms, ms * 1.01, ms * 0.99)) for name, ms in references.items()},
        reference_throughput={
            name: throughput(work[name], ms, gpu.peak) for name, ms in references.items() if name in work
        },
        sweeps=build_sweeps(results),
        compile_seconds=12.0,
        wall_seconds=95.0,
        **fields,
    )


# -- the device, as PyTorch reports it ------------------------------------------------------------

H200_PROPERTIES = {"name": "NVIDIA H200", "shared_memory_per_block_optin": LIMIT, "multi_processor_count": 132}
# An MI300X as a ROCm build of PyTorch reports it: gcnArchName with its feature flags, capability 9.4.
MI300X_PROPERTIES = {
    "name": "AMD Instinct MI300X",
    "gcnArchName": "gfx942:sramecc+:xnack-",
    "shared_memory_per_block": 65536,
    "multi_processor_count": 304,
}


def torch_device(
    monkeypatch: Any,
    capability: tuple[int, int] = (9, 0),
    properties: Mapping[str, Any] = H200_PROPERTIES,
    *,
    cuda: str | None = "13.0",
    hip: str | None = None,
    visible: bool = True,
) -> None:
    """Make CPU PyTorch report one GPU as a CUDA build (`cuda` set) or a ROCm build (`hip` set, `cuda` None) would:
    torch.version, torch.cuda's availability, capability and device properties."""
    from types import SimpleNamespace

    import torch

    monkeypatch.setattr(torch.version, "cuda", cuda)
    monkeypatch.setattr(torch.version, "hip", hip)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: visible)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1 if visible else 0)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=0: capability)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: SimpleNamespace(**properties))


# -- the check's stages on the CPU, in process or in a real worker process -----------------------

SMALL = {"M": 64, "N": 48, "K": 32}
CPU_CACHE = FakeCache()


def small_gemm_right(a: Any, b: Any, c: Any) -> None:
    c.copy_((a.float() @ b.float()).half())


def hangs(*tensors: Any) -> None:
    """A kernel that never finishes."""
    import time

    time.sleep(3600)


def dies(*tensors: Any) -> None:
    """A kernel that kills its process, saying what CUDA says after an illegal address."""
    import os
    import sys

    print("torch.AcceleratorError: CUDA error: an illegal memory access was encountered", file=sys.stderr, flush=True)
    os.abort()


# variant name -> what its kernel does with (A, B, C)
BEHAVIOURS = {"right": small_gemm_right, "right_too": small_gemm_right, "hangs": hangs, "dies": dies}
ISOLATED = gemm_family("isolated", [variant(name) for name in BEHAVIOURS], shape=SMALL)


def cpu_compiler(cases: Sequence[Case]) -> list[CompiledCase]:
    """compile_cases on the CPU: each variant's kernel is its BEHAVIOURS entry (or the family's `write`)."""

    compiled = []
    for c in cases:
        arguments = gemm_arguments(c.params)
        write = BEHAVIOURS.get(c.variant.name, small_gemm_right)
        kernel = returning(write, [arguments[i] for i in GEMM_OUTPUTS], CPU_CACHE)
        kernel.kernel_source = f"// {c.key}"
        compiled.append(
            CompiledCase(c, kernel, arguments=arguments, outputs=GEMM_OUTPUTS, tolerances=(c.family.tolerance,))
        )
    return compiled


def steady_bench(first: Callable[[], Any], second: Callable[[], Any]) -> tuple[float, float]:
    """A pair bench on the CPU: both launched once, each taken to last 1 ms."""
    first()
    second()
    return 1.0, 1.0


def cpu_session(progress: Callable[[str], None] = lambda key: None) -> KernelSession:
    return KernelSession(progress, device="cpu", memory=CPU_CACHE, bench=steady_bench, compiler=cpu_compiler)


class CpuWorker(KernelSession):
    """A real worker's handler on the CPU (`python -m tilelang_golden.gpu.run.worker gpu_fakes:CpuWorker`): the check's
    stages as cpu_session runs them, its cases found in ISOLATED."""

    def __init__(self, progress: Callable[[str], None]) -> None:
        super().__init__(progress, device="cpu", memory=CPU_CACHE, bench=steady_bench, compiler=cpu_compiler)

    def resolve(self, ref: tuple[str, str, str, str]) -> Case:
        return case(ISOLATED, ref[2], ref[3])


# -- a whole run on the fake H200 ---------------------------------------------------------------------

RUN_SEEDS = [1, 2, 3]


def gpu_run(tmp_path: Any, monkeypatch: Any, cases: Sequence[Case], kernels: Any, **plan: Any) -> tuple[int, Any, str]:
    """run_gpu_check on the fake H200 over `cases` (`plan` overrides fields of its CheckPlan): its exit status,
    report.json and summary.md."""
    import json

    from tilelang_golden.gpu import check
    from tilelang_golden.gpu.baseline_use import BaselineUse
    from tilelang_golden.gpu.check import CheckPlan, run_gpu_check

    monkeypatch.setattr(check, "require_cuda", device)
    fields: dict[str, Any] = dict(
        seeds=RUN_SEEDS, rounds=2, timing_seed=5, golden=tmp_path / "golden", snapshotted=lambda case: False
    )
    status = run_gpu_check(
        CheckPlan(lambda device: cases, **{**fields, **plan}),
        output=tmp_path / "report",
        baseline=BaselineUse(tmp_path / "timing"),
        environ={},
        kernels=kernels,
        log=lambda line: None,
    )
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    return status, report, (tmp_path / "report" / "summary.md").read_text()


def variants(report: Any) -> dict[str, Any]:
    """report.json's variants by their key."""
    return {v["variant"]: v for v in report["variants"]}


# A facts snapshot of one kernel, formatted with the snapshot format, its dynamic and static shared memory.
FACTS = """format: {format}
case: {{family: gemm_relu_schedules, variant: v0_baseline, target: sm_90}}
params: {{}}
warnings: []
kernels:
- name: main_kernel
  pipelines: []
  warp_specialized: true
  shared_buffers: {{}}
  dynamic_shared_memory_bytes: {shared}
  launch: {{grid: [1, 1, 1], threads: [1, 1, 1]}}
  sync: {{}}
  mma: {{}}
  layouts: {{}}
  instructions: {{}}
  loops: {{}}
  vector_stores: {{}}
  shared_addressing: {{}}
  shared_memory: {{bytes: {shared}, limit: 232448, fits: true}}
  rasterization: {{}}
  gemms: []
  warp_shuffles: {{}}
  conversions: {{}}
"""
