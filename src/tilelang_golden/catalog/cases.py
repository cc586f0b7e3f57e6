"""The unit of work: one variant lowered for one target, and how a run selects cases (its shards: catalog.shards)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tilelang_golden.catalog.loading import Registry
from tilelang_golden.family import Family, Variant


@dataclass(frozen=True)
class Case:
    """One snapshot: a variant of a family lowered for a target, with the parameters it has there
    (`Variant.on_target`)."""

    family: Family = field(compare=False, repr=False)
    variant: Variant = field(compare=False, repr=False)
    target: str = field(compare=False)
    id: str = field(init=False)  # `family/variant/target`: its snapshots' path, no suffix (static.kinds names them)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", f"{self.family.name}/{self.variant.name}/{self.target}")
        object.__setattr__(self, "variant", self.variant.on_target(self.target))  # its parameters for this target

    @property
    def key(self) -> str:
        """`family/variant`: the variant across targets (the GPU report's and baseline's name)."""
        return f"{self.family.name}/{self.variant.name}"

    @property
    def does_not_lower(self) -> str | None:
        """Why the variant does not lower on this target, as its family declares; None when it should lower."""
        return self.variant.does_not_lower.get(self.target)

    @property
    def not_lowering_note(self) -> str:
        """`does not lower on <target>: <reason>`: how checks that leave the case out say so."""
        return f"does not lower on {self.target}: {self.does_not_lower}"

    @property
    def params(self) -> dict[str, Any]:
        return self.family.params(self.variant)

    @property
    def group(self) -> str:
        return self.family.group_of(self.variant, self.target)


def family_cases(family: Family, targets: Sequence[str] | None = None) -> tuple[Case, ...]:
    """Every variant of one family for the given targets that it declares (default: every target it declares)."""
    chosen = [t for t in family.target_names if targets is None or t in targets]
    return tuple(Case(family, v, t) for v in family.variants for t in chosen)


def lowering_cases(family: Family) -> tuple[Case, ...]:
    """The family's cases that are expected to lower: what its checks and its summary compare."""
    return tuple(case for case in family_cases(family) if case.does_not_lower is None)


def not_lowering_cases(family: Family) -> tuple[Case, ...]:
    """The family's cases declared not to lower (`Variant.does_not_lower`): snapshotted as their error."""
    return tuple(case for case in family_cases(family) if case.does_not_lower is not None)


def all_cases(registry: Registry) -> tuple[Case, ...]:
    """Every variant of every loadable family for every target it declares, family by family."""
    return tuple(case for family in registry.families for case in family_cases(family))


def check_groups(registry: Registry) -> dict[str, tuple[Family, list[Case]]]:
    """group -> (family, its cases), for every family that declares checks: what each check run sees
    (cases declared not to lower left out: they have no facts)."""
    groups: dict[str, tuple[Family, list[Case]]] = {}
    for family in registry.families:
        if family.checks is not None:
            for case in lowering_cases(family):
                groups.setdefault(case.group, (family, []))[1].append(case)
    return groups
