"""Seed 01: change `num_stages`, watch the pipeline annotations, buffers and syncs change.

Lowers the `gemm_num_stages` kernel (kernels/gemm_num_stages.py) for each N with the golden
harness (no GPU, no nvcc, for any of the project's targets, CUDA or HIP), prints what
`tl.PipelinePlanning` annotated and what the generated code holds, then checks the seed's
correctness criteria across the N values given. A criterion whose fact the target's facts do not
hold (no cp.async on gfx942, say) is printed as not applicable there, neither passing nor failing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

try:
    from tilelang_golden.static.produce.lowering import tilelang_unavailable
    from tilelang_golden.targets import TARGETS
except ModuleNotFoundError as missing:  # a Python without this project (or without anything installed)
    print(f"cannot import the harness ({missing}): pip install --no-deps -e . -e kernels", file=sys.stderr)
    raise SystemExit(3) from None  # EXIT_CANNOT_RUN

if TYPE_CHECKING:
    from tilelang_golden.family import Claim

REPO = Path(__file__).resolve().parents[1]

EXIT_CRITERION_FAILED = 1
EXIT_BAD_ARGUMENTS = 2
EXIT_CANNOT_RUN = 3
# The seed's target: its criteria describe the cp.async pipeline of sm_80 (Ampere). Every target of
# tilelang_golden.targets.TARGETS can be asked for; on the others the script prints what it observes.
DEFAULT_ARCH = "sm_80"
DEFAULT_TILE = (128, 128, 32)  # the seed's tile; the first of kernels.gemm_num_stages.TILE_SHAPES
PIPELINE_LINES = ("software_pipeline_stage", "software_pipeline_order", "tl_pipelined_num_stages")
# Sync facts only some targets have (absent on the others, so a block leaves them out), as a block names them.
WAIT_LINES = {"cp_async_wait": "cp_async_wait arguments", "vmcnt_waits": "s_waitcnt vmcnt arguments"}
TMA_MACHINERY = {"tma_loads": "TMA loads", "mbarriers": "mbarriers"}
# What the N values given must include for each criterion to be evaluated (same order).
CRITERION_NEEDS = ("an N >= 2", "N = 1", "N = 0", "two N >= 1", "two N >= 1", "two N values")

EPILOG = """\
environment:
  TL_LOWER_TRACE=terminal  print TileLang's per-pass IR diff of every lowering to stdout
  TL_LOWER_TRACE=html      write it as HTML to $TL_LOWER_TRACE_DIR/lower_num_stages/report.html
                           (TL_LOWER_TRACE_DIR defaults to ./tmp/lower_trace_dir, relative to the
                           current directory); report.html links the last lowering, every
                           lowering's own report is under .run_records/ beside it, so trace one N
                           at a time. html mode also keeps codegen.cpp there: TileLang compiles a
                           hand edit of that file instead of what it generated, so delete the
                           folder before trusting the output
exit status:
  0 every evaluated criterion holds (one whose fact the target does not have is not applicable,
  not evaluated); 1 one fails; 2 bad arguments; 3 TileLang (or, for --bench, a CUDA GPU) is
  missing or a kernel does not lower
"""


def parse_tile(text: str) -> tuple[int, int, int]:
    try:
        block_M, block_N, block_K = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected BMxBNxBK, e.g. 128x128x32") from None
    if min(block_M, block_N, block_K) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: tile sizes must be positive")
    return block_M, block_N, block_K


def parse_num_stages(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: num_stages must be an integer >= 0")
    return int(text)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--num-stages",
        nargs="+",
        type=parse_num_stages,
        metavar="N",
        help="values of T.Pipelined(..., num_stages=N) to lower (default: the registered sweep, "
        "NUM_STAGES in kernels/gemm_num_stages.py)",
    )
    parser.add_argument(
        "--arch",
        choices=list(TARGETS),
        default=DEFAULT_ARCH,
        help=f"target to lower for: one of the project's (tilelang_golden/targets.py), gfx* are HIP (default: "
        f"{DEFAULT_ARCH}, whose cp.async pipeline the seed's criteria describe)",
    )
    parser.add_argument(
        "--tile",
        type=parse_tile,
        default=DEFAULT_TILE,
        metavar="BMxBNxBK",
        help=f"block_M x block_N x block_K of the GEMM tile (default: {'x'.join(map(str, DEFAULT_TILE))})",
    )
    parser.add_argument(
        "--dump-dir",
        type=Path,
        metavar="DIR",
        help="write each N's normalized kernel source to DIR/gemm_num_stages_<N>.cu (.hip for a HIP target; "
        "for diff -u)",
    )
    parser.add_argument(
        "--bench",
        action="store_true",
        help="also compile, check and time each N on the local NVIDIA GPU for its own target, whatever "
        "--arch says (the seed's performance section, through the `nox -s gpu` code); registered "
        "variants only; stops with status 3 when there is no CUDA device",
    )
    args = parser.parse_args(argv)
    if args.num_stages is not None:
        args.num_stages = sorted(set(args.num_stages))
    return args


# -- what one lowering shows ------------------------------------------------------------------


def describe(num_stages: int, facts: Mapping[str, Any]) -> list[str]:
    """The report block of one N, read from its extracted facts (the module's one kernel). A fact the target's
    hardware does not have (no TMA on HIP, say) is absent from its facts and left out here, never shown as 0."""
    from tilelang_golden.family import only_kernel

    case = facts["case"]
    target = case["target"]
    where = f"{case['family']}/{case['variant']}/{target}"
    lines = [f"== num_stages = {num_stages}  ({where}) =="]
    facts = only_kernel(facts, where)
    loops = facts["pipelines"]
    if not loops:
        why = " (the loop was warp-specialized before it)" if facts["warp_specialized"] else ""
        lines.append(f"no loop carries a software pipeline annotation after tl.PipelinePlanning{why}")
    for loop in loops:
        if len(loops) > 1:
            lines.append(f"loop {loop['loop_var']}:")
        lines += [f"{key} = {loop[key]}" for key in PIPELINE_LINES]
    tiles = {name: b for name, b in facts["shared_buffers"].items() if b["scope"].startswith("shared.dyn")}
    versions = ", ".join(f"{name} {_versions(b['shape'])} ({b['dtype']}{b['shape']})" for name, b in tiles.items())
    sync = facts["sync"]
    warp_specialized = "yes" if facts["warp_specialized"] else "no"
    waits = [f"{label} = {sync[key]}" for key, label in WAIT_LINES.items() if key in sync]
    machinery = "".join(f"{label} = {sync[key]}, " for key, label in TMA_MACHINERY.items() if key in sync)
    lines += [
        f"version dimension = {versions}",
        f"dynamic shared memory = {facts['dynamic_shared_memory_bytes']} bytes",
        *waits,
        f"__syncthreads() = {sync['syncthreads_main_loop']} in the steady-state loop, "
        f"{sync['syncthreads_elsewhere']} elsewhere",
        f"warp specialized = {warp_specialized}, threads = {facts['launch']['threads'][0]}, "
        f"{machinery}MMA = {', '.join(facts['mma']['families'])}",
    ]
    return lines


def _versions(shape: list[int]) -> str:
    from kernels.gemm_num_stages import version_dimension

    versions = version_dimension(shape)
    return "none" if versions is None else str(versions)


# -- the seed's criteria ------------------------------------------------------------------------


def report_criteria(
    results: list[Claim], num_stages: Sequence[int], absent: Mapping[str, str] | None = None, target: str = ""
) -> tuple[list[str], bool]:
    """PASS/FAIL lines with the observed values, an N/A line per criterion whose fact the target does not
    have (`absent`: criterion -> that fact), a SKIP line per criterion the N values cannot decide, and
    whether every evaluated criterion holds (a criterion not applicable is not a failure)."""
    from kernels.gemm_num_stages import CRITERIA as NUM_STAGES_CRITERIA

    absent = absent or {}
    by_name = {c.name: c for c in results}
    lines = [f"Seed 01 criteria across N = {', '.join(map(str, num_stages))}:"]
    for name, needs in zip(NUM_STAGES_CRITERIA, CRITERION_NEEDS, strict=True):
        criterion = by_name.get(name)
        if name in absent:
            lines.append(f"N/A   {name}  (not applicable on {target}: its facts have no {absent[name]})")
        elif criterion is None:
            lines.append(f"SKIP  {name}  (needs {needs} among --num-stages)")
        else:
            lines.append(f"{'PASS' if criterion.holds else 'FAIL'}  {name}  [{criterion.observed}]")
    failed = [c.name for c in results if not c.holds]
    summary = f"{len(results) - len(failed)} of {len(results)} evaluated criteria hold"
    if absent:
        summary += f", {len(absent)} not applicable on {target}"
    lines.append(summary + (f"; failed: {'; '.join(failed)}" if failed else ""))
    return lines, not failed


def report(facts_by_n: Mapping[int, Mapping[str, Any]]) -> int:
    """Print every N's block and the criteria; the exit status."""
    from kernels.gemm_num_stages import not_applicable, num_stages_criteria
    from tilelang_golden.family import only_kernel

    for n in sorted(facts_by_n):
        print("\n".join(describe(n, facts_by_n[n])))
        print()
    target = next(iter(facts_by_n.values()))["case"]["target"] if facts_by_n else ""
    kernel_by_n = {n: only_kernel(facts, f"num_stages = {n}") for n, facts in facts_by_n.items()}
    lines, passed = report_criteria(
        num_stages_criteria(kernel_by_n), sorted(kernel_by_n), not_applicable(kernel_by_n), target
    )
    print("\n".join(lines))
    return 0 if passed else EXIT_CRITERION_FAILED


# -- running --------------------------------------------------------------------------------------


def lower_all(num_stages: Sequence[int], arch: str, tile: tuple[int, int, int]) -> dict[int, Any]:
    """N -> the harness's Lowering of the GEMM for that N."""
    from kernels.gemm_num_stages import FAMILY, variant
    from tilelang_golden.catalog.cases import Case
    from tilelang_golden.static.session import LoweringSession

    session = LoweringSession()
    return {n: session.lower(Case(FAMILY, variant(n, *tile), arch)) for n in num_stages}


def dump(lowerings: Mapping[int, Any], directory: Path) -> list[Path]:
    """Each N's normalized kernel source, named with its target's suffix (`.cu`, `.hip`)."""
    from tilelang_golden.static.snapshots.normalize import normalize_cuda

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for n, lowering in sorted(lowerings.items()):
        path = directory / f"gemm_num_stages_{n}{TARGETS[lowering.case.target].source_suffix}"
        path.write_text(normalize_cuda(lowering.cuda), encoding="utf-8")
        written.append(path)
    return written


def bench_problem(num_stages: Sequence[int], tile: tuple[int, int, int]) -> str | None:
    """Why --bench cannot run here, checked before any lowering; None when it can."""
    from kernels.gemm_num_stages import FAMILY, variant
    from tilelang_golden.gpu.run.device import NoCudaDevice, UnknownTarget, require_cuda

    registered = {v.name for v in FAMILY.variants}
    unregistered = [name for n in num_stages if (name := variant(n, *tile).name) not in registered]
    if unregistered:
        # The GPU check compares each kernel's shared memory with its static snapshot.
        return (
            f"--bench times registered variants only (each is checked against its snapshot in golden/); "
            f"not registered: {', '.join(unregistered)}. Add them to kernels/gemm_num_stages.py and run "
            "`nox -s regen-golden`, or pick N and --tile from the registered sweep."
        )
    try:
        require_cuda()
    except (NoCudaDevice, UnknownTarget) as error:
        return f"--bench: {error}"
    return None


def bench(num_stages: Sequence[int], tile: tuple[int, int, int]) -> int:
    """The seed's performance section: `nox -s gpu`'s compile, numerics and timing for these N only."""
    from kernels.gemm_num_stages import FAMILY, variant
    from tilelang_golden.catalog.cases import Case
    from tilelang_golden.gpu.check import CheckPlan, check_cases
    from tilelang_golden.gpu.report.report import render_markdown

    run = check_cases(
        CheckPlan(
            lambda device: [Case(FAMILY, variant(n, *tile), device.target) for n in num_stages], golden=REPO / "golden"
        )
    )
    print(render_markdown(run))
    return 0 if run.passed else EXIT_CRITERION_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    problem = tilelang_unavailable()
    if problem:
        print(problem, file=sys.stderr)
        return EXIT_CANNOT_RUN

    import tilelang

    from kernels.gemm_num_stages import FAMILY, NUM_STAGES
    from tilelang_golden.static.produce.facts import extract_facts
    from tilelang_golden.static.produce.lowering import LoweringError

    if args.arch not in FAMILY.target_names:  # a family may narrow the project's targets
        print(f"--arch {args.arch}: {FAMILY.file} declares only targets {list(FAMILY.target_names)}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    num_stages = args.num_stages if args.num_stages is not None else list(NUM_STAGES)
    problem = bench_problem(num_stages, args.tile) if args.bench else None
    if problem:
        print(problem, file=sys.stderr)
        return EXIT_CANNOT_RUN
    block_M, block_N, block_K = args.tile
    print(
        f"TileLang {tilelang.__version__}, target {args.arch}, fp16 GEMM {FAMILY.shape['M']}x{FAMILY.shape['N']}x"
        f"{FAMILY.shape['K']}, tile {block_M}x{block_N}x{block_K}, N = {', '.join(map(str, num_stages))}"
    )
    print()
    try:
        lowerings = lower_all(num_stages, args.arch, args.tile)
    except LoweringError as error:
        print(error, file=sys.stderr)
        return EXIT_CANNOT_RUN
    status = report({n: extract_facts(lowering) for n, lowering in lowerings.items()})
    if args.dump_dir is not None:
        for path in dump(lowerings, args.dump_dir):
            print(f"wrote {path}")
    if args.bench:
        print()
        status = max(status, bench(num_stages, args.tile))
    return status


if __name__ == "__main__":
    sys.exit(main())
