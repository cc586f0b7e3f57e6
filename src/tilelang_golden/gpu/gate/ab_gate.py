"""The A/B gate: the pull request's kernel against the base's, timed side by side in one run (`--against`).

A changed variant's rounds of time ratios (its ms over the base kernel's): AB_WARN_SLOWER slower warns, AB_FAIL_SLOWER
slower fails when a second, independent measurement agrees; AB_WARN_SLOWER faster is reported as faster.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tilelang_golden.gpu.gate.timing_gate import FAIL, OK, WARN

# Measured by benchmarks/timing.py on the H200 (docs/gpu.md, "The A/B gate"): interleaved, one process, one GPU.
AB_WARN_SLOWER = 0.01
AB_FAIL_SLOWER = 0.02
FASTER = "faster"  # an A/B level besides OK, WARN and FAIL: at least AB_WARN_SLOWER less time than the base


@dataclass(frozen=True)
class AbVerdict:
    """The A/B gate's word on one changed variant, from the rounds' time ratios (the PR's ms over the base's)."""

    variant: str
    level: str  # OK | WARN | FAIL | FASTER
    rounds: tuple[float, ...]  # each round's time ratio, PR over base
    again: tuple[float, ...] = ()  # the confirming measurement's, when one was made
    message: str = ""

    @property
    def slower_by(self) -> float:
        """The median round's time ratio minus 1: 0.02 = 2 % slower than the base, negative = faster."""
        return slower_than_base(self.rounds)

    @property
    def spread(self) -> float:
        """(max - min) / median of the rounds' time ratios: the noise the verdict was made under."""
        median = statistics.median(self.rounds)
        return (max(self.rounds) - min(self.rounds)) / median


@dataclass(frozen=True)
class AbComparison:
    """Every changed variant's A/B verdict against the base commit, and what was not compared, with why."""

    base: str  # `REF (sha)`, as the report names it
    verdicts: dict[str, AbVerdict] = field(default_factory=dict)
    not_compared: dict[str, str] = field(default_factory=dict)  # variant -> why (new, base not built, failed ...)
    unchanged: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)

    def of_level(self, level: str) -> list[AbVerdict]:
        return [v for v in self.verdicts.values() if v.level == level]


def slower_than_base(rounds: Sequence[float]) -> float:
    return statistics.median(rounds) - 1.0


def ab_suspected(rounds: Sequence[float]) -> bool:
    """Slow enough to fail if a second, independent measurement agrees."""
    return slower_than_base(rounds) >= AB_FAIL_SLOWER


def judge_ab(variant: str, rounds: Sequence[float], again: Sequence[float] = ()) -> AbVerdict:
    """One changed variant: `rounds` its first measurement, `again` the confirming one (made only for a suspect)."""
    rounds, again = tuple(rounds), tuple(again)
    slower = slower_than_base(rounds)
    if ab_suspected(rounds) and again and ab_suspected(again):
        message = (
            f"{slower:.1%} slower than the base, confirmed by a second measurement ({slower_than_base(again):.1%}; "
            f"fail from {AB_FAIL_SLOWER:.0%})"
        )
        return AbVerdict(variant, FAIL, rounds, again, message)
    if ab_suspected(rounds):
        again_text = f"{slower_than_base(again):.1%} on a second measurement" if again else "not measured again"
        message = f"{slower:.1%} slower than the base at first, {again_text}: not confirmed, so a warning"
        return AbVerdict(variant, WARN, rounds, again, message)
    if slower >= AB_WARN_SLOWER:
        message = f"{slower:.1%} slower than the base (warn from {AB_WARN_SLOWER:.0%}, fail from {AB_FAIL_SLOWER:.0%})"
        return AbVerdict(variant, WARN, rounds, message=message)
    if slower <= -AB_WARN_SLOWER:
        return AbVerdict(variant, FASTER, rounds, message=f"{-slower:.1%} faster than the base")
    return AbVerdict(variant, OK, rounds)


def compare_ab(
    base: str,
    first: Mapping[str, Sequence[float]],
    confirm: Callable[[Sequence[str]], Mapping[str, Sequence[float]]],
    *,
    not_compared: Mapping[str, str] | None = None,
    unchanged: Sequence[str] = (),
    gone: Sequence[str] = (),
) -> AbComparison:
    """The A/B gate on every measured variant (`first`: variant -> its rounds' time ratios); `confirm` measures the
    suspects again, independently, and is asked only about them."""
    suspects = [variant for variant, rounds in first.items() if ab_suspected(rounds)]
    again = confirm(suspects) if suspects else {}
    verdicts = {variant: judge_ab(variant, rounds, again.get(variant, ())) for variant, rounds in first.items()}
    return AbComparison(base, verdicts, dict(not_compared or {}), list(unchanged), list(gone))
