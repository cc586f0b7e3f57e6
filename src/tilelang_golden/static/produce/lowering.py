"""Lower one variant for one target with TileLang, keeping the IR the facts are read from."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tilelang_golden.catalog.build import BuiltKernel
from tilelang_golden.catalog.cases import Case
from tilelang_golden.catalog.chain import Launch
from tilelang_golden.static.produce.lowering_advice import Outcomes, lowering_advice
from tilelang_golden.static.produce.uninitialized import SOURCE_PASS
from tilelang_golden.targets import TARGETS

# Passes whose output IR the fact extraction reads (captured through a pass instrument).
CAPTURED_PASSES = (
    SOURCE_PASS,
    "tl.PipelinePlanning",
    "tl.InjectSoftwarePipeline",
    "tl.LayoutInference",
    "tl.MergeSharedMemoryAllocations",
)


class LoweringError(RuntimeError):
    """TileLang failed to build or lower a variant; the message names the variant and target."""

    def __init__(self, case_id: str, message: str) -> None:
        super().__init__(f"{case_id}: {message}")
        self.case_id = case_id


class LoweringRefused(LoweringError):
    """TileLang (or, as machine_code.CompileError, NVIDIA's compiler) refused a case: its message is what the tool said
    (`headline`), then what to do (`lowering_advice`). That advice covers the case's own target until the run's session
    gives it what the variant does on the family's other targets (`cover`), so that it names every target it fails on.
    """

    def __init__(self, case: Case, headline: str, error: str) -> None:
        super().__init__(case.id, headline)
        self.case = case
        self.headline = headline
        self.error = error  # the tool's own text, as the `.error` snapshot holds it: what known failures match
        self.outcomes: Outcomes | None = None

    def cover(self, outcomes: Outcomes) -> None:
        """Advise over these targets too: target -> the error the variant fails with there, None where it lowers."""
        self.outcomes = outcomes

    def __str__(self) -> str:
        return f"{self.case_id}: {self.headline}\n{lowering_advice(self.case, self.error, self.outcomes)}"


@dataclass(frozen=True)
class Lowering:
    """What one lowering produced: the emitted CUDA, the IR after the captured passes, and what TileLang
    printed meanwhile."""

    case: Case
    cuda: str
    ir_after: dict[str, Any]  # pass name -> IRModule right after that pass
    device_ir: Any  # final device IRModule, the one handed to CUDA codegen
    host_ir: Any  # final host IRModule: it launches the device kernels, in order
    output: str = ""  # TileLang's warnings while lowering: its C++ log (stderr), Python logging and warnings
    # A chain's kernels, each lowered on its own, in launch order (its own fields then hold what they share: the
    # case, every kernel's CUDA and warnings); () for a variant that is one kernel.
    steps: tuple[Lowering, ...] = ()
    name: str = ""  # the kernel's name (its PrimFunc's symbol)
    pass_configs: dict[str, Any] = field(default_factory=dict)  # TileLang's, as jitted: some change the compile

    @property
    def kernels(self) -> tuple[Lowering, ...]:
        """Each kernel's own lowering, in launch order: the steps of a chain, else this one."""
        return self.steps or (self,)


def tilelang_unavailable() -> str | None:
    """Why this Python cannot lower CUDA with TileLang (one line), or None when it can.

    Scripts call it before importing any kernel module, since those import TileLang.
    """
    try:
        import tilelang
    except Exception as error:  # ImportError when absent; a broken install raises others
        detail = str(error) if isinstance(error, ImportError) else f"{type(error).__name__}: {error}"
        return f"cannot import TileLang ({detail})"
    try:
        from tilelang.tools.compile_only import cuda_codegen_available
    except ImportError:  # older TileLang (0.1.13) has no such check; its wheels all carry the CUDA codegen
        return None
    if not cuda_codegen_available():
        return (
            f"TileLang {tilelang.__version__} lacks the CUDA codegen FFI "
            "(tilelang.cuda._ffi_api.AnnotateDeviceBoundTmaCopies), so it cannot lower CUDA; "
            "install the pinned Linux wheel: `nox -s static --install-only` builds an environment with it"
        )
    return None


def lower(case: Case, built: BuiltKernel) -> Lowering:
    """Lower the case's built kernel (`tilelang_golden.catalog.build.build_kernel`) for its target, afresh, each kernel
    of a chain on its own; LoweringError when TileLang cannot. A run lowers each case once through its session
    (`tilelang_golden.static.session`)."""
    steps = tuple(_lower_launch(case, launch) for launch in built.launches)
    if len(steps) == 1:
        return steps[0]
    return Lowering(
        case, "".join(s.cuda for s in steps), {}, None, None, "".join(s.output for s in steps), steps, case.variant.name
    )


@functools.cache
def _capture_passes() -> type:
    """A pass instrument that keeps the IR after each of CAPTURED_PASSES in its `captured`. TVM never frees an
    instrument (the callbacks it registers hold it), so the class is made once and each lowering lets go of what its
    instrument captured: an instrument per lowering, with its IR, lived as long as the process."""
    import tvm

    @tvm.instrument.pass_instrument
    class CapturePasses:
        def __init__(self) -> None:
            self.captured: dict[str, Any] = {}

        def run_after_pass(self, mod: Any, info: Any) -> None:
            if info.name in CAPTURED_PASSES:
                self.captured[info.name] = mod

    return CapturePasses


def _lower_launch(case: Case, launch: Launch) -> Lowering:
    import tilelang
    import tvm
    from tvm.target import Target

    instrument = _capture_passes()()
    captured = instrument.captured
    try:
        target = Target(TARGETS[case.target].description)
        # Our own PassContext keeps the instruments (compile_only's opens its own and drops
        # them), carries the kernel's pass configs as tilelang.compile would, and leaves #line
        # directives off, so the text carries no machine paths.
        context = tvm.transform.PassContext(opt_level=3, config=dict(launch.pass_configs), instruments=[instrument])
        with context, target, captured_output() as output:
            artifact = tilelang.lower(launch.prim_func, target=target, enable_device_compile=False)
    except Exception as error:  # TileLang raises many types; all mean "this case did not lower"
        said = f"{type(error).__name__}: {error}"
        raise LoweringRefused(case, f"TileLang could not lower this variant ({said}).", said) from error
    finally:
        instrument.captured = {}  # the instrument outlives this lowering; its IR is the Lowering's alone
    missing = [name for name in CAPTURED_PASSES if name not in captured]
    if missing:
        raise LoweringError(case.id, f"passes {missing} did not run; has TileLang's pass pipeline changed?")
    return Lowering(
        case,
        str(artifact.kernel_source),
        captured,
        artifact.device_mod,
        artifact.host_mod,
        "".join(output),
        name=launch.name,
        pass_configs=dict(launch.pass_configs),
    )


@contextlib.contextmanager
def captured_output() -> Iterator[list[str]]:
    """Everything TileLang reports inside the block, appended to the yielded list when it ends: TVM's C++
    `LOG(WARNING)` writes to file descriptor 2 directly (past sys.stderr and pytest's capture of it), so the
    descriptor itself is redirected; Python logging records and warnings are caught as they are raised.
    What was printed is passed on to the real stderr, so nothing a user saw before is hidden."""
    found: list[str] = []
    handler = _Records()
    loggers = [logging.getLogger(), logging.getLogger("tilelang")]  # TileLang's own logger does not propagate
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink, warnings.catch_warnings(record=True) as raised:
        warnings.simplefilter("always")
        os.dup2(sink.fileno(), 2)
        for logger in loggers:
            logger.addHandler(handler)
        try:
            yield found
        finally:
            for logger in loggers:
                logger.removeHandler(handler)
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            printed = sink.read().decode(errors="replace")
            os.write(2, printed.encode())
            found += [printed, *handler.lines, *(f"Warning: {w.category.__name__}: {w.message}\n" for w in raised)]


class _Records(logging.Handler):
    """Python log records of warning level and above, as `Warning: message` lines."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname.title()}: {record.getMessage()}\n")
