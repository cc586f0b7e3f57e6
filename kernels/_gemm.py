"""What the two seed GEMM families share: fp16 inputs, the float32 reference, the cuBLAS op, the work.

Not a family itself (the leading `_` keeps the harness from loading it as one).
"""

from typing import Any

from tilelang_golden.family import Params, Tolerance, Work
from kernels._precision import tf32_off

# fp16 products summed in fp32 over K = 8192, rounded once to fp16: the rounding of the output
# (2^-11 relative) and summation order stay well inside 1e-2; a wrong tile or a missed
# K step is off by whole units.
TOLERANCE = Tolerance(atol=1e-2, rtol=1e-2)


def gemm_inputs(p: Params, generator: Any, device: str) -> list[Any]:
    """A (M x K) and B (K x N), fp16 standard normal (never zeros: they hide unwritten output)."""
    import torch

    a = torch.randn(p["M"], p["K"], generator=generator, device=device, dtype=torch.float16)
    b = torch.randn(p["K"], p["N"], generator=generator, device=device, dtype=torch.float16)
    return [a, b]


def float32_matmul(a: Any, b: Any) -> Any:
    """A @ B in float32 with TF32 off, so the reference is not itself approximate."""
    with tf32_off():
        return a.float() @ b.float()


def gemm_work(p: Params) -> Work:
    """2MNK operations; A and B read once, C written once (fp16, 2 bytes an element)."""
    return Work(flops=2 * p["M"] * p["N"] * p["K"], bytes=2 * (p["M"] * p["K"] + p["K"] * p["N"] + p["M"] * p["N"]))


def torch_matmul(p: Params, a: Any, b: Any) -> Any:
    """cuBLAS through torch: the speed reference of a plain GEMM."""
    import torch

    return torch.matmul(a, b)


def torch_matmul_relu(p: Params, a: Any, b: Any) -> Any:
    """cuBLAS plus torch's ReLU kernel: what a fused GEMM + ReLU is compared with."""
    import torch

    return torch.relu(torch.matmul(a, b))
