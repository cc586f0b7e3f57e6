"""Element types by both their names: TVM's (what a PrimFunc declares) and torch's (what tensors carry)."""

from __future__ import annotations

from typing import Any

# TVM dtype names torch spells differently.
TORCH_DTYPES = {"float8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2", "bool": "bool"}


def torch_dtype(name: str) -> Any:
    """The torch dtype of a TVM dtype name; ValueError for one torch has no name for."""
    import torch

    dtype = getattr(torch, TORCH_DTYPES.get(name, name), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"the kernel has an argument of dtype {name}, which torch has no name for")
    return dtype


def tvm_dtype(dtype: Any) -> str:
    """A torch dtype's TVM name: torch.float16 -> float16, torch.float8_e4m3fn -> float8_e4m3."""
    name = str(dtype).removeprefix("torch.")
    return {torch_name: tvm_name for tvm_name, torch_name in TORCH_DTYPES.items()}.get(name, name)
