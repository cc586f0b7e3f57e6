"""What the test-only families share: a small row-major problem and its inputs."""

from typing import Any

from tilelang_golden.family import Params, Work

SHAPE = {"rows": 4096, "cols": 1024}


def rows_inputs(p: Params, generator: Any, device: str) -> list[Any]:
    import torch

    return [torch.randn(p["rows"], p["cols"], generator=generator, device=device).half()]


def float32_copy(p: Params, x: Any) -> Any:
    return x.float()


def torch_copy(p: Params, x: Any) -> Any:
    return x.clone()


def copy_work(p: Params) -> Work:
    return Work(flops=0, bytes=2 * 2 * p["rows"] * p["cols"])
