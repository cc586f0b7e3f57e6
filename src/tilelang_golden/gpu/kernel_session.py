"""The GPU check's stages, one variant at a time, run where the kernels live.

`KernelSession` holds the compiled kernels and their timed pairs and runs each stage: compile (every case, in
parallel), reference (the timed pair made on one seed, and one call of the speed reference timed, for the time
limits), numerics (every seed), repeats (launches on one seed's inputs, compared bit for bit), timing (every pair
interleaved over rounds, one request: tilelang_golden.gpu.measure.timing.measure_pairs, exactly as in one process). An
exception in a variant's stage is that variant's `VariantFailure`, naming its family file, the variant and the last
frame of the family's own code it passed through; the other variants go on.

The check asks its stages of `Kernels`, which reaches one KernelSession through a transport: a worker
process (`Kernels.in_worker`, over tilelang_golden.gpu.run.worker: a kernel that never finishes, or one that leaves
its CUDA context unusable, fails its variant and a fresh worker takes the rest) or this process
(`Kernels.in_process`: the same stages with nothing to stop a hang, for the scripts that time the
kernels again afterwards).
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from tilelang_golden.catalog.cases import Case
from tilelang_golden.catalog.declaration import FamilyCallError
from tilelang_golden.family import Family
from tilelang_golden.gpu.gate.numerics_gate import NumericsResult
from tilelang_golden.gpu.gate.repeat_gate import RepeatCheck
from tilelang_golden.gpu.measure.numerics import check_numerics
from tilelang_golden.gpu.measure.repeats import check_repeats
from tilelang_golden.gpu.measure.timing import Bench, Pair, PairedTiming, make_bench, measure_pairs
from tilelang_golden.gpu.pairs import ab_pair, numerics_case, timed_pair
from tilelang_golden.gpu.report.results import VariantFailure
from tilelang_golden.gpu.run.against import load_package
from tilelang_golden.gpu.run.compile import CompiledCase, compile_cases, read_driver_resources
from tilelang_golden.gpu.run.poison import Memory
from tilelang_golden.gpu.run.worker import CRASHED, LIMITS, RAISED, Stopped, TimeLimits, WorkerProcess, limit_of

# (family package, family, variant, target): how the worker finds a case among the families it imports.
CaseRef = tuple[str, str, str, str]


@dataclass(frozen=True)
class CompiledWithSource:
    """A compiled case as the driver sees it (no kernel: that stays where it runs) and its source, for the snapshot."""

    compiled: CompiledCase
    source: str | None


@dataclass(frozen=True)
class TimingRequest:
    rounds: int
    seed: int  # the random order's
    pair_seed: int  # the inputs' of every pair
    timer: str
    warmup_ms: float
    repeat_ms: float


@dataclass(frozen=True)
class TimedPairs:
    """Every pair's timing, or the failure that ended the request and the variant it was on (None: not known)."""

    measured: dict[str, PairedTiming] = field(default_factory=dict)
    failed: str | None = None
    failure: VariantFailure | None = None


def raised(stage: str, case: Case, error: BaseException) -> VariantFailure:
    """A stage's exception as the variant's failure: the family file, the variant, the error, and where."""
    cause = error.__cause__ if isinstance(error, FamilyCallError) and error.__cause__ else error
    if isinstance(error, FamilyCallError):  # it says what raised, and names the file, which is said once here
        what = f"{stage}: {str(error).removeprefix(f'{case.family.file}: ')}"
    else:
        what = f"{stage} raised {type(error).__name__}: {error}"
    message = f"{case.family.file}: variant {case.variant.name!r}: {what} ({where(cause, case.family)})"
    return VariantFailure(stage, RAISED, message)


def where(error: BaseException, family: Family) -> str:
    """`at kernels/x.py:12 in inputs`: the last frame of the error's traceback in the family's package, else its
    last frame anywhere."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return "no traceback"
    package = PurePath(family.file).parent.as_posix()
    own = [f for f in frames if f"/{package}/" in Path(f.filename).as_posix()]
    frame = (own or frames)[-1]
    shown = f"{package}/{Path(frame.filename).name}" if own else Path(frame.filename).name
    return f"at {shown}:{frame.lineno} in {frame.name}"


class KernelSession:
    """The stages on `device` ("cuda", or "cpu" with a test's stand-ins), holding the kernels it compiled; a worker's
    handler as it is (tilelang_golden.gpu.run.worker), and the in-process transport's. Its answers can be pickled.

    `progress(key)` says which variant a timing request goes on with (a worker tells its driver)."""

    def __init__(
        self,
        progress: Callable[[str], None] = lambda key: None,
        *,
        device: str = "cuda",
        memory: Memory | None = None,
        bench: Bench | None = None,
        compiler: Callable[[Sequence[Case]], list[CompiledCase]] = compile_cases,
    ) -> None:
        # Before a worker says it is ready, so its start-up limit pays for PyTorch's import (seconds on a busy
        # machine), not the limit of the first variant it is asked about.
        import torch  # noqa: F401

        self.progress, self.device, self.memory, self.bench, self.compiler = progress, device, memory, bench, compiler
        self.compiled: dict[str, CompiledCase] = {}
        self.pairs: dict[str, Pair] = {}
        self.base_pairs: dict[str, Pair] = {}  # variant -> it and the base's kernel of it (`--against`)
        # package -> its families, loaded once: a case referred to twice is the same objects
        self.families: dict[str, tuple[Family, ...]] = {}
        self._state: Any = None

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")

    def resolve(self, case: Case | CaseRef) -> Case:
        """A case as given (in this process), or found by its reference among its package's families (a worker)."""
        return case if isinstance(case, Case) else find_case(case, self.families)

    def compile(self, given: Sequence[Case | CaseRef]) -> dict[str, CompiledWithSource | VariantFailure]:
        """Every case compiled, with its source; the kernels stay here, the answer holds what the driver reads."""
        cases = [self.resolve(case) for case in given]
        try:
            built = self.compiler(cases)
        except Exception as error:  # compile_cases keeps each case's own errors; this is all of them
            return {case.key: raised("compile", case, error) for case in cases}
        if self.cuda:
            import torch

            torch.empty(1, device=self.device)  # the context, before asking the driver
        found: dict[str, CompiledWithSource | VariantFailure] = {}
        for compiled in built:
            key = compiled.case.key
            try:
                if compiled.kernel is not None:
                    read_driver_resources(compiled)
                source = None if compiled.kernel is None else compiled.source
            except Exception as error:
                found[key] = raised("compile", compiled.case, error)
                continue
            if compiled.kernel is not None and not compiled.error:
                self.compiled[key] = compiled
            found[key] = CompiledWithSource(dataclasses.replace(compiled, case=None, kernel=None, binaries=[]), source)
        return found

    def reference(self, key: str, seed: int) -> float | VariantFailure:
        """Make the variant's timed pair on `seed`'s inputs; the seconds one call of its speed reference takes."""
        compiled = self.compiled[key]
        try:
            pair = timed_pair(compiled, seed, self.device)  # calls the reference once: that call is not timed
            self._synchronize()
            started = time.perf_counter()
            pair.reference_run()
            self._synchronize()
            seconds = time.perf_counter() - started
        except Exception as error:
            return raised("reference", compiled.case, error)
        self.pairs[key] = pair
        return seconds

    def numerics(self, key: str, seeds: Sequence[int]) -> NumericsResult | VariantFailure:
        compiled = self.compiled[key]
        try:
            return check_numerics([numerics_case(compiled)], seeds, self.device, self.memory)[key]
        except Exception as error:
            return raised("numerics", compiled.case, error)

    def repeats(self, key: str, seed: int, launches: int) -> RepeatCheck | VariantFailure:
        """The variant launched `launches` times on `seed`'s inputs, its outputs compared bit for bit."""
        compiled = self.compiled[key]
        try:
            return check_repeats(numerics_case(compiled), seed, launches, self.device)
        except Exception as error:
            return raised("repeated launches", compiled.case, error)

    def gpu_state(self) -> tuple[str | None, list[int]]:
        """Why there is no GPU state (None: there is), and the other processes that use the GPU."""
        state = self._gpu_state()
        return state.note, state.other_processes()

    def time(self, keys: Sequence[str], request: TimingRequest, against: Mapping[str, str] | None = None) -> TimedPairs:
        """Every pair measured together, as tilelang_golden.gpu.measure.timing.measure_pairs does in one process; a pair
        not made in this worker yet is made first. Each pair is the variant and its speed reference or, with `against`
        (variant -> the base's case key), the variant and the base's kernel of it."""
        current: str | None = None
        pairs = self.pairs if against is None else self.base_pairs

        def starting(key: str) -> None:
            nonlocal current
            current = key
            self.progress(key)

        try:
            for key in keys:
                if key not in pairs:
                    starting(key)
                    made = (
                        self.reference(key, request.pair_seed)
                        if against is None
                        else self.pair_with_base(key, against[key], request.pair_seed)
                    )
                    if isinstance(made, VariantFailure):
                        return TimedPairs(failed=key, failure=made)
            bench = self.bench or make_bench(request.timer, request.warmup_ms, request.repeat_ms)
            state = self._gpu_state()
            timed = [pairs[key] for key in keys]
            measured = measure_pairs(timed, request.rounds, bench, request.seed, state.sample, starting=starting)
        except Exception as error:
            if current is None:
                return TimedPairs(
                    failure=VariantFailure("timing", RAISED, f"timing raised {type(error).__name__}: {error}")
                )
            return TimedPairs(failed=current, failure=raised("timing", self.compiled[current].case, error))
        return TimedPairs(measured)

    def pair_with_base(self, key: str, base_key: str, seed: int) -> VariantFailure | None:
        """Make the variant's A/B pair on `seed`'s inputs: its kernel and the base's, each on its own inputs."""
        compiled = self.compiled[key]
        try:
            self.base_pairs[key] = ab_pair(compiled, self.compiled[base_key], seed, self.device)
        except Exception as error:
            return raised("timing against the base", compiled.case, error)
        return None

    def unusable(self) -> str | None:
        """The CUDA error that makes this process's context unusable (an illegal address, a trap), or None."""
        if not self.cuda:
            return None
        try:
            import torch

            torch.ones(1, device=self.device).add_(1).item()
        except Exception as error:
            return f"{type(error).__name__}: {error}".strip()
        return None

    def _synchronize(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def _gpu_state(self) -> Any:
        from tilelang_golden.gpu.run.gpu_state import GpuState

        if self._state is None:
            import torch

            self._state = GpuState(torch.cuda.current_device() if self.cuda else 0)
        return self._state


def base_keys(against: Mapping[str, Case] | None) -> dict[str, str] | None:
    """variant -> its base case's key, as a request carries it."""
    return None if against is None else {key: case.key for key, case in against.items()}


def find_case(ref: CaseRef, loaded: dict[str, tuple[Family, ...]] | None = None) -> Case:
    """The case a reference names, found among its package's families (each package loaded once into `loaded`)."""
    package, family_name, variant, target = ref
    loaded = {} if loaded is None else loaded
    if package not in loaded:
        loaded[package] = load_package(package).families
    family = next(f for f in loaded[package] if f.name == family_name)
    return Case(family, family.variant(variant), target)


def case_ref(case: Case) -> CaseRef:
    """How a worker finds the case: its family file's package (`kernels/x.py` -> `kernels`), names and target."""
    package = case.family.package or ".".join(PurePath(case.family.file).parent.parts)
    return (package, case.family.name, case.variant.name, case.target)


class InProcess:
    """A transport to a KernelSession in this process: no time limit (a hang hangs the run), and the timed pairs
    stay reachable from here (scripts time them again). It has a worker's interface, and never stops."""

    def __init__(self, session: KernelSession) -> None:
        self.session = session

    def ask(self, op: str, *args: Any, limit: Callable[[str | None], float]) -> tuple[Any, None]:
        return getattr(self.session, op)(*args), None

    def stop(self) -> None:
        """The kernels stay with the session."""


class Kernels:
    """The check's stages, asked of one KernelSession through a transport (`in_worker` or `in_process`); every
    answer is the variant's result or its VariantFailure. After a worker was stopped (it did not finish, crashed,
    or its CUDA context is unusable) the next request starts a fresh one, which first compiles the variants still
    to be checked (those not dropped)."""

    def __init__(
        self,
        start: Callable[[], Any],
        limits: TimeLimits = LIMITS,
        log: Callable[[str], None] = print,
        *,
        by_reference: bool = True,
        pairs: dict[str, Pair] | None = None,
    ) -> None:
        self.start, self.limits, self.log = start, limits, log
        self.by_reference = by_reference  # a worker finds a case by reference; this process takes the case itself
        self.pairs: dict[str, Pair] = {} if pairs is None else pairs  # where they can be called from here
        self.worker: Any = None
        self.wanted: dict[str, Case] = {}  # compiled, not dropped: what a fresh worker compiles
        self.lost: dict[str, VariantFailure] = {}  # compiled before, but not in a fresh worker

    @classmethod
    def in_worker(
        cls,
        handler: str = "tilelang_golden.gpu.kernel_session:KernelSession",
        limits: TimeLimits = LIMITS,
        log: Callable[[str], None] = print,
    ) -> Kernels:
        """The stages in a worker process running `handler` (`module:factory`), each request within its limit."""
        return cls(lambda: WorkerProcess(handler, limits, log), limits, log)

    @classmethod
    def in_process(cls, session: KernelSession | None = None) -> Kernels:
        """The stages in this process, in `session` (limits computed, not enforced)."""
        session = session or KernelSession()
        return cls(lambda: InProcess(session), by_reference=False, pairs=session.pairs)

    def compile(self, cases: Sequence[Case], limit_s: float) -> dict[str, CompiledWithSource | VariantFailure]:
        try:
            found = self._ask("compile", self._sent(cases), limit=lambda key: limit_s)
        except Stopped as stopped:
            return {c.key: _stopped("compile", c, stopped) for c in cases}
        self.wanted = {c.key: c for c in cases if isinstance(found.get(c.key), CompiledWithSource)}
        return found

    def reference(self, case: Case, seed: int, limit_s: float) -> float | VariantFailure:
        return self._variant("reference", case, limit_s, seed)

    def numerics(self, case: Case, seeds: Sequence[int], limit_s: float) -> NumericsResult | VariantFailure:
        return self._variant("numerics", case, limit_s, list(seeds))

    def repeats(self, case: Case, seed: int, launches: int, limit_s: float) -> RepeatCheck | VariantFailure:
        return self._variant("repeats", case, limit_s, seed, launches)

    def gpu_state(self) -> tuple[str | None, list[int]]:
        try:
            return self._ask("gpu_state", limit=lambda key: self.limits.floor_s)
        except Stopped as stopped:
            return f"no GPU state: {stopped.message}", []

    def time(
        self,
        cases: Mapping[str, Case],
        request: TimingRequest,
        limits: Mapping[str, float],
        against: Mapping[str, Case] | None = None,
    ) -> TimedPairs:
        bases = base_keys(against) or {}
        lost = next((key for key in cases if key in self.lost or bases.get(key) in self.lost), None)
        if lost is not None:
            return TimedPairs(failed=lost, failure=self.lost.get(lost) or self.lost[bases[lost]])
        try:
            limit = limit_of(limits, self.limits.floor_s)
            return self._ask("time", list(cases), request, base_keys(against), limit=limit)
        except Stopped as stopped:
            if stopped.key is None:
                return TimedPairs(failure=VariantFailure("timing", stopped.kind, f"timing {stopped.message}"))
            return TimedPairs(failed=stopped.key, failure=_stopped("timing", cases[stopped.key], stopped))

    def drop(self, keys: Sequence[str]) -> None:
        """Forget variants no later stage asks about: a fresh worker does not compile them."""
        for key in keys:
            self.wanted.pop(key, None)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.worker = None

    def _sent(self, cases: Sequence[Case]) -> list[Case | CaseRef]:
        return [case_ref(c) if self.by_reference else c for c in cases]

    def _variant(self, stage: str, case: Case, limit_s: float, *args: Any) -> Any:
        if case.key in self.lost:
            return self.lost[case.key]
        try:
            return self._ask(stage, case.key, *args, limit=lambda key: limit_s)
        except Stopped as stopped:
            return _stopped(stage, case, stopped)

    def _ask(self, op: str, *args: Any, limit: Callable[[str | None], float]) -> Any:
        worker = self._worker()
        try:
            result, unusable = worker.ask(op, *args, limit=limit)
        except Stopped as stopped:
            if stopped.kind != RAISED:
                self.worker = None
            raise
        if unusable:
            self.worker = None
            raise Stopped(CRASHED, f"left the worker's CUDA context unusable ({unusable}); the worker was replaced")
        return result

    def _worker(self) -> Any:
        if self.worker is not None:
            return self.worker
        worker = self.start()
        if self.wanted:
            cases = list(self.wanted.values())
            self.log(f"a fresh worker compiles the {len(cases)} variants still to be checked")
            try:
                result, _ = worker.ask(
                    "compile", self._sent(cases), limit=lambda key: self.limits.compile_limit(len(cases))
                )
            except Stopped as stopped:
                worker.stop()
                raise Stopped(stopped.kind, f"could not run: a fresh worker's compilation {stopped.message}") from None
            for case in cases:
                if not isinstance(result.get(case.key), CompiledWithSource):
                    why = result.get(case.key)
                    self.lost[case.key] = VariantFailure(
                        "compile",
                        RAISED,
                        f"{case.family.file}: variant {case.variant.name!r}: did not compile "
                        f"again in a fresh worker: {why.message if isinstance(why, VariantFailure) else why}",
                    )
                    self.wanted.pop(case.key)
        self.worker = worker
        return worker


def _stopped(stage: str, case: Case, stopped: Stopped) -> VariantFailure:
    return VariantFailure(
        stage, stopped.kind, f"{case.family.file}: variant {case.variant.name!r}: {stage} {stopped.message}"
    )
