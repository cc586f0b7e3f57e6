"""`tilelang-golden gpu --sanitize`: every variant run under compute-sanitizer's racecheck, synccheck and initcheck, at
its family's small shape (`Family.sanitize_shape`, else its own), and failed where a tool reports a hazard in its
kernels (tilelang_golden.gpu.gate.sanitizer_gate reads the reports).

compute-sanitizer instruments a whole process, one tool at a time, and its reports cannot be told apart by variant
inside one process (TileLang names many kernels alike), so each variant runs in a process of its own per tool, found
by its reference as the check's worker finds it (tilelang_golden.gpu.run.worker): `compute-sanitizer --tool TOOL
--target-processes application-only --log-file LOG python -m tilelang_golden.gpu.sanitize PACKAGE FAMILY VARIANT
TARGET SEED`. That process compiles the variant at the small shape as the check compiles it, makes the seed's inputs
as the numeric check does, launches it once and names its device kernels on its standard output, before the launch.

Each variant is compiled once for its three tools: its first tool's process compiles it into TileLang's disk cache
(a folder of the pass's own for the variant, so nothing another run compiled is used), and its other tools'
processes start once that one has named its kernels, and load the compiled kernel from the cache. `plan.jobs`
processes run at a time, each within `plan.limit_s`; a line is logged as each variant finishes. Every process starts
a process group of its own, so that compute-sanitizer, the process it instruments and whatever that started are
stopped together: at the limit, and when the pass ends early (SIGINT, SIGTERM or an exception): none outlives the
run on the GPU.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilelang_golden.catalog.cases import Case
from tilelang_golden.gpu.gate.sanitizer_gate import (
    DID_NOT_COMPILE,
    KERNELS_MARK,
    TOOLS,
    SanitizerResult,
    ToolRun,
    judge_run,
    named_kernels,
)
from tilelang_golden.gpu.kernel_session import case_ref, find_case
from tilelang_golden.gpu.run.worker import LIMITS, import_path

EXECUTABLE = "compute-sanitizer"
# Where the CUDA toolkit puts it when it is not on PATH.
TOOLKIT_HOMES = ("CUDA_HOME", "CUDA_PATH")
DEFAULT_TOOLKIT = Path("/usr/local/cuda")
# Only the Python process is the tool's: the compilers the first process runs (nvcc, ptxas) are no CUDA programs.
TARGET_PROCESSES = ("--target-processes", "application-only")
POLL_S = 0.1  # how often the pass looks at its processes
GRACE_S = 3.0  # from SIGTERM to SIGKILL of a process group


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
    """Processes at a time, one a core: each is mostly one core's work (Python importing PyTorch and TileLang,
    compute-sanitizer's start, the first one's compile; about 10 s, 19 s with the compile, on an H100 host), and the
    GPU is idle most of it. Sixteen at most: a racecheck process held 646 MiB of GPU memory."""
    return max(1, min(16, os.cpu_count() or 1))


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
    """Every case under every tool of the plan, `plan.jobs` processes at a time, a line logged per finished variant.
    However the pass ends, no process it started is left running: SIGINT and SIGTERM end it (as KeyboardInterrupt and
    SystemExit(143)) after its processes were stopped."""
    log(
        f"sanitizer: {len(cases)} variants x {', '.join(plan.tools)} under {plan.executable}, {plan.jobs} processes "
        f"at a time, each at its family's sanitize_shape and within {plan.limit_s:.0f} s; each variant compiled once"
    )
    with tempfile.TemporaryDirectory(prefix="tlg-sanitize-") as folder, StopSignals() as signals:
        sanitizer_pass = SanitizerPass(cases, plan, seed, Path(folder), log, signals)
        try:
            return sanitizer_pass.run()
        finally:
            with signals.held():  # a signal during the stop is raised after it
                stop_groups([p.popen for p in sanitizer_pass.running])


class StopSignals:
    """Inside the block, SIGINT raises KeyboardInterrupt and SIGTERM SystemExit(128 + 15), the first of them only: the
    pass unwinds through its `finally` and stops its processes, and a second signal cannot cut that short. Python's
    own SIGTERM would end the run at once, leaving every process of its own group running. Inside `held()` (a process
    started but not yet recorded) the signal waits for the block's end. Signals reach the main thread only; elsewhere
    the block changes nothing."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.holding = False
        self.raised = False  # the received signal's exception is on its way: never a second one
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self.previous = {number: signal.signal(number, self.handle) for number in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exception: object) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)

    def handle(self, number: int, frame: Any) -> None:
        if self.received is None:
            self.received = number
            if not self.holding:
                self.stop()

    def stop(self) -> None:
        self.raised = True
        if self.received == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + (self.received or signal.SIGTERM))

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
        if self.received is not None and not self.raised:
            self.stop()


def stop_groups(processes: Sequence[subprocess.Popen], grace_s: float = GRACE_S) -> None:
    """SIGTERM to each process's group, then SIGKILL to whatever of it is left once every leader ended or after
    `grace_s`: compute-sanitizer, the process it instruments and anything they started go together."""
    for process in processes:
        signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(process.poll() is None for process in processes):
        time.sleep(POLL_S / 2)
    for process in processes:
        signal_group(process, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):  # stuck in the driver: never hang the run on it
            process.wait(timeout=grace_s)


def signal_group(process: subprocess.Popen, number: int) -> None:
    """`number` to the process group `process` leads (start_new_session made it a leader); nothing if none is left.
    The group id stays taken while any member lives, so it cannot name another process's group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, number)


@dataclass
class VariantRuns:
    """One variant's runs in the pass: its kernels' names once a process named them, and each tool's run."""

    number: int  # its place in the pass, from 1
    case: Case
    kernels: list[str] | None = None
    runs: dict[str, ToolRun] = field(default_factory=dict)
    tools: int = 0  # how many of the plan's tools it runs: 1 when the first found it does not compile
    followed: bool = False  # its other tools are queued

    @property
    def done(self) -> bool:
        return len(self.runs) == self.tools


@dataclass
class ToolProcess:
    """One variant under one tool: its process, when it started, and its files (LOG the tool's, .out and .err)."""

    variant: VariantRuns
    tool: str
    popen: subprocess.Popen
    started: float
    log_file: Path

    def output(self, suffix: str) -> str:
        path = self.log_file.with_suffix(suffix)
        return path.read_text(errors="replace") if path.is_file() else ""


class SanitizerPass:
    """The pass's queue and its running processes. The first tool of every variant is queued at the start; a
    variant's other tools go to the front of the queue once its first process named its kernels (it compiled the
    variant into the cache), or once it ended without naming them, unless it said the variant does not compile."""

    def __init__(
        self,
        cases: Sequence[Case],
        plan: SanitizerPlan,
        seed: int,
        folder: Path,
        log: Callable[[str], None],
        signals: StopSignals | None = None,
    ) -> None:
        self.plan, self.seed, self.folder, self.log = plan, seed, folder, log
        self.signals = signals or StopSignals()
        self.variants = [VariantRuns(number, case, tools=len(plan.tools)) for number, case in enumerate(cases, 1)]
        # A variant whose family gives no sanitize_shape runs at its full shape, by far the slowest under the tools:
        # it starts first, so that its runs overlap the others' instead of ending the pass alone.
        first = sorted(self.variants, key=lambda variant: bool(variant.case.family.sanitize_shape))
        self.queue = collections.deque((variant, plan.tools[0]) for variant in first)
        self.running: list[ToolProcess] = []
        self.results: dict[str, SanitizerResult] = {}
        self.findings = 0
        self.started = time.perf_counter()
        self.environ = {**os.environ, "PYTHONPATH": os.pathsep.join(import_path()), "PYTHONUNBUFFERED": "1"}

    def run(self) -> dict[str, SanitizerResult]:
        """Every variant under every tool; its results by variant, in the order given."""
        while self.queue or self.running:
            while self.queue and len(self.running) < self.plan.jobs:
                self.start(*self.queue.popleft())
            time.sleep(POLL_S)
            for process in list(self.running):
                self.look_at(process)
        return {variant.case.key: self.results[variant.case.key] for variant in self.variants}

    def start(self, variant: VariantRuns, tool: str) -> None:
        log_file = self.folder / f"{variant.number}.{tool}.log"
        command = [self.plan.executable, "--tool", tool, *TARGET_PROCESSES, "--log-file", str(log_file)]
        command += [sys.executable, "-m", __name__, *case_ref(variant.case), str(self.seed)]
        out, err = log_file.with_suffix(".out"), log_file.with_suffix(".err")
        # A TileLang cache of the variant's own: its first process always compiles it (and can name its kernels),
        # even where another variant's kernel is the same.
        cache = {"TILELANG_CACHE_DIR": str(self.folder / f"{variant.number}.cache"), "TILELANG_DISABLE_CACHE": "0"}
        with self.signals.held():  # a signal now would leave the process started and not yet known to the pass
            try:
                with out.open("wb") as stdout, err.open("wb") as stderr:
                    popen = subprocess.Popen(
                        command,
                        stdin=subprocess.DEVNULL,
                        stdout=stdout,
                        stderr=stderr,
                        env={**self.environ, **cache},
                        start_new_session=True,
                    )
            except OSError as error:
                popen = None
                failed = ToolRun(tool, error=f"{self.plan.executable} could not be started: {error}")
            else:
                self.running.append(ToolProcess(variant, tool, popen, time.perf_counter(), log_file))
        if popen is None:
            self.record(variant, failed, None)

    def look_at(self, process: ToolProcess) -> None:
        """Follow a first process's kernels, stop a process over its limit, judge one that ended."""
        variant, tool = process.variant, process.tool
        if not variant.followed and variant.kernels is None:
            variant.kernels = named_kernels(process.output(".out"))
            if variant.kernels is not None:
                self.follow(variant)
        status = process.popen.poll()
        seconds = time.perf_counter() - process.started
        if status is None and seconds <= self.plan.limit_s:
            return
        stop_groups([process.popen])  # over its limit; or what it left behind in its group
        self.running.remove(process)  # only now: a signal during the stop leaves it to the pass's own
        if status is None:
            error = f"{tool} of {variant.case.key} stopped after {seconds:.0f} s (limit {self.plan.limit_s:.0f} s)"
            self.log(f"sanitizer: {error}")
            run = ToolRun(tool, error=error, seconds=seconds)
        else:
            text = process.log_file.read_text(errors="replace") if process.log_file.is_file() else ""
            found = (process.output(".out"), process.output(".err"), text)
            run = judge_run(tool, status, found, seconds, variant.kernels)
        self.record(variant, run, status)

    def follow(self, variant: VariantRuns) -> None:
        variant.followed = True
        self.queue.extendleft((variant, tool) for tool in reversed(self.plan.tools[1:]))

    def record(self, variant: VariantRuns, run: ToolRun, status: int | None) -> None:
        """A run's result; a variant's first without a successor queues the others, or ends the variant if it
        does not compile; a finished variant's result and its line."""
        variant.runs[run.tool] = run
        if not variant.followed:
            if status == DID_NOT_COMPILE:  # the variant's other processes would compile it in vain
                variant.tools = len(variant.runs)
            else:
                self.follow(variant)
        if not variant.done:
            return
        small = at_sanitize_shape(variant.case)
        runs = tuple(variant.runs[tool] for tool in self.plan.tools if tool in variant.runs)
        result = self.results[variant.case.key] = SanitizerResult(small.family.dimensions(small.variant), runs)
        self.findings += sum(len(run.findings) for run in runs)
        self.log(progress_line(variant, result, len(self.results), len(self.variants), self.findings, self.started))


def progress_line(
    variant: VariantRuns, result: SanitizerResult, done: int, total: int, findings: int, started: float
) -> str:
    """`sanitize [12/54] family/variant: 3 tools, 4.1 s, findings so far: 1 (elapsed 38 s)`, and what failed it."""
    tools = f"{len(result.runs)} tool{'s' * (len(result.runs) != 1)}"
    failed = [run.tool for run in result.runs if run.error or run.findings]
    said = f", failed under {', '.join(failed)}" if failed else ""
    seconds = sum(run.seconds for run in result.runs)
    elapsed = time.perf_counter() - started
    return (
        f"sanitize [{done}/{total}] {variant.case.key}: {tools}, {seconds:.1f} s{said}, findings so far: {findings} "
        f"(elapsed {elapsed:.0f} s)"
    )


# -- the process compute-sanitizer instruments ------------------------------------------------------


def main(argv: Sequence[str]) -> int:
    """`python -m tilelang_golden.gpu.sanitize PACKAGE FAMILY VARIANT TARGET SEED`: compile the variant at its small
    shape (or load it from the pass's cache), name its device kernels where it compiled them, launch it once on the
    seed's inputs."""
    import torch

    from tilelang_golden.gpu.measure.numerics import prepare
    from tilelang_golden.gpu.pairs import numerics_case

    *ref, seed = argv
    try:
        compiled = compile_once(at_sanitize_shape(find_case(tuple(ref))))
    except Exception:
        traceback.print_exc()
        return DID_NOT_COMPILE
    if compiled.kernel is None:
        print(compiled.error or "no kernel", file=sys.stderr)
        return DID_NOT_COMPILE
    if compiled.launches:
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


def compile_once(case: Case) -> Any:
    """The case compiled as the check compiles it (tilelang_golden.gpu.run.compile), through TileLang's disk cache
    ($TILELANG_CACHE_DIR: the pass's own), which the check keeps off: the variant's first process compiles it, the
    others load it. A kernel loaded from the cache carries no device module, so its launches stay unread (empty)."""
    import tilelang

    from tilelang_golden.catalog.build import build_kernel, signature
    from tilelang_golden.gpu.run.compile import CompiledCase, compile_chain, launch_dynamic_shared_memory, out_idx
    from tilelang_golden.targets import TARGETS

    tilelang.enable_cache()
    built = build_kernel(case.family, case.variant)
    compiled = CompiledCase(case, None, arguments=signature(built), outputs=built.outputs, tolerances=built.tolerances)
    if built.chain is not None:
        compile_chain(compiled, built, {})  # its kernels compile on the chain's first call, each through the cache
        return compiled
    options = {"target": TARGETS[case.target].compile_description, "pass_configs": built.pass_configs or None}
    compiled.kernel = tilelang.compile(built.prim_func, out_idx=out_idx(built), **options)
    if compiled.kernel.artifact is not None:
        compiled.launches = launch_dynamic_shared_memory(compiled.kernel)
    return compiled


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
