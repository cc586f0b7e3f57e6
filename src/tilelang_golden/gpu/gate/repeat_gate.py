"""The repeated-launch gate: a variant launched several times on the same inputs must write the same bits every time;
tilelang_golden.gpu.measure.repeats launches it and fills these records.

A race (a missing barrier, a wait on the wrong phase) or a read of memory nothing wrote can pass the numeric gate by
luck: the wrong interleaving is rare, or the stale value is close to the right one. Its output then changes between
launches on the same inputs, which a correct kernel's never does (its arithmetic runs in a fixed order). An output
whose family declares it nondeterministic (`Family.nondeterministic`: float atomics add in whatever order they land)
is measured and reported, with the declared reason, but not held to bitwise equality.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Launches of each variant on one seed's inputs; 1 turns the check off (nothing to compare).
DEFAULT_LAUNCHES = 10


@dataclass(frozen=True)
class OutputRepeats:
    """One output over the repeats (every launch after the first), each compared bit for bit with the first."""

    name: str
    elements: int
    differing_repeats: int = 0  # repeats whose output differs from the first launch's in any bit
    most_elements: int = 0  # the most elements one repeat changed
    max_abs_difference: float = 0.0  # the largest |repeat - first| over them (inf where a side is NaN or Inf)
    declared: str | None = None  # why the family declares it nondeterministic; None: held to bitwise equality

    @property
    def identical(self) -> bool:
        return self.differing_repeats == 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "output": self.name,
            "elements": self.elements,
            "differing_repeats": self.differing_repeats,
            "most_elements": self.most_elements,
            "max_abs_difference": self.max_abs_difference,
            "declared_nondeterministic": self.declared,
        }


@dataclass
class RepeatCheck:
    """A variant launched `launches` times on seed `seed`'s inputs, each launch from the same initial state."""

    seed: int
    launches: int
    outputs: list[OutputRepeats] = field(default_factory=list)
    error: str | None = None  # the inputs or a launch raised: nothing compared
    seconds: float = 0.0

    @property
    def repeats(self) -> int:
        return self.launches - 1

    @property
    def passed(self) -> bool:
        return not self.failures()

    def failures(self) -> list[str]:
        """Each output that differed without being declared nondeterministic, in words with its figures."""
        if self.error:
            return [f"repeated launches on seed {self.seed}: {self.error}"]
        return [
            f"repeated launches: output {o.name} is not bitwise identical on the same inputs (seed {self.seed}): "
            f"{self.difference(o)}; a race or a read of memory nothing wrote (a correct kernel writes the same bits "
            "every launch), or declare it in Family(nondeterministic=...) with the reason"
            for o in self.outputs
            if not o.identical and o.declared is None
        ]

    def notes(self) -> list[str]:
        """Each output declared nondeterministic: not held to bitwise equality, why, and what was measured."""
        return [
            f"output {o.name} not held to bitwise equality, declared nondeterministic: {o.declared}; "
            + (self.difference(o) if not o.identical else f"identical in all {self.launches} launches anyway")
            for o in self.outputs
            if o.declared is not None
        ]

    def difference(self, output: OutputRepeats) -> str:
        return (
            f"{output.differing_repeats} of {self.repeats} repeats differed from the first launch, in up to "
            f"{output.most_elements} of {output.elements} elements, max abs difference {output.max_abs_difference:.4g}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "launches": self.launches,
            "seconds": round(self.seconds, 3),
            "error": self.error,
            "passed": self.passed,
            "outputs": [o.as_dict() for o in self.outputs],
        }
