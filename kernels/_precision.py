"""Reference precision shared by families: float32 that is really float32."""

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def tf32_off() -> Iterator[None]:
    """float32 matmuls without TF32 inside the block, so a float32 reference is not itself approximate."""
    import torch

    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
