"""What the GPU check reads from a compiled kernel, checked on lowerings made here without a GPU."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from conftest import REPO

from harness.jit import DYNAMIC_SHARED_LAUNCH_PARAM, device_kernel, launch_dynamic_shared_memory
from harness.snapshot import SnapshotStore, parse_facts
from kernels import PROBLEM_SHAPE, TARGETS, all_variants

GOLDEN = REPO / "golden"


def lowered(name: str, target: str):
    """TileLang's artifact for a variant, host IR included (a JIT kernel keeps only the device IR)."""
    import tilelang
    import tvm
    from tvm.target import Target

    variant = next(v for v in all_variants() if v.name == name)
    tvm_target = Target(TARGETS[target])
    with tvm.transform.PassContext(opt_level=3), tvm_target:
        artifact = tilelang.lower(variant.prim_func(**PROBLEM_SHAPE), target=tvm_target, enable_device_compile=False)
    return variant, artifact


def host_launch_shared_memory(artifact) -> int:
    """The dynamic shared memory argument of the kernel's launch in the host IR."""
    from tvm import tirx
    from tvm.tirx.stmt_functor import pre_order_visit

    kernel = device_kernel(artifact.device_mod)
    symbol = str(kernel.attrs["global_symbol"])
    params = [str(p) for p in kernel.attrs["tirx.kernel_launch_params"]]
    launches = []

    def visit(node):
        if isinstance(node, tirx.Call) and getattr(node.op, "name", "") == "tirx.tvm_call_packed":
            if isinstance(node.args[0], tirx.StringImm) and node.args[0].value == symbol:
                launches.append(node)
        return True

    for func in artifact.host_mod.functions.values():
        pre_order_visit(func.body, visit)
    assert len(launches) == 1
    trailing = launches[0].args[len(launches[0].args) - len(params) :]
    return int(trailing[params.index(DYNAMIC_SHARED_LAUNCH_PARAM)].value)


@pytest.mark.parametrize(
    "name, target",
    [("ns6_128x256x64", "sm_90"), ("ns0_64x64x32", "sm_90"), ("v3_manual_pipeline", "sm_80")],
)
def test_launch_shared_memory_is_what_the_host_passes_and_the_snapshot_says(name, target):
    variant, artifact = lowered(name, target)
    read = launch_dynamic_shared_memory(SimpleNamespace(artifact=artifact))
    assert read == host_launch_shared_memory(artifact)
    snapshot = SnapshotStore(GOLDEN).read(f"{variant.key}/{target}.yaml")
    assert read == parse_facts(snapshot, variant.key)["dynamic_shared_memory_bytes"]


def test_a_kernel_without_its_module_is_an_error_not_a_zero():
    with pytest.raises(LookupError, match="no device module"):
        launch_dynamic_shared_memory(SimpleNamespace(artifact=None))
