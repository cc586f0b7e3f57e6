"""What a kernel family declares, and how the harness finds every family under kernels/.

A family is one module, `kernels/<name>.py`, holding `FAMILY = Family(...)`: its variants, its
problem shape, how to make inputs, which kernel arguments are outputs, the PyTorch reference and
its tolerance, the PyTorch op it is timed against and the work it does, and optionally checks
that run on fresh facts. The harness reads only these declarations and knows no family by name.
Nothing here imports TileLang or torch: a family's callables do that when they are called.
"""

from __future__ import annotations
import __future__

import copy
import enum
import importlib
import pkgutil
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tilelang_golden.config import DEFAULT_FAMILIES
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
class Variant:
    """One kernel of a family: a name unique in it, how to build it, and its parameters.

    `kernel` is one of the kinds `tilelang_golden.families.build` lists (an eager or lazy `@tilelang.jit` function,
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
    # target -> why TileLang cannot lower this variant for it, in words. The static check lowers it
    # anyway and snapshots the error, so the day TileLang fixes it the check says "now lowers".
    does_not_lower: Mapping[str, str] = field(default_factory=dict)
    # part of a compiler warning (e.g. "read before initialization") -> why the kernel is right despite it. A
    # warning that fails the static check (tilelang_golden.static.produce.produced.FAILING_WARNINGS) passes once
    # acknowledged.
    acknowledged_warnings: Mapping[str, str] = field(default_factory=dict)
    # This variant's own bound(s), replacing the family's (one, or one per output), each saying why in `why`: a
    # causal attention's error is not the non-causal one's, and one bound for both is too loose for one of them.
    tolerance: Tolerance | Sequence[Tolerance] | None = None


@dataclass(frozen=True)
class PrecisionBudget:
    """How far one output's error may exceed its precision twin's beyond the harness's bounds, and why.

    Each factor given replaces that bound's own (`tilelang_golden.gpu.gate.numerics_gate.Thresholds`); one left None
    keeps
    it.
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
    families): what the timing benchmark (scripts/bench_timing.py baseline) must measure beyond the baseline
    gate's fail level, against a baseline recorded on another machine start."""

    variant: str
    dimension: str
    value: int


# The fields the harness calls, with what each is called with and returns; the optional ones may be None.
CALLED = {
    "inputs": "(params, generator, device) -> the kernel's non-output arguments",
    "reference": "(params, *inputs) -> the expected output(s)",
    "speed_reference": "(params, *inputs) -> the PyTorch op the kernel is timed against",
    "work": "(params) -> Work(flops, bytes)",
    "checks": "(cases' facts) -> claims",
    "group": "(params, target) -> the group's name",
}
OPTIONAL_CALLED = ("checks", "group")
# Family.precision_twin's default: the speed reference, which runs the family's PyTorch op on the kernel's own dtypes.
SPEED_REFERENCE = "speed_reference"


@dataclass(frozen=True)
class Family:
    """Everything about one kernel family; see README, "Adding a kernel family"."""

    name: str
    shape: Mapping[str, int]  # named problem dimensions, e.g. {"rows": 16384, "hidden": 4096}
    variants: Sequence[Variant]
    # (params, torch.Generator, device) -> the kernel's non-output arguments, in order.
    inputs: Callable[[Params, Any, str], Sequence[Any]]
    # (params, *inputs) -> the expected output (a tensor, or one per output, in order).
    reference: Callable[..., Any]
    # One per output, in order (outputs on different scales need their own); a single Tolerance
    # serves a kernel with one output.
    tolerance: Tolerance | Sequence[Tolerance]
    # (params, *inputs) -> runs the PyTorch op the kernel's speed is compared with, once.
    speed_reference: Callable[..., Any]
    speed_reference_label: str  # how the report names it; `{param}` fields are filled in
    work: Callable[[Params], Work]
    # Optional: checks on fresh facts, run once per group of cases by `nox -s static`.
    checks: Callable[[Sequence[CaseFacts]], list[Claim]] | None = None
    # Optional: (params, target) -> group; cases of one group are lowered by one worker and
    # checked together. Default: the whole family.
    group: Callable[[Params, str], str] | None = None
    sweep: Sweep | None = None
    timing_twin: TimingTwin | None = None
    # The kernel arguments it writes: positions of returned outputs, or position -> Returned(), Written() or
    # Accumulated(initial=...). Returned outputs need not be listed where the kernel says them itself (`T.empty`
    # outputs, a jit `out_idx`); where both say, they must agree.
    outputs: Sequence[int] | Mapping[int, OutputKind] | None = None
    # (params, *inputs) -> the reference's outputs computed by a PyTorch op at the kernel's own precision (one tensor
    # per output, in the output's dtype; a tensor with the output's element count is reshaped to it). The numeric
    # gate holds the kernel's error against the reference to this op's error on the same inputs
    # (tilelang_golden.gpu.measure.numerics). SPEED_REFERENCE by default; None where no op computes at the kernel's
    # precision:
    # then the Tolerance alone judges.
    precision_twin: Callable[..., Any] | Literal["speed_reference"] | None = SPEED_REFERENCE
    # Optional: the project's targets (tilelang_golden.targets.TARGETS) this family is snapshotted and run on, e.g. a
    # kernel written for one architecture's instructions. Default: all of them.
    targets: Sequence[str] | None = None
    file: str = field(
        default="", compare=False
    )  # its file, as the repository names it (kernels/<name>.py): by discovery
    package: str = field(default="", compare=False)  # the importable package it was found in (`kernels`): by discovery

    def __post_init__(self) -> None:
        """Refuse a declaration that cannot be used, naming the file, the variant and the fix; the first problem
        found is said, in this order."""
        where = self.file or f"kernels/{self.name}.py"
        self._check_variants(where)
        for variant in self.variants:
            self._check_variant(variant, where)
        self._check_sweep_and_twin(where)
        self._check_outputs(where)
        self._check_tolerances(where)
        self._check_precision_twin(where)
        self._check_callables(where)

    def _check_variants(self, where: str) -> None:
        """At least one variant, each name once, and targets among the project's."""
        names = [v.name for v in self.variants]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if not self.variants:
            raise FamilyError(f"{where}: family {self.name!r} declares no variant; add at least one Variant")
        if repeated:
            raise FamilyError(f"{where}: variant names must be unique in a family, these repeat: {repeated}")
        if self.targets is not None:
            unknown_targets = sorted(set(self.targets) - set(TARGETS))
            if unknown_targets or not self.targets:
                raise FamilyError(
                    f"{where}: targets must name some of the project's targets {list(TARGETS)} "
                    f"(tilelang_golden.targets.TARGETS), got {list(self.targets)}"
                    + (f"; unknown: {unknown_targets}" if unknown_targets else "")
                )

    def _check_variant(self, variant: Variant, where: str) -> None:
        """One variant's declared failures, dimensions, parameters, acknowledged warnings and comparison."""
        undeclared = sorted(set(variant.does_not_lower) - set(self.target_names))
        if undeclared:
            raise FamilyError(
                f"{where}: variant {variant.name!r} declares it does not lower on {undeclared}, which are not "
                f"targets of this family ({list(self.target_names)})"
            )
        unexplained = sorted(t for t, why in variant.does_not_lower.items() if not str(why).strip())
        if unexplained:
            raise FamilyError(
                f"{where}: variant {variant.name!r} declares it does not lower on {unexplained} without saying "
                "why; give the reason in words"
            )
        unknown = sorted(set(variant.shape) - set(self.shape))
        if unknown:
            raise FamilyError(
                f"{where}: variant {variant.name!r} overrides dimensions {unknown} that the family does "
                f"not declare (its shape has {sorted(self.shape)}); add them to the family's shape or fix the name"
            )
        unmapped = sorted(set(variant.dimension_names) - set(self.shape))
        if unmapped:
            raise FamilyError(
                f"{where}: variant {variant.name!r} renames dimensions {unmapped} that the family does not "
                f"declare (its shape has {sorted(self.shape)}); dimension_names maps a family dimension to the "
                "kernel's name for it"
            )
        clash = sorted(set(variant.params) & set(self.shape))
        if clash:
            raise FamilyError(
                f"{where}: variant {variant.name!r} passes {clash} as parameters, but they are problem "
                "dimensions; set them through Variant(shape=...)"
            )
        vague = sorted(
            repr(part)
            for part, why in variant.acknowledged_warnings.items()
            if not str(part).strip() or not str(why).strip()
        )
        if vague:
            raise FamilyError(
                f"{where}: variant {variant.name!r} acknowledges compiler warnings {vague} without naming part "
                "of the warning or saying why; map a part of its text to the reason the kernel is right"
            )
        for name, value in variant.params.items():
            try:
                snapshot_value(value)
            except TypeError as error:
                raise FamilyError(
                    f"{where}: variant {variant.name!r} passes {name}={value!r}, {error}; the snapshot records every "
                    f"parameter, so give one of: {SNAPSHOT_VALUE_FORMS}"
                ) from None
        names = [v.name for v in self.variants]
        if variant.compare_with is not None and variant.compare_with not in names:
            raise FamilyError(
                f"{where}: variant {variant.name!r} compares with {variant.compare_with!r}, which is not a "
                f"variant of this family ({names})"
            )

    def _check_sweep_and_twin(self, where: str) -> None:
        """The sweep's axis is every variant's parameter; the timing twin names a variant and a dimension."""
        names = [v.name for v in self.variants]
        if self.sweep is not None:
            lacking = [v.name for v in self.variants if self.sweep.axis not in self.params(v)]
            if lacking:
                raise FamilyError(
                    f"{where}: the sweep's axis {self.sweep.axis!r} is not a parameter of variants {lacking}; "
                    "give every variant that parameter or sweep another one"
                )
        twin = self.timing_twin
        if twin is not None and (twin.variant not in names or twin.dimension not in self.shape):
            raise FamilyError(
                f"{where}: the timing twin names variant {twin.variant!r} and dimension {twin.dimension!r}; "
                f"it needs one of the variants {names} and one of the dimensions {sorted(self.shape)}"
            )

    def _check_outputs(self, where: str) -> None:
        """Each declared output position once, with a kind the harness knows."""
        if self.outputs is not None:
            positions = list(self.outputs)
            if len(set(positions)) != len(positions) or not positions or not all(isinstance(i, int) for i in positions):
                raise FamilyError(
                    f"{where}: outputs must list each written argument's position once, got {self.outputs}"
                )
            kinds = self.declared_outputs().values()
            wrong = [k for k in kinds if not isinstance(k, OutputKind)]
            wrong += [k for k in kinds if isinstance(k, Accumulated) and k.initial not in (ZEROS, FROM_INPUTS)]
            wrong += [
                k for k in kinds if isinstance(k, OutputKind) and not (k.to_logical is None or callable(k.to_logical))
            ]
            if wrong:
                raise FamilyError(
                    f"{where}: outputs maps each written argument's position to Returned(), Written() or "
                    f"Accumulated(initial=ZEROS or FROM_INPUTS), each with an optional to_logical=callable; "
                    f"got {self.outputs}"
                )

    def _check_tolerances(self, where: str) -> None:
        """Tolerances, one or one per output, and any precision budget they carry: the family's, then each
        variant's own, which must say why."""
        _check_tolerance(self.tolerance, f"{where}: tolerance")
        for variant in self.variants:
            if variant.tolerance is None:
                continue
            what = f"{where}: variant {variant.name!r}'s tolerance"
            _check_tolerance(variant.tolerance, what)
            if not all(str(t.why).strip() for t in _as_list(variant.tolerance)):
                raise FamilyError(
                    f'{what} replaces the family\'s without saying why; give each Tolerance(..., why="...") the '
                    "reason this variant needs its own bound (the report prints it)"
                )

    def _check_precision_twin(self, where: str) -> None:
        """A callable, the speed reference (the default) or None."""
        twin = self.precision_twin
        if not (twin is None or twin == SPEED_REFERENCE or callable(twin)):
            raise FamilyError(
                f"{where}: precision_twin must be a callable (params, *inputs) -> outputs at the kernel's precision, "
                f"{SPEED_REFERENCE!r} (the default) or None, got {twin!r}"
            )

    def _check_callables(self, where: str) -> None:
        """What the harness calls is callable, so that a declaration fails here and not on a GPU runner."""
        for name, called in CALLED.items():
            value = getattr(self, name)
            if not callable(value) and not (value is None and name in OPTIONAL_CALLED):
                raise FamilyError(
                    f"{where}: {name} must be a callable {called}, got {value!r}; the harness calls it "
                    '(README, "Adding a kernel family")'
                )
        if not isinstance(self.speed_reference_label, str):
            raise FamilyError(
                f"{where}: speed_reference_label must be a string naming the speed reference in reports, "
                f"got {self.speed_reference_label!r}"
            )

    @property
    def target_names(self) -> tuple[str, ...]:
        """The targets this family is snapshotted and run on, in the project's order."""
        return tuple(t for t in TARGETS if self.targets is None or t in self.targets)

    def dimensions(self, variant: Variant) -> dict[str, int]:
        """The variant's shape: the family's dimensions, with the variant's overrides."""
        return {**self.shape, **variant.shape}

    def params(self, variant: Variant) -> dict[str, Any]:
        """Dimensions then parameters: what the kernel is built with and the snapshot records."""
        return {**self.dimensions(variant), **variant.params}

    def kernel_arguments(self, variant: Variant) -> dict[str, Any]:
        """What the kernel is called with: `params`, each dimension under the kernel's own name."""
        return {variant.dimension_names.get(name, name): value for name, value in self.params(variant).items()}

    def tolerances(self, variant: Variant, outputs: int) -> list[Tolerance]:
        """One Tolerance per output, the variant's own where it gives them; FamilyError when they are not exactly
        that many."""
        given, whose = (self.tolerance, "family") if variant.tolerance is None else (variant.tolerance, "variant")
        tolerances = _as_list(given)
        if len(tolerances) != outputs:
            raise FamilyError(
                f"{self.file or f'kernels/{self.name}.py'}: the kernel has {outputs} output(s) and the {whose} gives "
                f"{len(tolerances)} tolerance(s); give one Tolerance per output, in order, each with its reason"
            )
        return tolerances

    def declared_outputs(self) -> dict[int, OutputKind]:
        """What `outputs` says, as position -> kind (a plain list names returned outputs); {} when it says nothing."""
        if self.outputs is None:
            return {}
        if isinstance(self.outputs, Mapping):
            return dict(self.outputs)
        return {position: RETURNED for position in self.outputs}

    def variant(self, name: str) -> Variant:
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise KeyError(f"{self.file}: no variant {name!r} in family {self.name!r}")

    def group_of(self, variant: Variant, target: str) -> str:
        return self.group(self.params(variant), target) if self.group else self.name

    def label(self, params: Params) -> str:
        """The speed reference's name for a variant's parameters, e.g. `sdpa(is_causal=True)`."""
        return self.speed_reference_label.format(**params)

    def precision_twin_op(self) -> Callable[..., Any] | None:
        """The op whose error the numeric gate compares the kernel's with, or None when the family has none."""
        return self.speed_reference if self.precision_twin == SPEED_REFERENCE else self.precision_twin

    def precision_twin_label(self, params: Params) -> str | None:
        """How reports name the precision twin: the speed reference's label, or the declared function's name."""
        op = self.precision_twin_op()
        if op is None:
            return None
        if self.precision_twin == SPEED_REFERENCE:
            return self.label(params)
        return getattr(op, "__qualname__", type(op).__name__)


def _as_list(tolerance: Tolerance | Sequence[Tolerance]) -> list[Tolerance]:
    return [tolerance] if isinstance(tolerance, Tolerance) else list(tolerance)


def _check_tolerance(tolerance: Any, what: str) -> None:
    """One Tolerance or one per output, each precision budget changing a bound and saying why."""
    tolerances = [tolerance] if isinstance(tolerance, Tolerance) else list(tolerance)
    if not tolerances or not all(isinstance(t, Tolerance) for t in tolerances):
        raise FamilyError(f"{what} must be a Tolerance or one Tolerance per output, got {tolerance!r}")
    for index, one in enumerate(tolerances):
        budget = one.precision_budget
        if budget is None:
            continue
        if not isinstance(budget, PrecisionBudget) or not str(budget.why).strip() or not budget.factors():
            raise FamilyError(
                f"{what} {index}'s precision_budget must be a PrecisionBudget that changes at least one bound and "
                f"says why in words, got {budget!r}"
            )
        negative = [name for name, value in budget.factors().items() if not value >= 0]
        if negative:
            raise FamilyError(f"{what} {index}'s precision_budget sets {negative} below 0")


@dataclass(frozen=True)
class BrokenFamily:
    """A module under kernels/ that does not yield a usable family; its cases are not run."""

    name: str
    file: str
    error: str


@dataclass(frozen=True)
class Registry:
    families: tuple[Family, ...]
    broken: tuple[BrokenFamily, ...]


def shown_file(package: Any, package_name: str, name: str) -> str:
    """A family module's file as messages name it: its path from the repository's root (the working directory),
    `src/acme/ops/attention.py`; a package outside the repository by its dotted name, `acme/ops/attention.py`."""
    path = Path(list(package.__path__)[0]) / f"{name}.py"
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return f"{package_name.replace('.', '/')}/{name}.py"


def family_modules(package: Any) -> list[str]:
    """Module names of a package's family files: every module not starting with `_`."""
    return sorted(info.name for info in pkgutil.iter_modules(package.__path__) if not info.name.startswith("_"))


def load_families(*packages: str) -> Registry:
    """Import every family module of each package (default: tilelang_golden.config's DEFAULT_FAMILIES), in order; a
    module
    that fails is reported, the others still load. A run loads its families once and passes them on: nothing here
    is cached, so two runs in one process (the tests) see the families each names."""
    families: list[Family] = []
    broken: list[BrokenFamily] = []
    for package_name in packages or DEFAULT_FAMILIES:
        found = _load_package(package_name, taken={f.name: f.file for f in families})
        families += found.families
        broken += found.broken
    return Registry(tuple(families), tuple(broken))


def on_targets(registry: Registry, targets: Sequence[str] | None) -> Registry:
    """Every family on those of its targets that `targets` names (the repository's `targets` setting; None: all).
    Copies, not `replace`: a family's declarations were checked against all its targets, and a `does_not_lower`
    entry for a target left out is simply never read."""
    if targets is None:
        return registry
    narrowed = []
    for family in registry.families:
        narrowed.append(copy.copy(family))
        object.__setattr__(narrowed[-1], "targets", tuple(t for t in family.target_names if t in targets))
    return Registry(tuple(narrowed), registry.broken)


def _load_package(package_name: str, taken: Mapping[str, str]) -> Registry:
    """One package's families; a name another package's family has is refused (snapshots live under golden/<name>/)."""
    package = importlib.import_module(package_name)
    families: list[Family] = []
    broken: list[BrokenFamily] = []
    for name in family_modules(package):
        file = shown_file(package, package_name, name)
        try:
            module = importlib.import_module(f"{package_name}.{name}")
            if getattr(module, "annotations", None) is __future__.annotations:
                raise FamilyError(
                    f"{file}: remove `from __future__ import annotations`: it turns every annotation into a string, "
                    "and TileLang resolves a kernel's `T.Tensor(...)` annotations from those strings, so a kernel "
                    "whose shapes use names local to its factory fails to trace with NameError"
                )
            family = getattr(module, "FAMILY", None)
            if not isinstance(family, Family):
                raise FamilyError(
                    f"{file}: a family module must define FAMILY = Family(...) (found {type(family).__name__}); "
                    "start the file name with `_` if it is not a family"
                )
            if name in taken:
                raise FamilyError(
                    f"{file}: family {name!r} is also {taken[name]}; snapshots live under golden/<name>/, so a name "
                    "is one family in a run: rename one module"
                )
            if family.name != name:
                raise FamilyError(
                    f"{file}: FAMILY.name is {family.name!r}; it must be the module's name, {name!r}, "
                    "because snapshots live under golden/<name>/"
                )
        except FamilyError as error:
            broken.append(BrokenFamily(name, file, str(error)))
            continue
        except Exception as error:  # a family file that does not import must not stop the others
            where = traceback.extract_tb(error.__traceback__)[-1]
            broken.append(
                BrokenFamily(
                    name,
                    file,
                    f"{file}: importing it raised {type(error).__name__}: {error} "
                    f"(at {Path(where.filename).name}:{where.lineno}); fix the file and rerun",
                )
            )
            continue
        object.__setattr__(family, "file", file)
        object.__setattr__(family, "package", package_name)
        families.append(family)
    return Registry(tuple(families), tuple(broken))
