"""How sharp the numeric gate is, measured: no false alarm on the unmodified kernels, and mutants it must fail.

    python3 -m benchmarks.numerics [--count 20 | --seeds S S S ...] [--select GLOB ...]

Compiles every registered variant that `nox -s gpu` runs on this GPU (tilelang_golden.gpu.selection's rule: its
target, it lowers, it agrees with its static snapshot in golden/, it fits) once and checks it
(tilelang_golden.gpu.measure.numerics.check_numerics) on `--count` fresh seeds, printed so that `--seeds` replays them.
Then prints:
1. no false alarm: per family, variant and output, over the seeds, each statistic in the units of its threshold
   (`ErrorStats.against`, tilelang_golden.gpu.gate.numerics_gate.Thresholds): the kernel's max and mean abs error over
   the precision twin's, its |bias| and |scale| beyond the twin's in the twin's mean abs errors (relative ones for the
   scale), each as min / median / max; and the most of a bound any seed took, with its seed. Then every failure.
2. sensitivity: per family, on its first variant, mutants of the kernel's returned first output (applied in place,
   so they round once more to the output's dtype) and one of an intermediate, made through an input (MUTANTS and
   INTERMEDIATE_FACTOR say how); each on every seed, judged by today's gate (the Tolerance alone) and the new
   one: a table of mutant x family with the seeds each failed.
3. cost: the numeric check of every variant on three of the seeds with and without the precision twins.
Exit status: 0 when no unmodified variant failed and the new gate failed every mutant on every seed, 1 otherwise,
2 without a CUDA GPU or nvcc. Needs no baseline and writes no file.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tilelang_golden.gpu.gate.numerics_gate import MIN_SEEDS

DEFAULT_COUNT = 20
COST_SEEDS = 3

# How a mutant changes one case: the kernel, its inputs or what they are compared with.
Change = Callable[[Any], Any]  # NumericsCase -> NumericsCase


@dataclasses.dataclass(frozen=True)
class Mutant:
    name: str
    what: str  # in words, for the table
    change: Change


def rows(tensor: Any) -> Any:
    """A view of the tensor as rows: every dimension but the last flattened (a 1-D tensor: one element a row)."""
    return tensor.view(-1, tensor.shape[-1]) if tensor.dim() > 1 else tensor.view(-1, 1)


def on_output(edit: Callable[[Any], Any]) -> Change:
    """The kernel as it is, then `edit` on its first output's rows, in place: the output stays in the memory the
    gate poisoned, as a wrong kernel's would."""

    def change(case: Any) -> Any:
        def run(*inputs: Any) -> Any:
            returned = case.run(*inputs)
            edit(rows(returned[0] if isinstance(returned, (list, tuple)) else returned))
            return returned

        return dataclasses.replace(case, run=run)

    return change


def on_input(index: int, factor: float) -> Change:
    """The kernel runs on input `index` times `factor` (rounded to its dtype), while the reference and the precision
    twin get the inputs as drawn. The changed input is made with the others, before the gate poisons the outputs'
    memory, so the kernel's outputs still land there."""

    def change(case: Any) -> Any:
        family, drawn = case.family, []

        def inputs(params: Any, generator: Any, device: str) -> list[Any]:
            drawn[:] = family.inputs(params, generator, device)
            return [tensor * factor if i == index else tensor for i, tensor in enumerate(drawn)]

        def of_drawn(op: Callable[..., Any] | None) -> Callable[..., Any] | None:
            return None if op is None else (lambda params, *_: op(params, *drawn))

        mutated = dataclasses.replace(
            family,
            inputs=inputs,
            reference=of_drawn(family.reference),
            precision_twin=of_drawn(family.precision_twin_op()),
        )
        return dataclasses.replace(case, family=mutated)

    return change


# Generic, on every family's first output.
MUTANTS = [
    Mutant("scale 0.995", "first output x 0.995", on_output(lambda r: r.mul_(0.995))),
    Mutant(
        "one wrong row", "the middle row of the first output x 1.01", on_output(lambda r: r[len(r) // 2].mul_(1.01))
    ),
    Mutant("skipped last tile", "the first output's last 64 rows x 0.98", on_output(lambda r: r[-64:].mul_(0.98))),
]

# An intermediate 0.5 % off, made through the first input whose exact scaling by this factor moves the reference by
# at least MOVES (mean abs change over mean |ref|): a GEMM's A (the accumulator, as a wrong alpha would make it), the
# logits of a row-wise exp-normalization or an attention's Q (its temperature); a norm's X does not move its output
# and is passed over for its weight W (the normalizer 0.5 % off: RMSNorm's rsqrt as a mean of squares 1 % small makes
# it, LayerNorm's rstd where Y is made). docs/gpu.md says what it is for each family.
INTERMEDIATE_FACTOR = 1.005
MOVES = 1e-3


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=f"python -m benchmarks.{Path(__file__).stem}", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT, help="fresh seeds (default: %(default)s)")
    parser.add_argument("--seeds", type=int, nargs="+", help="these seeds instead (replays a run)")
    parser.add_argument("--select", action="append", metavar="GLOB", help="only variants matching family/name")
    options = parser.parse_args(argv)
    if (len(set(options.seeds)) if options.seeds else options.count) < MIN_SEEDS:
        parser.error(f"the numeric gate needs at least {MIN_SEEDS} distinct seeds")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    from tilelang_golden.gpu.run.device import gpu_unavailable

    problem = gpu_unavailable()  # before TileLang's slow import and before compiling anything
    if problem:
        print(f"benchmarks.numerics: {problem}", file=sys.stderr)
        return 2
    from tilelang_golden.gpu.measure.numerics import check_numerics, fresh_seeds

    started = time.perf_counter()
    seeds = options.seeds or fresh_seeds(options.count)
    cases, skipped = runnable_cases(options.select)
    print(f"{len(cases)} variants compiled; seeds (replay with --seeds): {' '.join(map(str, seeds))}")
    print("".join(f"not checked: {line}\n" for line in skipped), end="")

    results = check_numerics(cases, seeds)
    lines, alarms = no_false_alarm(results)
    print("\n## 1. No false alarm: unmodified variants\n\n" + "\n".join(lines))

    lines, missed = sensitivity(first_variants(cases), seeds)
    print("\n## 2. Sensitivity: mutants\n\n" + "\n".join(lines))

    print("\n## 3. Cost\n\n" + cost(cases, seeds[:COST_SEEDS]))
    print(f"\nbenchmark wall time {time.perf_counter() - started:.0f} s")
    return 0 if not alarms and not missed else 1


def runnable_cases(select: Sequence[str] | None, golden: Path = Path("golden")) -> tuple[list[Any], list[str]]:
    """Every selected variant a GPU check would run on this GPU, compiled, as the gate's cases; and why the others
    are not (tilelang_golden.gpu.check's rule)."""
    import torch

    from tilelang_golden.family import load_families
    from tilelang_golden.gpu.check import check_snapshot, device_cases, not_runnable
    from tilelang_golden.gpu.pairs import numerics_case
    from tilelang_golden.gpu.run.compile import compile_cases, read_driver_resources
    from tilelang_golden.gpu.run.device import require_cuda
    from tilelang_golden.static.snapshots.snapshot import SnapshotStore

    device = require_cuda()
    store = SnapshotStore(golden)
    chosen = [
        case for case in device_cases(load_families().families, device.target)
        if not select or any(fnmatch.fnmatchcase(case.key, pattern) for pattern in select)
    ]  # fmt: skip
    compiled = compile_cases(chosen)
    torch.empty(1, device="cuda")  # the CUDA context, before asking the driver about kernels
    cases, skipped = [], [f"{broken.file}: {broken.error}" for broken in load_families().broken]
    for built in compiled:
        if not built.error:
            read_driver_resources(built)
        source = None if built.kernel is None else built.kernel.kernel_source
        why = not_runnable(built, check_snapshot(built, source, store), device.shared_memory_per_block_bytes)
        if why:
            skipped.append(f"{built.case.key}: {why}")
        else:
            cases.append(numerics_case(built))
    return cases, skipped


def spread(values: Sequence[float]) -> str:
    return f"{min(values):.3g} / {statistics.median(values):.3g} / {max(values):.3g}"


def no_false_alarm(results: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The distributions' table and the failures (each a line)."""
    from tilelang_golden.gpu.gate.numerics_gate import NAMES, STATISTICS, THRESHOLDS

    limits = {
        "max_abs": f"max abs error / twin's (<= {THRESHOLDS.max_factor:g})",
        "mean_abs": f"mean abs error / twin's (<= {THRESHOLDS.mean_factor:g})",
        "bias": f"|bias| beyond twin's, in its mean abs errors (<= {THRESHOLDS.bias_fraction:g})",
        "scale": f"|scale| beyond twin's, in its relative mean abs errors (<= {THRESHOLDS.scale_fraction:g})",
    }
    lines = [
        "Each statistic over the seeds as min / median / max, floors aside; last, the most of a bound (floors "
        f"included: {THRESHOLDS.floor:g} of mean |ref|) any seed took: over 100 % fails.",
        "",
        "| variant | output | " + " | ".join(limits[name] for name in STATISTICS) + " | most of a bound |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, result in results.items():
        for index, output in enumerate(result.outputs):
            checked = [(s.seed, s.outputs[index]) for s in result.seeds if len(s.outputs) > index]
            compared = [(seed, o) for seed, o in checked if o.errors is not None and o.twin is not None]
            if not compared:
                lines.append(f"| {key} | {output.name} | " + " | ".join("—" for _ in STATISTICS) + " | no twin |")
                continue
            units = [o.errors.against(o.twin) for _, o in compared]
            seed, worst = max(compared, key=lambda found: found[1].tightest[1])
            name, fraction = worst.tightest
            cells = [spread([u[statistic] for u in units]) for statistic in STATISTICS]
            lines.append(
                f"| {key} | {output.name} | " + " | ".join(cells) + f" | {fraction:.0%} {NAMES[name]}, seed {seed} |"
            )
    alarms = [f"{key}: {failure}" for key, result in results.items() for failure in result.failures()]
    lines += ["", f"{sum(r.passed for r in results.values())}/{len(results)} variants passed every seed."]
    lines += [f"- FALSE ALARM {line}" for line in alarms]
    return lines, alarms


def sensitivity(cases: Sequence[Any], seeds: Sequence[int]) -> tuple[list[str], list[str]]:
    """The mutant x family table, and the mutants the new gate let through on some seed."""
    from tilelang_golden.gpu.measure.numerics import check_numerics

    lines = [
        "| mutant | variant | today's gate (Tolerance alone): seeds failed | new gate: seeds failed | failed by |",
        "|---|---|---|---|---|",
    ]
    intermediates = {case.key: intermediate(case, seeds[0]) for case in cases}
    rounds = [[(mutant, case) for case in cases] for mutant in MUTANTS]
    rounds.append([(intermediates[case.key], case) for case in cases if intermediates[case.key]])
    missed = []
    for pairs in rounds:
        results = check_numerics([mutant.change(case) for mutant, case in pairs], seeds)
        for mutant, case in pairs:
            checked = results[case.key].seeds
            old, new = sum(not s.within_tolerance for s in checked), sum(not s.passed for s in checked)
            reasons = sorted({reason for s in checked for reason in failed_by(s)})
            lines.append(
                f"| {mutant.name}: {mutant.what} | {case.key} | {old}/{len(checked)} | {new}/{len(checked)} "
                f"| {', '.join(reasons) or '—'} |"
            )
            if new < len(checked):
                missed.append(f"{mutant.name} on {case.key}")
    lines += ["", f"Let through on some seed by the new gate: {', '.join(missed) or 'none'}."]
    lines += [
        f"No intermediate mutant for {key}: no input moves its output." for key, m in intermediates.items() if not m
    ]
    return lines, missed


def intermediate(case: Any, seed: int, device: str = "cuda") -> Mutant | None:
    """The intermediate mutant of a case: the first input that moves its reference, scaled; None if none does."""
    from tilelang_golden.gpu.measure.numerics import make_inputs

    family, params = case.family, case.params
    inputs = make_inputs(family, params, seed, device)
    names = [a.name or str(i) for i, a in enumerate(case.arguments) if i not in case.outputs]

    def first_output(tensors: Sequence[Any]) -> Any:
        produced = family.reference(params, *tensors)
        return (produced[0] if isinstance(produced, (tuple, list)) else produced).double()

    drawn = first_output(inputs)
    for index, tensor in enumerate(inputs):
        if not tensor.is_floating_point():
            continue
        # Scaled exactly, in float32: rounded to a bf16 input's dtype, a norm's X would move its output by the
        # rounding alone. (The references upcast their inputs anyway.)
        changed = [t.float() * INTERMEDIATE_FACTOR if i == index else t for i, t in enumerate(inputs)]
        if float((first_output(changed) - drawn).abs().mean() / drawn.abs().mean()) >= MOVES:
            what = f"{names[index]} x {INTERMEDIATE_FACTOR:g}, the first input that moves the output"
            return Mutant("intermediate", what, on_input(index, INTERMEDIATE_FACTOR))
    return None


def first_variants(cases: Sequence[Any]) -> list[Any]:
    """Each family's first case, in the families' order: what the mutants change."""
    firsts: dict[str, Any] = {}
    for case in cases:
        firsts.setdefault(case.family.name, case)
    return list(firsts.values())


def failed_by(seed: Any) -> list[str]:
    """What failed a seed: its error, the Tolerance, or the statistics beyond their bounds."""
    from tilelang_golden.gpu.gate.numerics_gate import NAMES

    if seed.error:
        return [f"error: {seed.error}"]
    found = [] if seed.within_tolerance else ["Tolerance"]
    return found + [NAMES[name] for output in seed.outputs for name in output.exceeded]


def cost(cases: Sequence[Any], seeds: Sequence[int]) -> str:
    """Wall time of the numeric check with the precision twins and without (each op synchronizes)."""
    from tilelang_golden.gpu.measure.numerics import check_numerics

    alone = [dataclasses.replace(c, family=dataclasses.replace(c.family, precision_twin=None)) for c in cases]
    seconds = {}
    for name, checked in (("without", alone), ("with", cases)):
        started = time.perf_counter()
        check_numerics(checked, seeds)
        seconds[name] = time.perf_counter() - started
    return (
        f"numerics of {len(cases)} variants on {len(seeds)} seeds: {seconds['with']:.1f} s with the precision twins, "
        f"{seconds['without']:.1f} s without ({seconds['with'] / seconds['without'] - 1:+.0%}; the budget is +20 %)"
    )


if __name__ == "__main__":
    sys.exit(main())
