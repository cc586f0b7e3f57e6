"""`tilelang-golden gpu --sanitize`: every variant run under compute-sanitizer's racecheck, synccheck and initcheck, at
its family's small shape (`Family.sanitize_shape`, else its own), and failed where a tool reports a hazard in its
kernels (tilelang_golden.gpu.gate.sanitizer_gate reads the reports).

compute-sanitizer instruments a whole process, one tool at a time, and its reports cannot be told apart by variant
inside one process (TileLang names many kernels alike), so each variant runs in a process of its own per tool, found
by its reference as the check's worker finds it (tilelang_golden.gpu.run.worker): `compute-sanitizer --tool TOOL
--log-file LOG python -m tilelang_golden.gpu.sanitize PACKAGE FAMILY VARIANT TARGET SEED`. That process compiles the
variant at the small shape as the check compiles it, makes the seed's inputs as the numeric check does, launches it
once and names its device kernels on its standard output, before the launch. Several processes run at a time (the
work is mostly compiling); each within `TimeLimits.sanitizer_s`, after which its process group is killed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tilelang_golden.catalog.cases import Case
from tilelang_golden.gpu.gate.sanitizer_gate import TOOLS, SanitizerResult, ToolRun, parse_report
from tilelang_golden.gpu.kernel_session import case_ref, find_case
from tilelang_golden.gpu.run.worker import LIMITS, TAIL_LINES, import_path

EXECUTABLE = "compute-sanitizer"
# Where the CUDA toolkit puts it when it is not on PATH.
TOOLKIT_HOMES = ("CUDA_HOME", "CUDA_PATH")
DEFAULT_TOOLKIT = Path("/usr/local/cuda")
# What the launched process prints before its device kernels' names, one JSON list.
KERNELS_MARK = "sanitized kernels: "
DID_NOT_COMPILE = 3  # its exit status when the variant does not compile at the small shape


def find_sanitizer(environ: Mapping[str, str] = os.environ) -> str | None:
    """compute-sanitizer on PATH, else in the CUDA toolkit ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda); None."""
    found = shutil.which(EXECUTABLE, path=environ.get("PATH"))
    if found:
        return found
    homes = [Path(environ[name]) for name in TOOLKIT_HOMES if environ.get(name)] + [DEFAULT_TOOLKIT]
    return next((str(home / "bin" / EXECUTABLE) for home in homes if (home / "bin" / EXECUTABLE).is_file()), None)


def not_found_message(environ: Mapping[str, str] = os.environ) -> str:
    homes = ", ".join(f"${name}/bin" for name in TOOLKIT_HOMES)
    return (
        f"--sanitize runs every variant under {EXECUTABLE}, which was not found (on PATH, in {homes} or "
        f"{DEFAULT_TOOLKIT}/bin); install the CUDA toolkit's compute-sanitizer or put it on PATH, or drop --sanitize"
    )


def default_jobs() -> int:
    """Processes at a time: each mostly compiles its variant (one core); eight at most share the one GPU."""
    return max(1, min(8, os.cpu_count() or 1))


@dataclass(frozen=True)
class SanitizerPlan:
    """How the pass runs: the executable, its tools, how many processes at a time, and each one's limit."""

    executable: str
    tools: Sequence[str] = TOOLS
    jobs: int = dataclasses.field(default_factory=default_jobs)
    limit_s: float = LIMITS.sanitizer_s


def at_sanitize_shape(case: Case) -> Case:
    """The case at its family's `sanitize_shape` (which overrides the variant's own dimensions too), or itself."""
    small = case.family.sanitize_shape
    if not small:
        return case
    variant = dataclasses.replace(case.variant, shape={k: v for k, v in case.variant.shape.items() if k not in small})
    family = dataclasses.replace(
        case.family,
        shape={**case.family.shape, **small},
        variants=[variant if v.name == variant.name else v for v in case.family.variants],
    )
    return Case(family, variant, case.target)


def sanitize_cases(
    cases: Sequence[Case], plan: SanitizerPlan, seed: int, log: Callable[[str], None] = print
) -> dict[str, SanitizerResult]:
    """Every case under every tool of the plan, `plan.jobs` processes at a time."""
    log(
        f"sanitizer: {len(cases)} variants x {', '.join(plan.tools)} under {plan.executable}, {plan.jobs} processes "
        "at a time, each at its family's sanitize_shape"
    )
    with tempfile.TemporaryDirectory(prefix="tlg-sanitize-") as folder, ThreadPoolExecutor(plan.jobs) as pool:
        runs = {
            (case.key, tool): pool.submit(run_tool, case, tool, seed, plan, Path(folder) / f"{index}.{tool}.log")
            for index, case in enumerate(cases)
            for tool in plan.tools
        }
        results = {}
        for case in cases:
            small = at_sanitize_shape(case)
            found = tuple(runs[case.key, tool].result() for tool in plan.tools)
            results[case.key] = SanitizerResult(small.family.dimensions(small.variant), found)
            if not results[case.key].passed:
                log(f"sanitizer: {case.key} failed under {[r.tool for r in found if r.error or r.findings]}")
    return results


def run_tool(case: Case, tool: str, seed: int, plan: SanitizerPlan, log_file: Path) -> ToolRun:
    """One variant under one tool, in a process of its own; what the tool found in the variant's kernels."""
    command = [plan.executable, "--tool", tool, "--log-file", str(log_file), sys.executable, "-m", __name__]
    command += [*case_ref(case), str(seed)]
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(import_path()), "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    # A session of its own: on timeout the sanitizer and the process it instruments are killed together.
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ, start_new_session=True
        )
    except OSError as error:
        return ToolRun(tool, error=f"{plan.executable} could not be started: {error}")
    try:
        out, err = process.communicate(timeout=plan.limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return ToolRun(tool, error=f"did not finish after {plan.limit_s:.0f} s; it was stopped", seconds=plan.limit_s)
    seconds = time.perf_counter() - started
    return judge_run(tool, process.returncode, out, err, log_file, seconds)


def judge_run(tool: str, status: int, out: str, err: str, log_file: Path, seconds: float) -> ToolRun:
    """What one process's exit status, output and sanitizer log say: its findings, or why it proved nothing."""
    text = log_file.read_text(errors="replace") if log_file.is_file() else ""
    named = [line.removeprefix(KERNELS_MARK) for line in out.splitlines() if line.startswith(KERNELS_MARK)]
    kernels = json.loads(named[-1]) if named else []
    findings, elsewhere, summarized = parse_report(text, kernels)
    tail = " | ".join(line for line in err.splitlines()[-TAIL_LINES:] if line.strip()) or "nothing"
    error = None
    if status == DID_NOT_COMPILE:
        error = f"the variant did not compile at this shape: {tail}"
    elif status != 0:
        how = f"killed by {signal.Signals(-status).name}" if status < 0 else f"exit status {status}"
        error = f"its process ended with {how}; the last lines of its standard error: {tail}"
    elif not summarized:
        shown = " | ".join(text.splitlines()[:TAIL_LINES]) or "no log"
        error = f"compute-sanitizer wrote no summary line, so nothing is proven; its log began: {shown}"
    elif not named:  # no finding could be told to be the variant's
        error = f"its process did not name the variant's kernels ({KERNELS_MARK.strip()} ...) before launching it"
    return ToolRun(tool, tuple(tuple(f) for f in findings), elsewhere, error, seconds)


# -- the process compute-sanitizer instruments ------------------------------------------------------


def main(argv: Sequence[str]) -> int:
    """`python -m tilelang_golden.gpu.sanitize PACKAGE FAMILY VARIANT TARGET SEED`: compile the variant at its small
    shape, name its device kernels, launch it once on the seed's inputs."""
    import torch

    from tilelang_golden.gpu.measure.numerics import prepare
    from tilelang_golden.gpu.pairs import numerics_case
    from tilelang_golden.gpu.run.compile import compile_cases

    *ref, seed = argv
    try:
        compiled = compile_cases([at_sanitize_shape(find_case(tuple(ref)))])[0]
    except Exception:
        traceback.print_exc()
        return DID_NOT_COMPILE
    if compiled.error or compiled.kernel is None:
        print(compiled.error or "no kernel", file=sys.stderr)
        return DID_NOT_COMPILE
    print(KERNELS_MARK + json.dumps(sorted(compiled.launches)), flush=True)
    try:
        case = numerics_case(compiled)
        prepared = prepare(case, int(seed), "cuda", checking=False)
        case.run(*prepared.arguments)
        torch.cuda.synchronize()
    except Exception as error:  # the inputs or the launch: one line, the last of its standard error
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
