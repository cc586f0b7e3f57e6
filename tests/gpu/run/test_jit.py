"""What the GPU check reads from a compiled kernel, checked on lowerings made here without a GPU."""

from __future__ import annotations

from types import SimpleNamespace

import gpu_fakes as fake
import kernel_styles as styles
import pytest
from conftest import REPO

from tilelang_golden.catalog.build import build_kernel, signature
from tilelang_golden.catalog.cases import Case
from tilelang_golden.catalog.loading import load_families
from tilelang_golden.family import Variant
from tilelang_golden.gpu.run.compile import (
    DYNAMIC_SHARED_LAUNCH_PARAM,
    Argument,
    compile_cases,
    device_kernels,
    launch_dynamic_shared_memory,
    out_idx,
)
from tilelang_golden.static.snapshots.snapshot import SnapshotStore, parse_facts
from tilelang_golden.targets import TARGETS

GOLDEN = REPO / "golden"


def registered_case(name: str, target: str) -> Case:
    """The case of the registered variant called `name` (variant names are unique across the seed families)."""
    (case,) = [Case(f, v, target) for f in load_families().families for v in f.variants if v.name == name]
    return case


def lowered(case: Case):
    """TileLang's artifact for a case, host IR included (a JIT kernel keeps only the device IR).

    Built as the GPU check compiles it: the family's PrimFunc under its pass configs.
    """
    import tilelang
    import tvm
    from tvm.target import Target

    built = build_kernel(case.family, case.variant)
    tvm_target = Target(TARGETS[case.target].description)
    with tvm.transform.PassContext(opt_level=3, config=built.pass_configs), tvm_target:
        return tilelang.lower(built.prim_func, target=tvm_target, enable_device_compile=False)


def host_launch_shared_memory(artifact) -> dict[str, int]:
    """The dynamic shared memory argument of each kernel's launch in the host IR, by kernel."""
    from tvm import tirx
    from tvm.tirx.stmt_functor import pre_order_visit

    passed = {}
    for symbol, kernel in device_kernels(artifact.device_mod).items():
        params = [str(p) for p in kernel.attrs["tirx.kernel_launch_params"]]
        launches = []

        def visit(node, symbol=symbol, launches=launches):
            if isinstance(node, tirx.Call) and getattr(node.op, "name", "") == "tirx.tvm_call_packed":
                if isinstance(node.args[0], tirx.StringImm) and node.args[0].value == symbol:
                    launches.append(node)
            return True

        for func in artifact.host_mod.functions.values():
            pre_order_visit(func.body, visit)
        assert len(launches) == 1
        if DYNAMIC_SHARED_LAUNCH_PARAM in params:
            trailing = launches[0].args[len(launches[0].args) - len(params) :]
            passed[symbol] = int(trailing[params.index(DYNAMIC_SHARED_LAUNCH_PARAM)].value)
        else:
            passed[symbol] = 0
    return passed


def test_each_kernel_of_a_module_launches_with_its_own_shared_memory():
    family = styles.family(styles.split_sum_factory, {"splits": 4, "threads": 128}, name="split", outputs=[1])
    artifact = lowered(Case(family, family.variants[0], "sm_80"))
    read = launch_dynamic_shared_memory(SimpleNamespace(artifact=artifact))
    assert read == host_launch_shared_memory(artifact)
    assert list(read) == ["split_sum_kernel", "split_sum_kernel_1"] and read["split_sum_kernel"] > 0


@pytest.mark.parametrize(
    "name, target",
    [("ns6_128x256x64", "sm_90"), ("ns0_64x64x32", "sm_90"), ("v3_manual_pipeline", "sm_80")],
)
def test_launch_shared_memory_is_what_the_host_passes_and_the_snapshot_says(name, target):
    case = registered_case(name, target)
    artifact = lowered(case)
    read = launch_dynamic_shared_memory(SimpleNamespace(artifact=artifact))
    assert read == host_launch_shared_memory(artifact)
    snapshot = SnapshotStore(GOLDEN).read(f"{case.id}.yaml")
    kernels = parse_facts(snapshot, case.id)["kernels"]
    assert read == {kernel["name"]: kernel["dynamic_shared_memory_bytes"] for kernel in kernels}


@pytest.mark.parametrize("name", ["ns2_128x128x32", "v1_warp_policy"])
def test_arguments_are_the_prim_funcs_signature_at_the_familys_problem(name):
    case = registered_case(name, "sm_90")
    p = case.params
    assert signature(build_kernel(case.family, case.variant)) == [
        Argument((p["M"], p["K"]), "float16", "A"),
        Argument((p["K"], p["N"]), "float16", "B"),
        Argument((p["M"], p["N"]), "float16", "C"),
    ]


@pytest.mark.parametrize(
    "kernel, declared, expected",
    [
        (styles.eager_scale, None, None),  # its PrimFunc names its T.empty result: compile refuses to be told too
        (styles.lazy_scale, None, [1]),  # the decorator's out_idx
        (styles.scale_factory, [1], [1]),  # the family's outputs
        (styles.ready_scale, [-1], [1]),
    ],
    ids=["eager", "lazy", "factory", "ready"],
)
def test_every_kind_of_kernel_is_compiled_to_return_its_outputs(kernel, declared, expected):
    family = styles.family(kernel, {} if kernel is styles.ready_scale else None, outputs=declared)
    built = build_kernel(family, family.variants[0])
    assert tuple(built.outputs) == (1,) and out_idx(built) == expected


def test_a_variant_that_does_not_build_is_its_cases_error(monkeypatch):
    import tilelang

    monkeypatch.setattr(tilelang, "disable_cache", lambda: None)  # keep this process's cache setting

    def kernel(M, N, K):
        raise ValueError(f"no such tile for {M}x{N}x{K}")

    family = fake.gemm_family("unbuildable", [Variant("v", kernel=kernel)])
    (compiled,) = compile_cases([Case(family, family.variants[0], "sm_90")])
    assert compiled.kernel is None and compiled.arguments == []
    assert compiled.error.startswith("kernels/unbuildable.py: variant 'v' did not build with {'M': 8192")
    assert "(ValueError: no such tile for 8192x8192x8192)" in compiled.error


def test_a_kernel_without_its_module_is_an_error_not_a_zero():
    with pytest.raises(LookupError, match="no device module"):
        launch_dynamic_shared_memory(SimpleNamespace(artifact=None))
