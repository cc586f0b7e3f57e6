"""A variant's kernel in every form TileLang users write it, and proof that the snapshot is what
`tilelang.compile` builds: the jit decorator's pass configs included."""

from __future__ import annotations

import contextlib

import pytest
import tilelang
import tilelang.language as T
from conftest import REPO
from tvm.target import Target

import tilelang_golden.catalog.loading
import tilelang_golden.family
from kernels._gemm import TOLERANCE, float32_matmul, gemm_inputs, gemm_work, torch_matmul
from tilelang_golden.catalog.build import BuildError, build_kernel
from tilelang_golden.catalog.cases import Case
from tilelang_golden.family import Family, Variant
from tilelang_golden.static.snapshots.normalize import normalize_cuda
from tilelang_golden.static.snapshots.snapshot import SnapshotStore, strip_cuda_header
from tilelang_golden.targets import TARGETS

GOLDEN = SnapshotStore(REPO / "golden")
# TileLang's step that hands the kernel source to nvcc (CUDA) or hipcc (HIP).
COMPILE_HOOKS = ("tilelang_callback_cuda_compile", "tilelang_callback_hip_compile")


@contextlib.contextmanager
def without_nvcc():
    """TileLang's whole JIT path, except that the step handing the source to nvcc or hipcc returns a dummy binary.

    Everything before it (lowering, codegen, the kernel source a JITKernel reports) is the real
    `tilelang.compile`; only the binary is fake, so no GPU, CUDA toolkit or ROCm is needed.
    """
    import tvm_ffi

    originals = {hook: tvm_ffi.get_global_func(hook, allow_missing=True) for hook in COMPILE_HOOKS}
    for hook in COMPILE_HOOKS:
        tvm_ffi.register_global_func(hook, lambda code, target, config=None: bytearray(16), override=True)
    try:
        yield
    finally:
        for hook, original in originals.items():
            if original is not None:
                tvm_ffi.register_global_func(hook, original, override=True)


# One registered variant of each jit style, named, so adding a family does not change what is tested:
# a lazy factory whose decorator carries out_idx, and an eager function with T.const / T.empty.
JIT_VARIANTS = ("rms_norm/threads256", "layer_norm/threads256")


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("key", JIT_VARIANTS)
def test_snapshot_is_what_tilelang_compile_builds_for_a_jit_variant(key, target):
    """The committed CUDA of a jit variant equals the kernel source of a real `tilelang.compile`."""
    family_name, variant_name = key.split("/")
    family = next(f for f in tilelang_golden.catalog.loading.load_families().families if f.name == family_name)
    variant = family.variant(variant_name)
    impl = variant.kernel
    func = impl.get_tir(**family.kernel_arguments(variant))
    with without_nvcc():
        kernel = tilelang.compile(
            func, out_idx=impl.out_idx, pass_configs=impl.pass_configs, target=Target(TARGETS[target].description)
        )
    snapshot = GOLDEN.read(f"{key}/{target}{TARGETS[target].source_suffix}")
    assert snapshot is not None, f"no snapshot for {key}/{target}"
    assert normalize_cuda(kernel.get_kernel_source()) == strip_cuda_header(snapshot)


def test_the_jit_decorators_pass_configs_reach_the_lowering_as_tilelang_compile_applies_them(lowerings):
    """A decorator config that changes the CUDA: the snapshot follows it, exactly as tilelang.compile does."""
    configs = {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}  # a PassConfigKey, as users write it
    configured = _family(tilelang.jit(out_idx=[2], pass_configs=configs)(tiny_gemm))
    plain = _family(tilelang.jit(out_idx=[2])(tiny_gemm))
    lowered = lowerings.produce(Case(configured, configured.variants[0], "sm_90")).cuda
    assert lowered != lowerings.produce(Case(plain, plain.variants[0], "sm_90")).cuda
    with without_nvcc():
        compiled = tilelang.compile(
            tiny_gemm(256, 256, 256, 64), out_idx=[2], pass_configs=configs, target=Target(TARGETS["sm_90"].description)
        )
    assert normalize_cuda(compiled.get_kernel_source()) == lowered


def _family(kernel, **overrides) -> Family:
    declaration = dict(
        name="tiny_gemm",
        shape={"M": 256, "N": 256, "K": 256},
        variants=[Variant("only", kernel, {"block": 64})],
        inputs=gemm_inputs,
        outputs=[2],
        reference=lambda p, a, b: float32_matmul(a, b),
        tolerance=TOLERANCE,
        speed_reference=torch_matmul,
        speed_reference_label="torch.matmul(A, B)",
        work=gemm_work,
        file="kernels/tiny_gemm.py",
    )
    return Family(**{**declaration, **overrides})


def tiny_gemm(M, N, K, block):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            A_s = T.alloc_shared((block, block), "float16")
            B_s = T.alloc_shared((block, block), "float16")
            C_l = T.alloc_fragment((block, block), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block), num_stages=2):
                T.copy(A[by * block, k * block], A_s)
                T.copy(B[k * block, bx * block], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block, bx * block])

    return gemm


def test_a_factory_a_jit_factory_and_a_ready_prim_func_give_one_kernel(lowerings):
    factory = _family(tiny_gemm)
    jitted = _family(tilelang.jit(out_idx=[2])(tiny_gemm))
    ready = _family(tiny_gemm(256, 256, 256, 64), variants=[Variant("only", tiny_gemm(256, 256, 256, 64))])
    texts = {lowerings.produce(Case(f, f.variants[0], "sm_80")).cuda for f in (factory, jitted, ready)}
    assert len(texts) == 1


def test_an_out_idx_that_disagrees_with_outputs_is_a_build_error_naming_the_file():
    family = _family(tilelang.jit(out_idx=[0])(tiny_gemm))
    with pytest.raises(BuildError, match=r"kernels/tiny_gemm.py: variant 'only': .*out_idx=\[0\].*outputs=\[2\]"):
        build_kernel(family, family.variants[0])


def test_an_output_position_outside_the_arguments_is_a_build_error():
    family = _family(tiny_gemm, outputs=[3])
    with pytest.raises(BuildError, match=r"kernels/tiny_gemm.py: outputs \[3\] name positions \[3\] outside"):
        build_kernel(family, family.variants[0])


def test_a_factory_that_raises_is_a_build_error_naming_variant_and_parameters():
    def broken(M, N, K, block):
        raise ZeroDivisionError(f"block {block} must divide {M}, {N} and {K}")

    family = _family(broken)
    with pytest.raises(BuildError, match=r"kernels/tiny_gemm.py: variant 'only' did not build with .*'block': 64"):
        build_kernel(family, family.variants[0])
