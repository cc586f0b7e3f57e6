"""What a GPU run runs on the device at hand, and what it leaves out with why: every selected variant is in exactly
one of the two, and a run that runs nothing stops (NothingToRun) rather than pass."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tilelang_golden.catalog.cases import Case
from tilelang_golden.family import Family
from tilelang_golden.gpu.report.results import SnapshotCheck, fits_in
from tilelang_golden.gpu.run.compile import CompiledCase
from tilelang_golden.gpu.run.device import Device

Log = Callable[[str], None]


class NothingToRun(RuntimeError):
    """No selected variant runs on this device's target: a run that checks nothing must not pass."""


def device_selection(families: Sequence[Family], target: str) -> tuple[list[Case], dict[str, str]]:
    """What a GPU run on a device of `target` runs, and what it leaves out with why: every variant of the families
    is in exactly one of the two. Left out: the variants of a family that does not declare the target, and those
    declared not to lower on it (their snapshot is the error, there is no kernel to run)."""
    cases: list[Case] = []
    left_out: dict[str, str] = {}
    for family in families:
        for variant in family.variants:
            case = Case(family, variant, target)
            if target not in family.target_names:
                left_out[case.key] = (
                    f"{family.file} declares targets {list(family.target_names)} and this device is {target}"
                )
            elif case.does_not_lower is not None:
                left_out[case.key] = f"{case.not_lowering_note}, as {family.file} declares"
            else:
                cases.append(case)
    return cases, left_out


def not_runnable(compiled: CompiledCase, snapshot: SnapshotCheck, limit_bytes: int) -> str | None:
    """Why a selected variant, once compiled, is not run on a device allowing `limit_bytes` of shared memory per
    block; None when it is run. Not run: it did not compile, it has no static snapshot for the device's target or
    disagrees with it (tilelang_golden.gpu.snapshot_agreement), or it needs more shared memory than the device
    allows. With device_selection, the one rule of what a GPU run runs."""
    if compiled.error:
        return f"did not compile: {compiled.error}"
    if snapshot.failures:
        return "; ".join(snapshot.failures)
    if not fits_in(compiled, snapshot, limit_bytes):
        return "does not fit in this GPU's shared memory"
    return None


def device_cases(families: Sequence[Family], target: str) -> list[Case]:
    """The variants a run on a device of `target` runs (device_selection's first half)."""
    return device_selection(families, target)[0]


def not_run_on(families: Sequence[Family], target: str) -> dict[str, str]:
    """family/variant -> why a run on `target` leaves it out: what the report lists and counts, never as a pass."""
    return device_selection(families, target)[1]


def selection_stage(
    device: Device,
    select: Callable[[Device], Sequence[Case]],
    not_run: Callable[[Device], Mapping[str, str]],
    log: Log,
) -> tuple[list[Case], dict[str, str]]:
    """What runs on `device` and what is left out with why, both logged; NothingToRun when nothing does."""
    cases = list(select(device))
    left_out = dict(not_run(device))
    log(f"device: {device.name} ({device.reports} -> {device.target})")
    for key, why in left_out.items():
        log(f"not run: {key}: {why}")
    if not cases:
        raise NothingToRun(
            f"no selected variant runs on {device.name} ({device.target})"
            + (f"; {len(left_out)} not run here, each listed above with why" if left_out else "")
        )
    return cases, left_out
