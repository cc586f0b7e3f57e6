"""The numeric gate: does a kernel compute its family's reference on fresh random inputs?

Every kernel is called as its users call it, `kernel(*inputs)`, and returns its outputs (one
tensor, or a list when it has several), which TileLang allocates through PyTorch's CUDA caching
allocator. For every seed and case: the family makes the inputs and the reference; then the
memory the outputs will get is poisoned (NaN, or the dtype's minimum for integers): with the
cache emptied, one tensor per output (the signature's shape and dtype, in order) is allocated,
filled and freed, so it stays in the cache and the kernel's own allocations of those sizes, in
that order, get it back. After the call every returned output must lie inside that poisoned
memory, or the seed fails: a check that cannot show an unwritten element is never a pass. Each
output is compared with its reference at its own tolerance (`isclose(atol, rtol)`, at most
`mismatches` elements outside it); NaN or Inf in an output fails (an element the kernel never
wrote is still NaN), and the inputs must be bit-identical afterwards. Inputs and references are
made afresh for every case from its own parameters.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from harness.family import Family, Tolerance

if TYPE_CHECKING:
    from harness.gpu.compile import Argument

MIN_SEEDS = 3

# kernel(*inputs) -> its output, or a list of them in the signature's order.
KernelRun = Callable[..., Any]


class FamilyCallError(ValueError):
    """A family's inputs or reference raised, or do not fit the kernel; the message names the family file."""


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


@dataclass(frozen=True)
class Output:
    """One output the kernel returns: its name in the signature and the tolerance it is held to."""

    name: str
    tolerance: Tolerance


@dataclass
class OutputCheck:
    """One output against its reference on one seed."""

    output: Output
    mismatches: int = 0  # elements outside the tolerance (non-finite ones included)
    nonfinite: int = 0  # NaN or Inf, unwritten (still poisoned) elements included
    max_abs_error: float = 0.0  # over finite elements

    @property
    def passed(self) -> bool:
        return self.nonfinite == 0 and self.mismatches <= self.output.tolerance.mismatches

    def problems(self) -> list[str]:
        tolerance, found = self.output.tolerance, []
        if self.nonfinite:
            found.append(f"{self.nonfinite} NaN/Inf elements (unwritten output stays NaN)")
        if self.mismatches > tolerance.mismatches:
            found.append(
                f"{self.mismatches} elements outside atol={tolerance.atol:g}, rtol={tolerance.rtol:g} "
                f"({tolerance.mismatches} allowed; max abs error {self.max_abs_error:.4g})"
            )
        return found

    def as_dict(self) -> dict[str, Any]:
        return {
            "output": self.output.name,
            "mismatches": self.mismatches,
            "nonfinite": self.nonfinite,
            "max_abs_error": self.max_abs_error,
        }


@dataclass
class SeedCheck:
    seed: int
    outputs: list[OutputCheck] = field(default_factory=list)  # one per output once the kernel has run
    inputs_unchanged: bool = True
    error: str | None = None  # the kernel raised, returned what its signature does not, or could not be poisoned

    @property
    def passed(self) -> bool:
        checked = bool(self.outputs) and all(o.passed for o in self.outputs)
        return self.error is None and checked and self.inputs_unchanged

    # Over all outputs: what the report shows per seed.
    @property
    def mismatches(self) -> int:
        return sum(o.mismatches for o in self.outputs)

    @property
    def nonfinite(self) -> int:
        return sum(o.nonfinite for o in self.outputs)

    @property
    def max_abs_error(self) -> float:
        return max((o.max_abs_error for o in self.outputs), default=0.0)

    def problem(self) -> str | None:
        if self.error:
            return f"seed {self.seed}: {self.error}"
        several = len(self.outputs) > 1
        parts = [f"output {o.output.name}: {p}" if several else p for o in self.outputs for p in o.problems()]
        if not self.inputs_unchanged:
            parts.append("the kernel modified its inputs")
        return f"seed {self.seed}: " + ", ".join(parts) if parts else None


@dataclass
class NumericsResult:
    reference: str  # what the family compares with, in words
    outputs: list[Output]
    seeds: list[SeedCheck] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.seeds) and all(s.passed for s in self.seeds)

    def problems(self) -> list[str]:
        return [p for s in self.seeds if (p := s.problem())]

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "tolerances": [
                {
                    "output": o.name,
                    "atol": o.tolerance.atol,
                    "rtol": o.tolerance.rtol,
                    "allowed_mismatches": o.tolerance.mismatches,
                }
                for o in self.outputs
            ],
            "passed": self.passed,
            "seeds": [
                {
                    "seed": s.seed,
                    "mismatches": s.mismatches,
                    "nonfinite": s.nonfinite,
                    "max_abs_error": s.max_abs_error,
                    "inputs_unchanged": s.inputs_unchanged,
                    "error": s.error,
                    "outputs": [o.as_dict() for o in s.outputs],
                }
                for s in self.seeds
            ],
        }


@dataclass(frozen=True)
class NumericsCase:
    """What the gate needs of one compiled case."""

    key: str
    family: Family
    params: Mapping[str, Any]
    run: KernelRun
    arguments: Sequence[Argument]  # every kernel argument as the PrimFunc declares it
    outputs: Sequence[int]  # positions of the arguments the kernel returns, ascending
    tolerances: Sequence[Tolerance]  # one per output

    @property
    def output_arguments(self) -> list[Argument]:
        return [self.arguments[i] for i in self.outputs]

    def checked_outputs(self) -> list[Output]:
        """Each output with its tolerance, named as the signature names it (else by its position)."""
        return [
            Output(self.arguments[i].name or str(i), tolerance)
            for i, tolerance in zip(self.outputs, self.tolerances, strict=True)
        ]


def fresh_seeds(count: int = MIN_SEEDS) -> list[int]:
    """New seeds for every run (recorded in the report, so a failure can be replayed)."""
    return [secrets.randbits(31) for _ in range(count)]


def validate_seeds(seeds: Sequence[int]) -> list[int]:
    seeds = list(seeds)
    if len(set(seeds)) < MIN_SEEDS:
        raise ValueError(f"the numeric gate needs at least {MIN_SEEDS} distinct seeds, got {seeds}")
    return seeds


def make_inputs(family: Family, params: Mapping[str, Any], seed: int, device: str = "cuda") -> list[Any]:
    """The family's inputs for one seed: the same seed gives the same tensors."""
    import torch

    generator = torch.Generator(device=device).manual_seed(seed)
    return list(family.inputs(params, generator, device))


# TVM dtype names torch spells differently.
TORCH_DTYPES = {"float8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2", "bool": "bool"}


def torch_dtype(name: str) -> Any:
    import torch

    dtype = getattr(torch, TORCH_DTYPES.get(name, name), None)
    if not isinstance(dtype, torch.dtype):
        raise FamilyCallError(f"the kernel has an argument of dtype {name}, which torch has no name for")
    return dtype


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


@dataclass
class Prepared:
    """One case's tensors for one seed: the inputs, and when checking, their copies and the expected outputs."""

    inputs: list[Any]
    originals: list[Any] = field(default_factory=list)
    expected: list[Any] = field(default_factory=list)


def prepare(case: NumericsCase, seed: int, device: str, checking: bool) -> Prepared:
    """Everything a family's callables make for a run; whatever goes wrong in them is a FamilyCallError."""
    family = case.family
    try:
        inputs = make_inputs(family, case.params, seed, device)
        taken = len(case.arguments) - len(case.outputs)
        if len(inputs) != taken:
            raise FamilyCallError(
                f"{family.file}: inputs() made {len(inputs)} tensors, but the kernel takes {taken} inputs (its "
                f"{len(case.arguments)} arguments less the {len(case.outputs)} it returns); make inputs() return "
                "every argument that is not an output, in order"
            )
        if not checking:
            return Prepared(inputs)
        expected = expected_outputs(family, case.params, inputs, case.output_arguments)
        return Prepared(inputs, [tensor.clone() for tensor in inputs], expected)
    except FamilyCallError:
        raise
    except Exception as error:  # the family's own code raised: its failure, reported as such
        raise FamilyCallError(
            f"{family.file}: making the inputs or the reference raised {type(error).__name__}: {error}"
        ) from error


def expected_outputs(
    family: Family, params: Mapping[str, Any], inputs: Sequence[Any], like: Sequence[Argument]
) -> list[Any]:
    """The reference's outputs, checked to match the kernel's outputs in number, shape and kind."""
    expected = family.reference(params, *inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    if len(expected) != len(like):
        raise FamilyCallError(
            f"{family.file}: the reference returned {len(expected)} tensor(s) for {len(like)} output(s); return one "
            "tensor per output, in order"
        )
    for index, (reference, output) in enumerate(zip(expected, like, strict=True)):
        dtype = torch_dtype(output.dtype)
        shape_ok = tuple(getattr(reference, "shape", ())) == tuple(output.shape)
        kind_ok = getattr(reference, "dtype", None) is not None and (
            reference.dtype.is_floating_point == dtype.is_floating_point
        )
        if not (shape_ok and kind_ok):
            raise FamilyCallError(
                f"{family.file}: reference output {index} is {getattr(reference, 'dtype', type(reference).__name__)} "
                f"{tuple(getattr(reference, 'shape', ()))}, the kernel returns {dtype} {tuple(output.shape)}; "
                "return a tensor of the output's shape (a wider float type is fine)"
            )
    return expected


def returned_outputs(returned: Any, like: Sequence[Argument]) -> list[Any]:
    """What the kernel returned, as one tensor per output; ValueError unless it is what its signature says."""
    import torch

    several = isinstance(returned, (list, tuple))
    outputs = list(returned) if several and len(like) > 1 else [returned]
    fits = len(outputs) == len(like) and all(
        isinstance(t, torch.Tensor) and tuple(t.shape) == tuple(a.shape) and t.dtype == torch_dtype(a.dtype)
        for t, a in zip(outputs, like, strict=False)
    )
    if not fits:
        got = ", ".join(
            f"{t.dtype} {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__ for t in outputs
        )
        wanted = ", ".join(f"{torch_dtype(a.dtype)} {tuple(a.shape)}" for a in like)
        raise ValueError(f"the kernel returned {got}; its signature's outputs are {wanted}")
    return outputs


def check_numerics(
    cases: Sequence[NumericsCase], seeds: Sequence[int], device: str = "cuda", memory: Memory | None = None
) -> dict[str, NumericsResult]:
    """key -> result for every case, each seed's inputs made afresh from the case's own parameters.

    `memory` is where the kernels' outputs come from: the CUDA caching allocator unless a test stands in.
    """
    memory = CudaCache(device) if memory is None else memory
    results = {c.key: NumericsResult(c.family.label(c.params), c.checked_outputs()) for c in cases}
    for seed in validate_seeds(seeds):
        for case in cases:
            results[case.key].seeds.append(check_seed(case, seed, device, memory))
    return results


def check_seed(case: NumericsCase, seed: int, device: str, memory: Memory) -> SeedCheck:
    """One case on one seed; its tensors are freed on return, before the next case's are made."""
    import torch

    check = SeedCheck(seed)
    try:
        prepared = prepare(case, seed, device, checking=True)
        ranges = poison(case.output_arguments, memory)  # last: nothing else may take the poisoned blocks
    except FamilyCallError as error:
        check.error = str(error)
        return check
    try:
        returned = case.run(*prepared.inputs)
        if device.startswith("cuda"):
            torch.cuda.synchronize()  # launch errors surface here, inside this case's check
    except Exception as error:  # a launch failure is this case's failure, not the run's
        check.error = f"the kernel raised {type(error).__name__}: {error}"
        return check
    try:
        outputs = returned_outputs(returned, case.output_arguments)
    except ValueError as error:
        check.error = str(error)
        return check
    checked = case.checked_outputs()
    lost = unpoisoned(outputs, ranges)
    if lost:
        check.error = (
            f"output {', '.join(checked[i].name for i in lost)} could not be poisoned: the kernel returned it "
            "outside the memory filled before the call, so an element it never writes could pass unseen"
        )
        return check
    check.outputs = [compare(*each) for each in zip(checked, outputs, prepared.expected, strict=True)]
    check.inputs_unchanged = all(torch.equal(a, b) for a, b in zip(prepared.inputs, prepared.originals, strict=True))
    return check


def compare(output: Output, tensor: Any, expected: Any) -> OutputCheck:
    """One returned output against its reference, at its own tolerance."""
    import torch

    tolerance = output.tolerance
    tensor = tensor.to(expected.dtype)
    finite = torch.isfinite(tensor) if tensor.dtype.is_floating_point else torch.ones_like(tensor, dtype=torch.bool)
    close = torch.isclose(tensor, expected, rtol=tolerance.rtol, atol=tolerance.atol)
    errors = (tensor.double() - expected.double()).abs()
    return OutputCheck(
        output,
        mismatches=int((~close).sum().item()),
        nonfinite=int((~finite).sum().item()),
        max_abs_error=float(errors[finite].max().item()) if bool(finite.any()) else float("inf"),
    )
