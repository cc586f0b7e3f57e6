"""The parts a family declares: its variants and targets, its outputs and their tolerances, the work a launch does,
its claims, sweeps and timing twins. Nothing here imports TileLang or torch."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tilelang_golden.targets import TARGETS, Target

# A variant's full parameter set: its problem dimensions, then its own parameters.
Params = Mapping[str, Any]


class FamilyError(ValueError):
    """A family declaration that cannot be used; the message names the file, variant and fix."""


def target_record(name: str) -> Target:
    """One of the project's targets (a `CaseFacts.target`, a key of tilelang_golden.targets.TARGETS) as its record: what
    a check reads to key on what the target has (`target_record(case.target).features.tma`), never on its name."""
    return TARGETS[name]


def targets_where(condition: Callable[[Target], bool]) -> tuple[str, ...]:
    """The project's targets, in its order, whose record meets `condition`: how a family names the targets a
    declaration holds on (`does_not_lower`, `targets`) by what they have, e.g. `lambda t: t.features.tma`."""
    return tuple(name for name, target in TARGETS.items() if condition(target))


# What a parameter value is written as in a snapshot: plain YAML scalars, lists of them, mappings of them.
SNAPSHOT_VALUE_FORMS = (
    "int, float, bool, str or None; a TileLang dtype (T.float16, written `float16`); an enum member "
    "(T.GemmWarpPolicy.FullRow, written `GemmWarpPolicy.FullRow`); a tuple or list of these"
)


def snapshot_value(value: Any) -> Any:
    """A parameter value as the snapshot records it, in a stable, readable form: a TileLang dtype (a str subclass)
    as its name, an enum member as `Class.MEMBER`, a tuple as a list. TypeError, naming the forms accepted, for a
    value with no such form (its repr would carry an address or change between runs)."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if value is None or type(value) in (int, float, bool, str):
        return value
    if isinstance(value, str):  # tvm_ffi's dtype, TileLang's T.float16, subclasses str
        return str(value)
    if isinstance(value, (tuple, list)):
        return [snapshot_value(item) for item in value]
    if isinstance(value, Mapping) and all(isinstance(key, str) for key in value):
        return {key: snapshot_value(item) for key, item in value.items()}
    raise TypeError(f"a {type(value).__module__}.{type(value).__qualname__}, which has no stable written form")


def snapshot_params(params: Params) -> dict[str, Any]:
    """A case's parameters as its snapshot records them (`snapshot_value` of each)."""
    return {name: snapshot_value(value) for name, value in params.items()}


@dataclass(frozen=True)
class Chain:
    """A variant's kernel that is a Python function calling several `@tilelang.jit` kernels, as its users call them
    (attention forward then backward, a MoE layer). The harness calls `function(*inputs, **params)`: inputs() makes
    its tensor arguments, `params` are the variant's own (its dimensions come from the tensors), and every value it
    returns is an output, in order. The static check snapshots each kernel it launches; the GPU check calls it whole.
    """

    function: Callable[..., Any]


@dataclass(frozen=True)
class ByTarget:
    """A parameter whose value depends on the target: `default`, except on the targets `values` names, e.g. the fp8
    type upstream picks for AMD's CDNA3 (`determine_fp8_type()`):
    `ByTarget(T.float8_e4m3fn, {"gfx942": T.float8_e4m3fnuz})`. Each case is built, and its snapshot records, the
    value of its own target."""

    default: Any
    values: Mapping[str, Any] = field(default_factory=dict)

    def on(self, target: str) -> Any:
        return self.values.get(target, self.default)

    def __repr__(self) -> str:
        given = ", ".join(f"{target}: {snapshot_value(v)}" for target, v in self.values.items())
        return f"{given}, elsewhere {snapshot_value(self.default)}"


@dataclass(frozen=True)
class Variant:
    """One kernel of a family: a name unique in it, how to build it, and its parameters.

    `kernel` is one of the kinds `tilelang_golden.catalog.build` lists (an eager or lazy `@tilelang.jit` function,
    an `@tilelang.autotune` one, a PrimFunc factory, a ready `@T.prim_func`); it is called with the
    problem dimensions and `params` as keywords, and every one of them must be a name it uses.
    """

    name: str
    kernel: Any = field(repr=False)
    params: Mapping[str, Any] = field(default_factory=dict)
    shape: Mapping[str, int] = field(default_factory=dict)  # overrides of the family's dimensions
    # family dimension -> the kernel's name for it (its parameter or `T.const` name), where they differ:
    # two kernels that name one problem differently can share a family.
    dimension_names: Mapping[str, str] = field(default_factory=dict)
    # The variant this one differs from only in schedule annotations: the static summary says
    # whether those annotations change the CUDA on each target ("annotation without effect").
    compare_with: str | None = None
    # target -> why TileLang cannot lower this variant for it (or NVIDIA's compiler cannot compile what it emits), in
    # words. The static check lowers it anyway and snapshots the error, so the day it is fixed the check says so.
    does_not_lower: Mapping[str, str] = field(default_factory=dict)
    # part of a compiler warning (e.g. "read before initialization") -> why the kernel is right despite it. A
    # warning that fails the static check (tilelang_golden.static.produce.produced.FAILING_WARNINGS) passes once
    # acknowledged.
    acknowledged_warnings: Mapping[str, str] = field(default_factory=dict)
    # regression class (tilelang_golden.regressions: `spills`, `occupancy`, or one of the family's) -> why the change
    # that makes the kernel worse by it is right. The regen writes such a change only when acknowledged, here or by
    # its `--accept-regression` option; it lists each it wrote in the family's golden/<family>/REGRESSIONS.yaml.
    acknowledged_regressions: Mapping[str, str] = field(default_factory=dict)
    # contradiction (tilelang_golden.contradictions: `mma`, `cp-async`, `tma`, `stages`) -> why the kernel is right
    # although its machine code lacks what its IR asks for (an MMA, an async copy). The static check and the regen fail
    # a case with an unacknowledged one, its first snapshot included.
    acknowledged_contradictions: Mapping[str, str] = field(default_factory=dict)
    # This variant's own bound(s), replacing the family's (one, or one per output), each saying why in `why`: a
    # causal attention's error is not the non-causal one's, and one bound for both is too loose for one of them.
    tolerance: Tolerance | Sequence[Tolerance] | None = None
    # target -> this variant with its ByTarget parameters resolved for it (`on_target`), made once per target so that
    # what a run builds and lowers per variant is built once per target's parameters.
    _on_target: dict[str, Variant] = field(default_factory=dict, init=False, repr=False, compare=False)
    _declared: Variant | None = field(default=None, init=False, repr=False, compare=False)  # what on_target resolved

    def on_target(self, target: str) -> Variant:
        """This variant as it is built for `target`: every ByTarget parameter replaced by the target's value; the
        variant itself when none depends on the target. A variant resolved for one target resolves as the declared
        one for another."""
        if self._declared is not None:
            return self._declared.on_target(target)
        if not any(isinstance(value, ByTarget) for value in self.params.values()):
            return self
        if target not in self._on_target:
            params = {k: v.on(target) if isinstance(v, ByTarget) else v for k, v in self.params.items()}
            resolved = dataclasses.replace(self, params=params)
            object.__setattr__(resolved, "_declared", self)
            self._on_target[target] = resolved
        return self._on_target[target]


@dataclass(frozen=True)
class PrecisionBudget:
    """How far one output's error may exceed its precision twin's beyond the harness's bounds, and why.

    Each factor given replaces that bound's own (`tilelang_golden.gpu.gate.numerics_gate.Thresholds`); one left None
    keeps it.
    For a kernel that rounds differently from the twin on purpose (fp16 products before an fp32 sum, where the
    twin sums in fp32), so the family keeps the twin's gate on every other statistic and output.
    """

    why: str  # the arithmetic that makes the kernel's error larger, in words
    max_factor: float | None = None  # the kernel's max abs error over the twin's
    mean_factor: float | None = None  # the kernel's mean abs error over the twin's
    bias_fraction: float | None = None  # |bias| beyond the twin's, in the twin's mean abs errors
    scale_fraction: float | None = None  # |scale| beyond the twin's, in the twin's relative mean abs errors

    def factors(self) -> dict[str, float]:
        """The bounds this budget changes: field name -> its value."""
        names = ("max_factor", "mean_factor", "bias_fraction", "scale_fraction")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}


@dataclass(frozen=True)
class Tolerance:
    """How close a kernel's output must be to the reference: `isclose(atol, rtol)` per element."""

    atol: float
    rtol: float
    mismatches: int = 0  # elements allowed outside the tolerance
    # Where the kernel's error may exceed its precision twin's more than the harness's bounds allow, and why.
    precision_budget: PrecisionBudget | None = None
    # Why this bound, in words: required where a variant overrides its family's (Variant.tolerance), whose report
    # prints it beside the bound.
    why: str = ""


# Accumulated.initial: the harness allocates the output zeroed (atomic accumulation), or inputs() makes it.
ZEROS = "zeros"
FROM_INPUTS = "inputs"


# Every output kind's `to_logical`: (params, the tensor as the kernel stores it) -> the logical tensor the reference
# computes, for an output kept in another order than its logical one (`T.annotate_layout` on a global buffer: an
# MMA fragment order). None: stored as it is meant.
ToLogical = Callable[[Params, Any], Any]


@dataclass(frozen=True)
class Returned:
    """An output the kernel allocates and returns (`T.empty`, a jit `out_idx`); inputs() does not make it."""

    to_logical: ToLogical | None = None


@dataclass(frozen=True)
class Written:
    """An argument the kernel writes every element of: the harness allocates it, filled with NaN first, and
    passes it in; inputs() does not make it."""

    to_logical: ToLogical | None = None


@dataclass(frozen=True)
class Accumulated:
    """An argument the kernel updates in place: it starts from zeros the harness allocates (`initial=ZEROS`, for
    `T.atomic_add`), or from the tensor inputs() makes at its position (`initial=FROM_INPUTS`), which the
    reference then receives as an input."""

    initial: Literal["zeros", "inputs"] = ZEROS
    to_logical: ToLogical | None = None


OutputKind = Returned | Written | Accumulated
RETURNED = Returned()


@dataclass(frozen=True)
class Work:
    """What one kernel launch does: floating-point operations and bytes moved to and from memory."""

    flops: float
    bytes: float


@dataclass(frozen=True)
class Claim:
    """One checked statement about fresh facts; `expected=False` records a known deviation."""

    name: str
    holds: bool
    observed: str
    expected: bool = True
    why: str = ""  # the reason for a recorded deviation


@dataclass(frozen=True)
class CaseFacts:
    """What a family check sees of one lowered case."""

    variant: Variant
    target: str
    params: Params
    facts: Mapping[str, Any]
    cuda: str  # normalized, as snapshotted

    @property
    def kernels(self) -> list[Mapping[str, Any]]:
        """The facts of each device kernel of the module, in launch order (each names itself: `name`)."""
        return list(self.facts["kernels"])

    @property
    def kernel(self) -> Mapping[str, Any]:
        """The facts of the module's only device kernel; a check of a variant that launches several reads `kernels`."""
        return only_kernel(self.facts, f"{self.variant.name}/{self.target}")


def only_kernel(facts: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """The one device kernel's facts of a module's `facts`; FamilyError naming `where` when it launches several."""
    kernels = facts["kernels"]
    if len(kernels) != 1:
        names = [kernel["name"] for kernel in kernels]
        raise FamilyError(
            f"{where}: the module launches {len(kernels)} device kernels {names}; a check of it reads "
            "CaseFacts.kernels (one entry per kernel, in launch order), not CaseFacts.kernel"
        )
    return kernels[0]


@dataclass(frozen=True)
class Sweep:
    """A latency curve the GPU report draws: variants grouped into series, along one parameter."""

    axis: str  # a variant parameter, e.g. "num_stages"
    series: Callable[[Params], str]  # which curve a variant belongs to, e.g. its tile shape


@dataclass(frozen=True)
class TimingTwin:
    """A variant again, one dimension changed so that it does more work in whole tiles (18.75 % in the committed
    families): what the timing benchmark (`python -m benchmarks.timing baseline`) must measure beyond the baseline
    gate's fail level, against a baseline recorded on another machine start."""

    variant: str
    dimension: str
    value: int
