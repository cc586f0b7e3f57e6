"""The GPU check's gate, all of it: what fails a variant, what fails a run, and when a slower ratio is a regression.

A variant fails on a compile error, a missing or disagreeing static snapshot, a family callable
that raised, a numeric failure, or a timing regression confirmed by re-measurement. A variant
whose shared memory exceeds what the device allows per block "does not fit": it is neither run
nor counted as a pass, and it does not fail the gate, because the static snapshots cover targets
(sm_90 covers H100 and H200 alike), not one card's limit, and seed 01 sweeps num_stages precisely
to show where a tile shape stops fitting. A run passes when something passed, nothing failed and
the timing baseline, if there is one, could be read.

Timing: each variant's ratio to its reference (harness.gpu.timing) against the committed baseline
of this GPU model (harness.gpu.baseline reads the file). More than WARN_SLOWER more time per unit
of the reference than the baseline warns; more than FAIL_SLOWER fails, but only if a
re-measurement confirms it. No baseline for this GPU, or one recorded under another key: the
timings are reported only. docs/gpu.md ("How sharp the gate is") says how the levels were chosen;
scripts/bench_timing.py measures them again.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.gpu.baseline import RECORD_COMMAND, Baseline, key_differences
from harness.gpu.numerics import NumericsResult
from harness.gpu.timing import slower_by

# Measured by scripts/bench_timing.py on the H200 (docs/gpu.md, "How sharp the gate is").
WARN_SLOWER = 0.03
FAIL_SLOWER = 0.04

# A variant's status, and (OK, WARN, FAIL, NEW) the level of its timing verdict.
PASS, FAIL, DOES_NOT_FIT = "pass", "fail", "does not fit"
OK, WARN, NEW = "ok", "warn", "new"
# A Comparison's status: what the run's timings were held against.
COMPARED, MISSING, KEY_MISMATCH, RECORDED, CORRUPT = "compared", "missing", "key mismatch", "recorded", "corrupt"

# variant keys -> their re-measured ratios
Remeasure = Callable[[Sequence[str]], Mapping[str, float]]


@dataclass(frozen=True)
class Verdict:
    """The timing gate's word on one variant's ratio."""

    variant: str
    level: str  # OK | WARN | FAIL | NEW
    ratio: float
    baseline_ratio: float | None = None
    remeasured_ratio: float | None = None
    message: str = ""

    @property
    def slower_by(self) -> float | None:
        return None if self.baseline_ratio is None else slower_by(self.ratio, self.baseline_ratio)


@dataclass(frozen=True)
class Comparison:
    status: str  # COMPARED | MISSING | KEY_MISMATCH | RECORDED | CORRUPT
    path: str
    message: str
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    not_checked: list[str] = field(default_factory=list)  # in the baseline, absent from this run

    def of_level(self, level: str) -> list[Verdict]:
        return [v for v in self.verdicts.values() if v.level == level]


def suspected(ratio: float, baseline_ratio: float) -> bool:
    """Slow enough that only a re-measurement can tell a regression from noise."""
    return slower_by(ratio, baseline_ratio) > FAIL_SLOWER


def judge(variant: str, ratio: float, baseline_ratio: float, again: float | None = None) -> Verdict:
    """One ratio against its baseline entry; `again` is the re-measured ratio of a suspect (None: not re-measured)."""
    first = slower_by(ratio, baseline_ratio)
    than = f"slower than the baseline ratio {baseline_ratio:.3f}"
    if first <= WARN_SLOWER:
        return Verdict(variant, OK, ratio, baseline_ratio)
    if not suspected(ratio, baseline_ratio):
        message = f"{first:.1%} {than} (warn above {WARN_SLOWER:.0%})"
        return Verdict(variant, WARN, ratio, baseline_ratio, message=message)
    if again is not None and suspected(again, baseline_ratio):
        message = (
            f"{first:.1%} {than}, confirmed by a re-measurement ({slower_by(again, baseline_ratio):.1%} slower; "
            f"fail above {FAIL_SLOWER:.0%})"
        )
        return Verdict(variant, FAIL, ratio, baseline_ratio, again, message)
    again_text = "no re-measurement" if again is None else f"{slower_by(again, baseline_ratio):.1%} on re-measurement"
    message = f"{first:.1%} {than} at first, {again_text}: not confirmed, so a warning"
    return Verdict(variant, WARN, ratio, baseline_ratio, again, message)


def compare(
    baseline: Baseline | None,
    path: Path | str,
    key: Mapping[str, str],
    ratios: Mapping[str, float],
    remeasure: Remeasure,
    problems: Mapping[str, str] | None = None,
) -> Comparison:
    """The timing gate for every measured ratio; `remeasure` is asked only about suspected failures.

    `problems`: variant -> the problem it was measured at; a ratio recorded at another one is not compared."""
    if baseline is None:
        return Comparison(
            MISSING,
            str(path),
            f"no timing baseline for {key['gpu']} ({path}): timings are reported only. "
            f"Record one on this GPU with `{RECORD_COMMAND}` and commit it.",
        )
    differing = key_differences(baseline, key)
    if differing:
        return Comparison(
            KEY_MISMATCH,
            str(path),
            f"{path} was recorded under another key ({'; '.join(differing)}): ratios are not compared, "
            f"timings are reported only. Record a baseline for this setup with `{RECORD_COMMAND}`.",
        )
    new: dict[str, Verdict] = {}
    for variant, ratio in ratios.items():
        recorded, now = baseline.problems.get(variant), (problems or {}).get(variant)
        if variant not in baseline.ratios:
            new[variant] = Verdict(variant, NEW, ratio, message="no baseline entry yet")
        elif recorded is not None and now is not None and recorded != now:
            message = f"problem changed ({recorded} -> {now}): not compared; record again"
            new[variant] = Verdict(variant, NEW, ratio, message=message)
    compared = {variant: ratio for variant, ratio in ratios.items() if variant not in new}
    suspects = [variant for variant, ratio in compared.items() if suspected(ratio, baseline.ratios[variant])]
    remeasured = remeasure(suspects) if suspects else {}
    judged = {v: judge(v, ratio, baseline.ratios[v], remeasured.get(v)) for v, ratio in compared.items()}
    verdicts = {variant: judged.get(variant) or new[variant] for variant in ratios}  # in the run's order
    levels = [v.level for v in judged.values()]
    fails, warns = levels.count(FAIL), levels.count(WARN)
    message = (
        f"compared with {path}: {fails} confirmed regressions, {warns} warnings, "
        f"{len(verdicts) - fails - warns} within limits or new"
    )
    return Comparison(COMPARED, str(path), message, verdicts, sorted(set(baseline.ratios) - set(ratios)))


@dataclass(frozen=True)
class VariantVerdict:
    """The gate's word on one variant: its status and what fails it."""

    status: str  # PASS | FAIL | DOES_NOT_FIT
    problems: tuple[str, ...]  # everything that fails it; empty unless the status is FAIL
    timing: Verdict | None  # the timing gate's verdict, when its ratio was compared


def judge_variant(
    problems: Sequence[str],
    fits: bool,
    numerics: NumericsResult | None,
    timing: Verdict | None,
    ab: AbVerdict | None = None,
) -> VariantVerdict:
    """`problems`: what failed before numerics (compilation, snapshot, the family's own calls); `timing` the
    baseline's verdict, `ab` the A/B gate's."""
    found = [*problems, *(numerics.problems() if numerics is not None else [])]
    if timing is not None and timing.level == FAIL:
        found.append(f"timing: {timing.message}")
    if ab is not None and ab.level == FAIL:
        found.append(f"timing against the base: {ab.message}")
    if found:
        status = FAIL
    elif not fits:
        status = DOES_NOT_FIT
    else:  # a fitting variant that was never checked has not passed
        status = PASS if numerics is not None and numerics.passed else FAIL
    return VariantVerdict(status, tuple(found), timing)


def run_passes(statuses: Iterable[str], comparison: Comparison | None) -> bool:
    """Something was checked, nothing failed, and the baseline (if any) could be read."""
    statuses = list(statuses)
    readable = comparison is None or comparison.status != CORRUPT
    return PASS in statuses and FAIL not in statuses and readable


# -- the A/B gate: the pull request's kernel against the base's, timed side by side in one run -----------------

# Measured by scripts/bench_timing.py on the H200 (docs/gpu.md, "The A/B gate"): interleaved, one process, one GPU.
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
