"""Is another TileLang slower? The GPU check's timing, run in two environments that take turns.

Each environment is a long-lived worker process (tilelang_golden.upgrade.timing_worker started by a
Python command of that environment): it compiles and checks every variant once, then answers
requests for blocks of timing rounds (the session's `measure_pairs`, every variant next to its
PyTorch reference). The driver alternates the environments block by block, who goes first
switching every block, so a drift of the GPU's clocks over the run hits both alike. Per variant
and block the change is `slower_by(candidate ratio, pinned ratio)`; the report gives its median
over the blocks and the range, next to the noise: how far the pinned environment's own ratio moved
between blocks.
"""

from __future__ import annotations

import functools
import json
import shlex
import statistics
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from tilelang_golden.gpu.gate.timing_gate import slower_by

# The comparison's own levels, in every block: more time per unit of the reference under the
# candidate than this is "slower" or "maybe slower", less than FASTER_BELOW "faster". They equal the
# gate's today (the same paired timing, the same noise: docs/gpu.md, "How sharp the gate is"), but
# moving the gate does not move them: a preview is a report, not a gate.
SLOWER_ABOVE = 0.04
MAYBE_SLOWER_ABOVE = 0.03
FASTER_BELOW = -0.03

# Run by module name: the other environment has the harness installed too (docs/upgrade-preview.md).
WORKER = ["-m", "tilelang_golden.upgrade.timing_worker"]


class WorkerFailed(RuntimeError):
    """An environment's worker could not start or stopped answering; the message names the command."""


class TimingWorker(Protocol):
    name: str  # "pinned" or "candidate"
    hello: dict[str, Any]  # what the worker said after its GPU check: versions and per-variant status

    def time(self, rounds: int, seed: int) -> dict[str, float]: ...


# -- the worker's side --------------------------------------------------------------------------


def serve(
    hello: Mapping[str, Any],
    time_block: Callable[[int, int], Mapping[str, float]],
    requests: IO[str],
    answers: IO[str],
) -> None:
    """Say hello, then answer each request line `{"rounds": n, "seed": s}` with a line of ratios."""
    answers.write(json.dumps(hello) + "\n")
    answers.flush()
    for line in requests:
        request = json.loads(line)
        answers.write(json.dumps(dict(time_block(int(request["rounds"]), int(request["seed"])))) + "\n")
        answers.flush()


# -- the driver's side --------------------------------------------------------------------------


class ProcessWorker:
    """A worker started by `command` (a Python command line of one environment, e.g. `.venv/bin/python`).

    It starts compiling at once; `hello` waits for its GPU check, so two workers compile side by side."""

    def __init__(self, name: str, command: str, worker_args: Sequence[str]) -> None:
        self.name, self.command = name, command
        argv = [*shlex.split(command), *WORKER, *worker_args]
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        except OSError as error:
            raise WorkerFailed(f"the {name} environment `{command}` could not start: {error}") from None

    @functools.cached_property
    def hello(self) -> dict[str, Any]:
        return self._answer("its GPU check")

    def _answer(self, what: str) -> dict[str, Any]:
        line = self.process.stdout.readline()
        if not line:
            status = self.process.wait()
            raise WorkerFailed(
                f"the {self.name} environment `{self.command}` stopped during {what} (exit status {status}); "
                "its messages are above"
            )
        return json.loads(line)

    def time(self, rounds: int, seed: int) -> dict[str, float]:
        self.process.stdin.write(json.dumps({"rounds": rounds, "seed": seed}) + "\n")
        self.process.stdin.flush()
        return {key: float(ratio) for key, ratio in self._answer("a timing block").items()}

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait()


@dataclass
class SpeedRow:
    variant: str
    pinned: list[float]  # the variant's ratio to its reference, one per block
    candidate: list[float]

    @property
    def changes(self) -> list[float]:
        """Per block: how much slower per unit of the reference under the candidate (negative: faster)."""
        return [slower_by(c, p) for p, c in zip(self.pinned, self.candidate, strict=True)]

    @property
    def change(self) -> float:
        return statistics.median(self.changes)

    @property
    def noise(self) -> float:
        """How far the pinned environment's own ratio moved between blocks: max/min - 1."""
        return max(self.pinned) / min(self.pinned) - 1

    @property
    def verdict(self) -> str:
        """Slower, maybe slower or faster when every block says so; else unchanged."""
        if min(self.changes) > SLOWER_ABOVE:
            return "slower"
        if min(self.changes) > MAYBE_SLOWER_ABOVE:
            return "maybe slower"
        if max(self.changes) < FASTER_BELOW:
            return "faster"
        return "unchanged"


@dataclass
class SpeedComparison:
    pinned: dict[str, Any]  # the workers' hellos
    candidate: dict[str, Any]
    blocks: int
    rounds: int
    seed: int
    rows: list[SpeedRow] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pinned": self.pinned,
            "candidate": self.candidate,
            "blocks": self.blocks,
            "rounds_per_block": self.rounds,
            "seed": self.seed,
            "variants": [
                {
                    "variant": r.variant,
                    "pinned_ratios": r.pinned,
                    "candidate_ratios": r.candidate,
                    "changes": r.changes,
                    "change": r.change,
                    "noise": r.noise,
                    "verdict": r.verdict,
                }
                for r in self.rows
            ],
        }


def compare_speed(
    pinned: TimingWorker, candidate: TimingWorker, blocks: int, rounds: int, seed: int, log: Callable[[str], None]
) -> SpeedComparison:
    """Alternate the two workers block by block and pair their ratios per variant."""
    if blocks < 2:
        raise ValueError(f"blocks={blocks}: at least 2 blocks are needed to see the noise")
    measured: dict[str, list[dict[str, float]]] = {pinned.name: [], candidate.name: []}
    for block in range(blocks):
        for worker in (pinned, candidate) if block % 2 == 0 else (candidate, pinned):
            log(f"block {block + 1}/{blocks}: timing under the {worker.name} TileLang")
            measured[worker.name].append(worker.time(rounds, seed + block))
    comparison = SpeedComparison(pinned.hello, candidate.hello, blocks, rounds, seed)
    both = [set(b) for b in measured[pinned.name] + measured[candidate.name]]
    for key in sorted(set.intersection(*both)):
        comparison.rows.append(
            SpeedRow(key, [b[key] for b in measured[pinned.name]], [b[key] for b in measured[candidate.name]])
        )
    return comparison


def render_markdown(comparison: SpeedComparison) -> str:
    pinned, candidate = comparison.pinned, comparison.candidate
    lines = [
        f"# GPU: TileLang {candidate.get('tilelang')} against the pinned {pinned.get('tilelang')}",
        "",
        f"{pinned.get('device')}; {comparison.blocks} blocks of {comparison.rounds} timing rounds per environment, "
        f"alternating (seed {comparison.seed}). Ratio = reference ms / variant ms in the same process; "
        "change = how much slower per unit of the reference under the candidate (negative: faster), median over "
        "the blocks, with its range; noise = how far the pinned ratio moved between blocks. A verdict needs "
        f"every block beyond {MAYBE_SLOWER_ABOVE:.0%} (maybe slower), {SLOWER_ABOVE:.0%} (slower) or "
        f"{FASTER_BELOW:.0%} (faster).",
        "",
        "| variant | pinned ratio | candidate ratio | change | range | noise | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in comparison.rows:
        lines.append(
            f"| {r.variant} | {statistics.median(r.pinned):.3f} | {statistics.median(r.candidate):.3f} | "
            f"{r.change:+.1%} | {min(r.changes):+.1%} .. {max(r.changes):+.1%} | {r.noise:.1%} | {r.verdict} |"
        )
    lines += ["", f"## Numerics and checks under TileLang {candidate.get('tilelang')}", ""]
    statuses = candidate.get("variants", {})
    failing = {k: v for k, v in statuses.items() if v["status"] != "pass"}
    lines.append(f"{len(statuses) - len(failing)} of {len(statuses)} variants pass.")
    for key, status in sorted(failing.items()):
        lines.append(f"- {key}: {status['status']}: {'; '.join(status['problems']) or 'not checked'}")
    untimed = sorted(set(statuses) - {r.variant for r in comparison.rows})
    if untimed:
        lines += ["", "Not compared (not timed in both environments): " + ", ".join(untimed)]
    return "\n".join(lines) + "\n"


def write_speed_report(comparison: SpeedComparison, output: Path) -> list[Path]:
    output.mkdir(parents=True, exist_ok=True)
    markdown, data = output / "gpu.md", output / "gpu.json"
    markdown.write_text(render_markdown(comparison), encoding="utf-8")
    data.write_text(json.dumps(comparison.as_dict(), indent=1) + "\n", encoding="utf-8")
    return [markdown, data]
