"""What a kernel family declares: `Family`, checked when it is made (tilelang_golden.catalog.loading finds them).

A family is one module of a family package (e.g. `kernels/<name>.py`) holding `FAMILY = Family(...)`: its variants, its
problem shape, how to make inputs, which kernel arguments are outputs, the PyTorch reference and
its tolerance, the PyTorch op it is timed against and the work it does, and optionally checks
that run on fresh facts. The harness reads only these declarations and knows no family by name.
Nothing here imports TileLang or torch: a family's callables do that when they are called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tilelang_golden.contradictions import NAMES as CONTRADICTIONS
from tilelang_golden.family.parts import (
    FROM_INPUTS,
    RETURNED,
    SNAPSHOT_VALUE_FORMS,
    ZEROS,
    Accumulated,
    ByTarget,
    CaseFacts,
    Claim,
    FamilyError,
    OutputKind,
    Params,
    PrecisionBudget,
    Sweep,
    TimingTwin,
    Tolerance,
    Variant,
    Work,
    snapshot_value,
)
from tilelang_golden.regressions import REGRESSION_CLASSES, RegressionClass, class_names, unwritten
from tilelang_golden.targets import TARGETS

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


def _explained(declared: Mapping[str, Any], known: Sequence[str], declares: str, unknown_words: str) -> None:
    """A variant's declaration of names (`declares`: who declares what, in words) names known ones, each with its
    reason in words."""
    unknown = sorted(set(declared) - set(known))
    if unknown:
        raise FamilyError(f"{declares} {unknown}, {unknown_words}")
    unexplained = sorted(name for name, why in declared.items() if unwritten(str(why)))
    if unexplained:
        raise FamilyError(
            f"{declares} {unexplained} without saying why (an empty reason, an `<...>` to fill in or a TODO); give "
            "the reason in words"
        )


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
    # precision: then the Tolerance alone judges.
    precision_twin: Callable[..., Any] | Literal["speed_reference"] | None = SPEED_REFERENCE
    # Optional: the project's targets (tilelang_golden.targets.TARGETS) this family is snapshotted and run on, e.g. a
    # kernel written for one architecture's instructions. Default: all of them.
    targets: Sequence[str] | None = None
    # Optional: the family's own regression classes, besides the built-in ones (tilelang_golden.regressions), found
    # in its cases' changes and acknowledged as they are.
    regressions: Sequence[RegressionClass] = ()
    # Optional: outputs that differ between launches on the same inputs by design (float atomics add in whatever
    # order they land): a reason in words for every output, or {output position: reason}. The GPU check's repeated
    # launches hold every other output to bitwise equality (tilelang_golden.gpu.measure.repeats).
    nondeterministic: str | Mapping[int, str] | None = None
    # Optional: dimensions overriding the shape (and the variants' own) for `tilelang-golden gpu --sanitize`, which
    # runs each variant under compute-sanitizer, orders of magnitude slower; default: the shape itself.
    sanitize_shape: Mapping[str, int] | None = None
    file: str = field(
        default="", compare=False
    )  # its file, as the repository names it (kernels/<name>.py): by discovery
    package: str = field(default="", compare=False)  # the importable package it was found in (`kernels`): by discovery

    def __post_init__(self) -> None:
        """Refuse a declaration that cannot be used, naming the file, the variant and the fix; the first problem
        found is said, in this order."""
        where = self.file or f"kernels/{self.name}.py"
        self._check_variants(where)
        self._check_regression_classes(where)
        for variant in self.variants:
            self._check_variant(variant, where)
        self._check_sweep_and_twin(where)
        self._check_outputs(where)
        self._check_tolerances(where)
        self._check_precision_twin(where)
        self._check_callables(where)
        self._check_nondeterminism(where)
        self._check_sanitize_shape(where)

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

    def _check_regression_classes(self, where: str) -> None:
        """The family's own classes are RegressionClass records whose names the built-in ones do not take."""
        strange = [c for c in self.regressions if not isinstance(c, RegressionClass)]
        if strange:
            raise FamilyError(f"{where}: regressions holds {strange!r}; give RegressionClass records")
        names = class_names(self.regression_classes)
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise FamilyError(
                f"{where}: regression class names {repeated} are taken (built-in: {class_names(REGRESSION_CLASSES)}); "
                "give the family's class another name"
            )

    def _check_variant(self, variant: Variant, where: str) -> None:
        """One variant's declared failures, acknowledgements, dimensions, parameters and comparison."""
        targets = f"which are not targets of this family ({list(self.target_names)})"
        _explained(
            variant.does_not_lower,
            self.target_names,
            f"{where}: variant {variant.name!r} declares it does not lower on",
            targets,
        )
        classes = class_names(self.regression_classes)
        _explained(
            variant.acknowledged_regressions,
            classes,
            f"{where}: variant {variant.name!r} acknowledges regression classes",
            f"which do not exist; the classes are {classes}",
        )
        _explained(
            variant.acknowledged_contradictions,
            CONTRADICTIONS,
            f"{where}: variant {variant.name!r} acknowledges contradictions",
            f"which do not exist; the contradictions are {list(CONTRADICTIONS)}",
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
            by_target = isinstance(value, ByTarget)
            if by_target:
                self._check_by_target(variant, name, value, where)
            for one in (value.default, *value.values.values()) if by_target else (value,):
                try:
                    snapshot_value(one)
                except TypeError as error:
                    raise FamilyError(
                        f"{where}: variant {variant.name!r} passes {name}={one!r}, {error}; the snapshot records "
                        f"every parameter, so give one of: {SNAPSHOT_VALUE_FORMS}"
                    ) from None
        names = [v.name for v in self.variants]
        if variant.compare_with is not None and variant.compare_with not in names:
            raise FamilyError(
                f"{where}: variant {variant.name!r} compares with {variant.compare_with!r}, which is not a "
                f"variant of this family ({names})"
            )

    def _check_by_target(self, variant: Variant, name: str, value: ByTarget, where: str) -> None:
        """A target-dependent parameter maps some of the family's targets to their values."""
        given = f"{where}: variant {variant.name!r} passes {name}=ByTarget(...)"
        if not isinstance(value.values, Mapping):
            raise FamilyError(f"{given} with values {value.values!r}; give a mapping from target to its value")
        unknown = sorted(set(value.values) - set(self.target_names))
        if unknown:
            raise FamilyError(
                f"{given} with values for {unknown}, which are not targets of this family "
                f"({list(self.target_names)}); name only those"
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

    def _check_nondeterminism(self, where: str) -> None:
        """A reason in words for every output, or {output position: reason}, each position a declared output where
        `outputs` declares them (else tilelang_golden.catalog.build checks them against the kernel's)."""
        declared = self.nondeterministic
        what = f"{where}: nondeterministic"
        if declared is None:
            return
        if isinstance(declared, str):
            if unwritten(declared):
                raise FamilyError(
                    f"{what} is {declared!r}; say in words why the outputs differ between launches on the same inputs "
                    "(e.g. 'float atomics add the slices in whatever order they land')"
                )
            return
        positions = list(declared) if isinstance(declared, Mapping) else []
        if not positions or not all(type(p) is int and p >= 0 and isinstance(why, str) for p, why in declared.items()):
            raise FamilyError(
                f"{what} must be a reason in words (every output) or {{output position: reason}}, got {declared!r}"
            )
        known = sorted(self.declared_outputs()) if self.outputs is not None else positions
        _explained(declared, known, f"{what} names positions", f"which are not its outputs {known}")

    def _check_sanitize_shape(self, where: str) -> None:
        """Some of the family's dimensions, each a positive int."""
        small = self.sanitize_shape
        if small is None:
            return
        if not isinstance(small, Mapping) or not small:
            raise FamilyError(f"{where}: sanitize_shape must map some of its dimensions to sizes, got {small!r}")
        unknown = sorted(set(small) - set(self.shape))
        wrong = sorted(name for name, size in small.items() if type(size) is not int or size < 1)
        if unknown or wrong:
            problem = f"names dimensions {unknown} the family does not declare" if unknown else f"sizes {wrong} wrong"
            raise FamilyError(
                f"{where}: sanitize_shape {dict(small)} {problem}; give some of the shape's dimensions "
                f"{sorted(self.shape)} each a positive int, the size `tilelang-golden gpu --sanitize` runs it at"
            )

    @property
    def regression_classes(self) -> tuple[RegressionClass, ...]:
        """The built-in regression classes, then the family's own: what its cases' changes are judged by."""
        return (*REGRESSION_CLASSES, *self.regressions)

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
