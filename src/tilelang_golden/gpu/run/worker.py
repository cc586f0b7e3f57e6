"""Kernels run in a worker process, so that one that never finishes, or kills its CUDA context, fails only itself.

A kernel cannot be stopped from inside its own CUDA context, and after an illegal address or a
trap every later CUDA call of that process fails. So the GPU check's driver starts one long-lived
worker (`python -m tilelang_golden.gpu.run.worker HANDLER`) that compiles, checks and times, and asks it for
one stage at a time over a pair of pipes (multiprocessing connections: pickled requests and
answers, both sides the same code). Each request has a time limit (`TimeLimits.limit`). The
worker may say which variant it starts next inside a long request (the timing of every pair); the
limit then applies from that message on, to that variant. A worker that does not answer in time
is killed and its request's variant "did not finish"; one whose pipe ends (it died) has
"crashed", with the last lines of its standard error; one that answers but says its CUDA context
is unusable is stopped too. The driver then starts a fresh worker for the next request.

The worker's standard output goes to its standard error, which the driver passes through to its
own while keeping the last lines: compiler messages can neither garble an answer nor get lost.
"""

from __future__ import annotations

import collections
import importlib
import os
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

# How a request of a variant ended when it gave no answer.
RAISED = "raised"  # the stage raised; the worker is still usable
DID_NOT_FINISH = "did not finish"  # no answer within its limit: the worker was killed
CRASHED = "crashed"  # the worker died, or its CUDA context is unusable
STOPPED = (DID_NOT_FINISH, CRASHED)
TAIL_LINES = 12


@dataclass(frozen=True)
class TimeLimits:
    """How long one request may take: the only place these numbers live.

    A request's limit is `nominal_s + factor * launches * launch_s`, held between `floor_s` and
    `cap_s`: `launches` of the variant's kernel or its reference, each allowed `factor` times what
    one should take (`launch_s`: the larger of its work at the device's peaks and its reference's
    measured time), plus what the request takes whatever the kernel does (timing's warm-up and
    measurement budget). The floor covers a request's own work around the launches (inputs,
    float32 references, comparisons; CUDA libraries loading in a fresh worker); the cap bounds
    what a hang costs.
    """

    floor_s: float = 30.0
    cap_s: float = 300.0
    # A kernel 100x slower than its PyTorch op, or than its work at the datasheet peaks, is broken anyway.
    factor: float = 100.0
    # Compilation runs no kernel: nvcc's own time per case compiled, a net for a hung compiler only.
    compile_s: float = 20.0
    start_s: float = 120.0  # a fresh worker's Python to its first word, PyTorch's import included
    # One variant under one compute-sanitizer tool (`--sanitize`): its process's start, its compilation at the small
    # shape and one instrumented launch, which racecheck makes orders of magnitude slower; a net for a hang. The
    # longest honest one on an H100 took 66 s (a stream-K GEMM at its full shape under racecheck); at 600 s each stall
    # cost ten minutes of the pass.
    sanitizer_s: float = 120.0

    def limit(self, launches: float, launch_s: float, nominal_s: float = 0.0) -> float:
        return min(self.cap_s, max(self.floor_s, nominal_s + self.factor * launches * launch_s))

    def compile_limit(self, cases: int) -> float:
        return self.floor_s + self.compile_s * cases


LIMITS = TimeLimits()


class Stopped(Exception):
    """A request that gave no answer: how it ended, in words, and which variant it was on (None: not said)."""

    def __init__(self, kind: str, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.key = kind, message, key


# -- the worker's side --------------------------------------------------------------------------


def serve(handler: Any, requests: Connection, answers: Connection) -> None:
    """Answer each request `(op, args)` with `("answer", result, unusable)`, or `("raised", traceback)` when the
    handler's method raised; `handler.unusable()` after each says why the worker cannot go on (its CUDA
    context's error), or None. Ends when the driver closes its pipe, or after an answer that says it cannot."""
    answers.send(("ready", os.getpid()))
    while True:
        try:
            op, args = requests.recv()
        except EOFError:
            return
        try:
            result = getattr(handler, op)(*args)
        except Exception:  # the handler contains a variant's exceptions; this is its own
            answers.send(("raised", traceback.format_exc(limit=-8)))
            continue
        unusable = handler.unusable()
        answers.send(("answer", result, unusable))
        if unusable:
            return


def main(argv: Sequence[str]) -> int:
    """`python -m tilelang_golden.gpu.run.worker module:factory REQUESTS_FD ANSWERS_FD`: `factory(progress)` makes the
    handler; `progress(key)` tells the driver which variant a request goes on with."""
    spec, requests_fd, answers_fd = argv
    os.dup2(2, 1)  # whatever writes to standard output reaches the driver's log, never the answers
    sys.stdout = sys.stderr
    requests, answers = Connection(int(requests_fd), writable=False), Connection(int(answers_fd), readable=False)
    module, _, name = spec.partition(":")
    handler = getattr(importlib.import_module(module), name)(lambda key: answers.send(("started", key)))
    serve(handler, requests, answers)
    return 0


# -- the driver's side --------------------------------------------------------------------------


class WorkerProcess:
    """One worker running `handler` (`module:factory`), started at once; `ask` sends a request and waits for its
    answer within its limit. Raises Stopped when the worker cannot start."""

    def __init__(self, handler: str, limits: TimeLimits = LIMITS, log: Callable[[str], None] = print) -> None:
        self.log = log
        ours_read, theirs_write = os.pipe()
        theirs_read, ours_write = os.pipe()
        environ = {**os.environ, "PYTHONPATH": os.pathsep.join(import_path())}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tilelang_golden.gpu.run.worker", handler, str(theirs_read), str(theirs_write)],
            pass_fds=(theirs_read, theirs_write),
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=environ,
        )
        os.close(theirs_read)  # only the worker holds its ends: its death closes the answers
        os.close(theirs_write)
        self.requests, self.answers = Connection(ours_write, readable=False), Connection(ours_read, writable=False)
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.echo = threading.Thread(target=self._pass_through, daemon=True)
        self.echo.start()
        kind, self.pid = self._next(lambda key: limits.start_s)
        if kind != "ready":
            raise Stopped(CRASHED, f"the worker said {kind!r} before it was ready")

    def _pass_through(self) -> None:
        for raw in self.process.stderr:
            line = raw.decode(errors="replace")
            self.tail.append(line.rstrip("\n"))
            sys.stderr.write(line)
        sys.stderr.flush()

    def ask(self, op: str, *args: Any, limit: Callable[[str | None], float]) -> Any:
        """The handler's `op(*args)` and why the worker cannot go on after it (None: it can; else it has been
        stopped); `limit(key)` is the time allowed, from the variant the worker last said it started (None before
        it names one). Raises Stopped when no answer comes."""
        try:
            self.requests.send((op, args))
        except OSError:
            raise Stopped(CRASHED, self._crash_note()) from None
        key = None
        while True:
            message = self._next(limit, key)
            if message[0] == "started":
                key = message[1]
                continue
            if message[0] == "raised":
                raise Stopped(RAISED, f"the harness raised in the worker: {message[1].strip()}", key)
            _, result, unusable = message
            if unusable:
                self.stop()
            return result, unusable

    def _next(self, limit: Callable[[str | None], float], key: str | None = None) -> tuple:
        seconds = limit(key)
        if not self.answers.poll(seconds):
            self.stop()
            raise Stopped(DID_NOT_FINISH, f"did not finish after {seconds:.0f} s; the worker was stopped", key)
        try:
            return self.answers.recv()
        except (EOFError, OSError):
            raise Stopped(CRASHED, self._crash_note(), key) from None

    def _crash_note(self) -> str:
        status = self.process.wait()
        self.echo.join(timeout=5)  # its last lines
        how = f"killed by {signal.Signals(-status).name}" if status < 0 else f"exit status {status}"
        lines = " | ".join(line for line in self.tail if line.strip()) or "nothing"
        return f"the worker running it crashed ({how}); the last lines of its standard error: {lines}"

    def stop(self) -> None:
        """End the worker: ask it to, then kill it (a kernel that never finishes does not listen)."""
        self.requests.close()
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.answers.close()
        self.echo.join(timeout=5)


def import_path(path: Sequence[str] = sys.path, cwd: str | None = None) -> list[str]:
    """This process's module search path, for the worker to import the same harness and families (the repository
    root included, which `python -m seeds.lower_num_stages` puts first; `python -c` puts it as "": the working
    directory)."""
    here = cwd or os.getcwd()
    return [entry or here for entry in path]


def limit_of(limits: Mapping[str, float], default: float) -> Callable[[str | None], float]:
    """`ask`'s limit from each variant's own, `default` before the worker names one."""
    return lambda key: default if key is None else limits.get(key, default)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
