"""What a family author writes against: `from tilelang_golden.family import Family, Variant, Tolerance, ...`.

The declaration itself is `core.Family`; its parts (variants, outputs, tolerances, work, claims, sweeps, timing
twins) are in `parts`. A family module imports from here and from tilelang_golden.analysis only."""

from tilelang_golden.family.core import SPEED_REFERENCE, Family
from tilelang_golden.family.parts import (
    FROM_INPUTS,
    RETURNED,
    ZEROS,
    Accumulated,
    ByTarget,
    CaseFacts,
    Chain,
    Claim,
    FamilyError,
    OutputKind,
    Params,
    PrecisionBudget,
    Returned,
    Sweep,
    TimingTwin,
    Tolerance,
    Variant,
    Work,
    Written,
    only_kernel,
    snapshot_params,
    snapshot_value,
    target_record,
    targets_where,
)
from tilelang_golden.regressions import FACTS, MACHINE, Measure, Reading, RegressionClass
from tilelang_golden.targets import Target  # what target_record returns, for a family's type hints

__all__ = [
    "FACTS",
    "MACHINE",
    "Measure",
    "Reading",
    "RegressionClass",
    "Target",
    "Accumulated",
    "ByTarget",
    "CaseFacts",
    "Chain",
    "Claim",
    "FROM_INPUTS",
    "Family",
    "FamilyError",
    "OutputKind",
    "Params",
    "PrecisionBudget",
    "RETURNED",
    "Returned",
    "SPEED_REFERENCE",
    "Sweep",
    "TimingTwin",
    "Tolerance",
    "Variant",
    "Work",
    "Written",
    "ZEROS",
    "only_kernel",
    "snapshot_params",
    "snapshot_value",
    "target_record",
    "targets_where",
]
