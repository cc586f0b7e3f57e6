"""The sanitizer pass's processes on the CPU: however the pass ends (SIGTERM, SIGINT, an exception), no process it
started outlives it, the sanitizer's children included (a stand-in for compute-sanitizer that sleeps and starts a
child that sleeps); and a variant compiled once serves its three tools through TileLang's disk cache."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import gpu_fakes as fake
import pytest
from conftest import REPO, SUBPROCESS_LIMIT_S

from tilelang_golden.gpu import sanitize
from tilelang_golden.gpu.sanitize import SanitizerPass, SanitizerPlan, StopSignals, sanitize_cases

# Writes its pid and its child's to $SLEEPERS, then sleeps; the variant called "quick" ends at once, clean.
SLEEPER = """\
#!{python}
import json, os, subprocess, sys, time
args = sys.argv[1:]
tool, log, variant = args[args.index("--tool") + 1], args[args.index("--log-file") + 1], args[-3]
if variant == "quick":  # once the others' pids are written: the pass stops them after this one's line
    while len(open(os.environ["SLEEPERS"]).read().splitlines() if os.path.exists(os.environ["SLEEPERS"]) else []) < 2:
        time.sleep(0.1)
    print({mark!r} + json.dumps(["gemm_kernel"]), flush=True)
    summary = "RACECHECK SUMMARY: 0 hazards displayed" if tool == "racecheck" else "ERROR SUMMARY: 0 errors"
    open(log, "w").write("========= COMPUTE-SANITIZER\\n========= " + summary + "\\n")
    sys.exit(0)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
with open(os.environ["SLEEPERS"], "a") as pids:
    pids.write(f"{{os.getpid()}} {{child.pid}}\\n")
time.sleep(3600)
"""
# Runs the pass over three sleeping variants, two processes at a time, with the stand-in found on PATH.
DRIVER = """\
import gpu_fakes as fake
from tilelang_golden.gpu.sanitize import SanitizerPlan, find_sanitizer, sanitize_cases

family = fake.gemm_family("sleepy", [fake.variant(f"v{i}") for i in range(3)], shape=fake.SMALL)
sanitize_cases([fake.case(family, f"v{i}") for i in range(3)], SanitizerPlan(find_sanitizer(), jobs=2), seed=1)
"""


@pytest.fixture
def sleeper(tmp_path, monkeypatch):
    """The stand-in on PATH as compute-sanitizer, and the file its processes write their pids to."""
    folder = tmp_path / "bin"
    folder.mkdir()
    path = folder / "compute-sanitizer"
    path.write_text(SLEEPER.format(python=sys.executable, mark=sanitize.KERNELS_MARK))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    pids = tmp_path / "sleepers"
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLEEPERS", str(pids))
    yield pids
    for pid in started(pids):  # whatever a failing test left running, if the pid is still one of them
        if alive(pid) and "time.sleep(3600)" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
            os.kill(pid, signal.SIGKILL)


def started(pids: Path) -> list[int]:
    return [int(pid) for line in pids.read_text().splitlines() for pid in line.split()] if pids.is_file() else []


def alive(pid: int) -> bool:
    """Running, or stopped and not yet reaped by whoever inherited it (a zombie runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def wait_for(condition, what: str, limit_s: float = SUBPROCESS_LIMIT_S) -> None:
    """Poll until `condition()`: a net for a hang, never a measure of speed."""
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"not after {limit_s} s: {what}"
        time.sleep(0.1)


@pytest.mark.parametrize("number, status", [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, -signal.SIGINT)])
def test_a_signal_to_the_run_ends_every_sanitizer_process_and_its_children(sleeper, tmp_path, number, status):
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    errors = tmp_path / "driver.err"
    with errors.open("w") as stderr:
        run = subprocess.Popen([sys.executable, "-c", DRIVER], env=environ, stderr=stderr)
    try:
        wait_for(lambda: len(started(sleeper)) == 4 or run.poll() is not None, "two sanitizer processes started")
        assert run.poll() is None, errors.read_text()
        assert all(alive(pid) for pid in started(sleeper))
        run.send_signal(number)
        run.wait(timeout=SUBPROCESS_LIMIT_S)
    finally:
        run.kill()
    assert run.returncode == status, errors.read_text()  # SIGTERM: SystemExit(143); SIGINT: KeyboardInterrupt
    wait_for(lambda: not any(alive(pid) for pid in started(sleeper)), "every sanitizer process and child ended")
    assert len(started(sleeper)) == 4, "the third variant never started"


def test_an_exception_leaving_the_pass_ends_its_processes(sleeper):
    family = fake.gemm_family("sleepy", [fake.variant(n) for n in ("v0", "v1", "quick")], shape=fake.SMALL)
    cases = [fake.case(family, n) for n in ("v0", "v1", "quick")]

    def log(line: str) -> None:
        if line.startswith("sanitize ["):  # the quick variant's line, while the others sleep
            raise RuntimeError("the log broke")

    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with pytest.raises(RuntimeError, match="the log broke"):
        sanitize_cases(cases, SanitizerPlan(sanitize.find_sanitizer(), jobs=3), seed=1, log=log)
    assert len(started(sleeper)) == 4
    wait_for(lambda: not any(alive(pid) for pid in started(sleeper)), "every sanitizer process and child ended")
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers, "the pass's are gone"


# Compiles one registered variant at its sanitize shape as a sanitizer process does, through the cache folder in
# $TILELANG_CACHE_DIR; nvcc is replaced by a dummy binary (no CUDA toolkit here) and counted.
COMPILING = """\
import json, sys, tilelang, tvm_ffi
from tilelang_golden.gpu.kernel_session import find_case
from tilelang_golden.gpu.sanitize import at_sanitize_shape, compile_once

calls = []
hook = "tilelang_callback_cuda_compile"
tvm_ffi.register_global_func(hook, lambda code, target, config=None: calls.append(1) or bytearray(16), override=True)
compiled = compile_once(at_sanitize_shape(find_case(("kernels", "rms_norm", "threads256", "sm_90"))))
loaded = compiled.kernel.artifact is None  # TileLang's kernel from its disk cache carries no IR
print(json.dumps({"nvcc": len(calls), "loaded": loaded, "kernels": sorted(compiled.launches)}))
"""


def test_a_variant_compiled_by_its_first_process_is_loaded_from_the_cache_by_the_others(tmp_path):
    environ = {**os.environ, "PYTHONPATH": str(REPO), "TILELANG_CACHE_DIR": str(tmp_path / "cache")}

    def process() -> dict:
        done = subprocess.run(
            [sys.executable, "-c", COMPILING], env=environ, capture_output=True, text=True, timeout=SUBPROCESS_LIMIT_S
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    first = process()
    assert first["nvcc"] == 1 and not first["loaded"] and first["kernels"] == ["rms_norm_kernel"]
    assert process() == {"nvcc": 0, "loaded": True, "kernels": []}, "no lowering, no nvcc: the first one's kernel"


def test_a_variant_at_its_full_shape_starts_first_and_the_others_follow_their_compile(tmp_path):
    small = fake.gemm_family("small", [fake.variant("a")], shape=fake.SMALL, sanitize_shape={"M": 16})
    full = fake.gemm_family("full", [fake.variant("b")], shape=fake.SMALL)
    plan = SanitizerPlan("compute-sanitizer")
    queued = SanitizerPass([fake.case(small, "a"), fake.case(full, "b")], plan, 1, tmp_path, print).queue
    assert [(variant.case.key, tool) for variant, tool in queued] == [("full/b", "racecheck"), ("small/a", "racecheck")]


def test_a_signal_while_a_process_starts_is_raised_once_it_is_recorded_and_only_once():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    reached = False
    with StopSignals() as signals:
        with pytest.raises(SystemExit) as stopped:
            with signals.held():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.01)  # Python runs its handlers between bytecodes: here, within the block
                reached = True
        assert stopped.value.code == 128 + signal.SIGTERM and reached
        with signals.held():  # the pass's closing stop: the signal's exception is already on its way
            pass
        os.kill(os.getpid(), signal.SIGTERM)  # a second signal cannot cut the stop short
        time.sleep(0.01)
