"""The numeric gate: does a kernel compute its variant's reference on fresh random inputs?

For every seed: draw A and B (fp16, standard normal) on the GPU, poison the output with NaN,
run the kernel, and compare with the reference computed in float32 from the same inputs at
rtol = atol = 1e-2 with no mismatching element allowed. NaN or Inf in the output fails (an
element the kernel never wrote is still NaN), and the inputs must be bit-identical afterwards.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

RTOL = 1e-2
ATOL = 1e-2
MIN_SEEDS = 3
REFERENCES = ("matmul", "matmul_relu")

# kernel(A, B, C): writes C from A (M x K) and B (K x N), fp16 row-major CUDA tensors.
KernelRun = Callable[[Any, Any, Any], Any]


@dataclass
class SeedCheck:
    seed: int
    mismatches: int = 0  # elements outside rtol/atol (non-finite ones included)
    nonfinite: int = 0  # NaN or Inf in the output, unwritten (still poisoned) elements included
    max_abs_error: float = 0.0  # over finite elements
    inputs_unchanged: bool = True
    error: str | None = None  # the kernel raised

    @property
    def passed(self) -> bool:
        return self.error is None and self.mismatches == 0 and self.nonfinite == 0 and self.inputs_unchanged

    def problem(self) -> str | None:
        if self.error:
            return f"seed {self.seed}: the kernel raised {self.error}"
        parts = []
        if self.nonfinite:
            parts.append(f"{self.nonfinite} NaN/Inf elements (unwritten output stays NaN)")
        if self.mismatches:
            parts.append(
                f"{self.mismatches} elements outside rtol=atol={RTOL:g} (max abs error {self.max_abs_error:.4g})"
            )
        if not self.inputs_unchanged:
            parts.append("the kernel modified its inputs")
        return f"seed {self.seed}: " + ", ".join(parts) if parts else None


@dataclass
class NumericsResult:
    reference: str
    seeds: list[SeedCheck] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.seeds) and all(s.passed for s in self.seeds)

    def problems(self) -> list[str]:
        return [p for s in self.seeds if (p := s.problem())]

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "rtol": RTOL,
            "atol": ATOL,
            "passed": self.passed,
            "seeds": [
                {
                    "seed": s.seed,
                    "mismatches": s.mismatches,
                    "nonfinite": s.nonfinite,
                    "max_abs_error": s.max_abs_error,
                    "inputs_unchanged": s.inputs_unchanged,
                    "error": s.error,
                }
                for s in self.seeds
            ],
        }


def fresh_seeds(count: int = MIN_SEEDS) -> list[int]:
    """New seeds for every run (recorded in the report, so a failure can be replayed)."""
    return [secrets.randbits(31) for _ in range(count)]


def validate_seeds(seeds: Sequence[int]) -> list[int]:
    seeds = list(seeds)
    if len(set(seeds)) < MIN_SEEDS:
        raise ValueError(f"the numeric gate needs at least {MIN_SEEDS} distinct seeds, got {seeds}")
    return seeds


def random_inputs(seed: int, shape: Mapping[str, int], device: str = "cuda") -> tuple[Any, Any]:
    """A (M x K) and B (K x N), fp16 standard normal (never zeros: they hide unwritten output)."""
    import torch

    generator = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(shape["M"], shape["K"], generator=generator, device=device, dtype=torch.float16)
    b = torch.randn(shape["K"], shape["N"], generator=generator, device=device, dtype=torch.float16)
    return a, b


def reference_output(reference: str, a: Any, b: Any) -> Any:
    """The variant's reference in float32 (TF32 off, so the reference is not itself approximate)."""
    import torch

    if reference not in REFERENCES:
        raise ValueError(f"unknown reference {reference!r}; a Variant's reference is one of {REFERENCES}")
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        product = a.float() @ b.float()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return torch.relu(product) if reference == "matmul_relu" else product


def check_numerics(
    kernels: Mapping[str, tuple[KernelRun, str]],
    seeds: Sequence[int],
    shape: Mapping[str, int],
    device: str = "cuda",
) -> dict[str, NumericsResult]:
    """key -> result for every `key: (run, reference)`; inputs and references are shared per seed."""
    import torch

    results = {key: NumericsResult(reference) for key, (_run, reference) in kernels.items()}
    for seed in validate_seeds(seeds):
        a, b = random_inputs(seed, shape, device)
        a_before, b_before = a.clone(), b.clone()
        expected: dict[str, Any] = {}
        for key, (run, reference) in kernels.items():
            if reference not in expected:
                expected[reference] = reference_output(reference, a, b)
            check = SeedCheck(seed)
            output = torch.full((shape["M"], shape["N"]), float("nan"), device=device, dtype=torch.float16)
            try:
                run(a, b, output)
                if device.startswith("cuda"):
                    torch.cuda.synchronize()  # launch errors surface here, inside this variant's check
            except Exception as error:  # a launch failure is this variant's failure, not the run's
                check.error = f"{type(error).__name__}: {error}"
            else:
                _compare(check, output.float(), expected[reference])
                check.inputs_unchanged = torch.equal(a, a_before) and torch.equal(b, b_before)
                if not check.inputs_unchanged:  # restore, so the next kernel sees the seed's inputs
                    a.copy_(a_before)
                    b.copy_(b_before)
            results[key].seeds.append(check)
        del a, b, a_before, b_before, expected
    return results


def _compare(check: SeedCheck, output: Any, expected: Any) -> None:
    import torch

    finite = torch.isfinite(output)
    check.nonfinite = int((~finite).sum().item())
    close = torch.isclose(output, expected, rtol=RTOL, atol=ATOL)
    check.mismatches = int((~close).sum().item())
    errors = (output - expected).abs()
    check.max_abs_error = float(errors[finite].max().item()) if bool(finite.any()) else float("inf")
