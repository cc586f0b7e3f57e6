"""Poison: fill the memory a kernel's outputs will occupy with a value it should not produce, so an element it
never writes cannot pass unseen.

An argument the harness passes in is allocated poisoned (tilelang_golden.gpu.run.calls). A returned output is allocated
by the kernel itself, through PyTorch's CUDA caching allocator: the memory it will get is poisoned beforehand
(`poison`), and after the call `unpoisoned` says which returned output did not land there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tilelang_golden.dtypes import torch_dtype

if TYPE_CHECKING:
    from tilelang_golden.catalog.build import Argument


class Memory(Protocol):
    """Where a kernel's outputs are allocated: PyTorch's CUDA caching allocator, or a test's stand-in."""

    def settle(self) -> None:
        """Finish the queued work and hand the cache's free blocks back to the driver."""

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """An uninitialized tensor from the cache."""


@dataclass(frozen=True)
class CudaCache:
    """PyTorch's CUDA caching allocator, which TileLang's output allocation goes through."""

    device: str = "cuda"

    def settle(self) -> None:
        import torch

        torch.cuda.synchronize(self.device)  # frees waiting on queued work become reusable
        torch.cuda.empty_cache()

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        import torch

        return torch.empty(shape, dtype=dtype, device=self.device)


def poison_value(dtype: Any) -> Any:
    """A value the kernel should not produce: NaN for floats, the minimum for integers (False for bool,
    which has no value to spare)."""
    import torch

    if dtype.is_floating_point:
        return float("nan")
    return False if dtype == torch.bool else torch.iinfo(dtype).min


def poison(outputs: Sequence[Argument], memory: Memory) -> list[tuple[int, int]]:
    """Poison the memory the kernel's outputs will be allocated from; the byte ranges poisoned.

    The caching allocator picks a block by the state of its cache alone. Allocating the outputs' sizes
    in order and freeing them leaves that state as it was (freed blocks merge back), so the kernel's
    allocations of the same sizes in the same order get the same blocks, still filled. Emptying the
    cache first leaves little else to pick from. That makes it likely; `unpoisoned` proves it.
    """
    memory.settle()
    blocks = []
    for argument in outputs:
        dtype = torch_dtype(argument.dtype)
        blocks.append(memory.empty(argument.shape, dtype).fill_(poison_value(dtype)))
    ranges = [byte_range(block) for block in blocks]
    del blocks  # back to the cache, still poisoned (the fill is queued before any later use of the block)
    return ranges


def byte_range(tensor: Any) -> tuple[int, int]:
    """[first, last + 1) of the bytes the tensor's elements occupy, a view's strides included."""
    start = tensor.data_ptr()
    if tensor.numel() == 0:
        return start, start
    extent = 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True))
    return start, start + extent * tensor.element_size()


def unpoisoned(outputs: Sequence[Any], ranges: Sequence[tuple[int, int]]) -> list[int]:
    """Indices of the outputs not entirely inside one poisoned range (an empty output has nothing to poison)."""
    found = []
    for index, output in enumerate(outputs):
        first, end = byte_range(output)
        if first != end and not any(low <= first and end <= high for low, high in ranges):
            found.append(index)
    return found
