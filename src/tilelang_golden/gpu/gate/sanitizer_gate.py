"""The sanitizer gate: what compute-sanitizer's racecheck, synccheck and initcheck report of a variant's kernels, and
what fails it; tilelang_golden.gpu.sanitize runs the tools and fills these records.

A report is read block by block: a finding starts on a line of its own after the tool's `=========` prefix
(`Error: Race reported between ...`, `Uninitialized __global__ memory read ...`, `Barrier error detected ...`) and
runs over the indented lines below it. A finding that names one of the variant's device kernels is the variant's;
one in another kernel (PyTorch's, making the inputs) is counted beside it and fails nothing. A run proves nothing
unless its process ended normally and the tool wrote its summary line: otherwise it fails with why. The process
names the variant's kernels on its standard output (`KERNELS_MARK`) when it compiled them; one that loaded them from
the pass's cache names none, and its findings are told by the names the variant's first process gave.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tilelang_golden.gpu.run.worker import TAIL_LINES

TOOLS = ("racecheck", "synccheck", "initcheck")
PREFIX = "========="
# The last line each tool writes: racecheck's counts hazards, the others' errors.
SUMMARY = re.compile(r"(?:RACECHECK|ERROR) SUMMARY: \d+")
HEADER = "COMPUTE-SANITIZER"
SHOWN_LINES = 8  # of a finding, in a failure's message; report.json keeps each finding whole
# What the sanitized process prints before its device kernels' names, one JSON list.
KERNELS_MARK = "sanitized kernels: "
DID_NOT_COMPILE = 3  # its exit status when the variant does not compile at the small shape


def parse_report(text: str, kernels: Sequence[str]) -> tuple[list[list[str]], int, bool]:
    """The findings that name one of `kernels` (each its lines, the prefix stripped), how many others there are, and
    whether the tool's summary line is there."""
    blocks: list[list[str]] = []
    summarized = False
    for raw in text.splitlines():
        if not raw.startswith(PREFIX):
            continue
        # After the prefix one space, then a finding's first line; its other lines are indented further.
        line = raw[len(PREFIX) :].rstrip().removeprefix(" ")
        body = line.strip()
        if SUMMARY.search(body):
            summarized = True
        elif not body or body == HEADER:
            continue
        elif line.startswith((" ", "\t")) and blocks:
            blocks[-1].append(body)
        else:
            blocks.append([body])
    names = [re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])") for name in kernels]
    ours = [block for block in blocks if any(name.search(" ".join(block)) for name in names)]
    return ours, len(blocks) - len(ours), summarized


@dataclass(frozen=True)
class ToolRun:
    """One variant under one tool: its findings in the variant's kernels, or why the run proved nothing."""

    tool: str
    findings: tuple[tuple[str, ...], ...] = ()
    elsewhere: int = 0  # findings in kernels that are not the variant's
    error: str | None = None
    seconds: float = 0.0

    def failures(self, shape: str) -> list[str]:
        if self.error:
            return [f"compute-sanitizer --tool {self.tool} at {shape}: {self.error}"]
        if not self.findings:
            return []
        first = " | ".join(self.findings[0][:SHOWN_LINES])
        return [
            f"compute-sanitizer --tool {self.tool} at {shape}: {len(self.findings)} finding(s) in the variant's "
            f"kernels; the first: {first}"
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "findings": [list(finding) for finding in self.findings],
            "elsewhere": self.elsewhere,
            "error": self.error,
            "seconds": round(self.seconds, 2),
        }


@dataclass(frozen=True)
class SanitizerResult:
    """A variant under every tool, at the dimensions it ran at (its family's `sanitize_shape`, else its own)."""

    dimensions: dict[str, int]
    runs: tuple[ToolRun, ...] = field(default_factory=tuple)

    @property
    def shape(self) -> str:
        return " ".join(f"{name}={size}" for name, size in self.dimensions.items())

    def failures(self) -> list[str]:
        return [failure for run in self.runs for failure in run.failures(self.shape)]

    @property
    def passed(self) -> bool:
        return not self.failures()

    def as_dict(self) -> dict[str, Any]:
        return {"dimensions": self.dimensions, "passed": self.passed, "runs": [run.as_dict() for run in self.runs]}


def named_kernels(out: str) -> list[str] | None:
    """The device kernels a process named on its standard output (the last whole line that names them), or None."""
    named = [line.removeprefix(KERNELS_MARK) for line in out.splitlines(keepends=True) if line.startswith(KERNELS_MARK)]
    whole = [line for line in named if line.endswith("\n")]  # a line still being written is read again next time
    try:
        return json.loads(whole[-1]) if whole else None
    except ValueError:  # not the list it prints: no names
        return None


def judge_run(
    tool: str, status: int, found: tuple[str, str, str], seconds: float, kernels: Sequence[str] | None = None
) -> ToolRun:
    """What one process's exit status, standard output, standard error and sanitizer log say: its findings, or why it
    proved nothing. A process that loaded the variant from the cache names no kernels: `kernels` are the names the
    variant's first process gave."""
    out, err, text = found
    named = named_kernels(out)
    kernels = named if named is not None else kernels
    findings, elsewhere, summarized = parse_report(text, kernels or [])
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
    elif kernels is None:  # no finding could be told to be the variant's
        error = f"its process did not name the variant's kernels ({KERNELS_MARK.strip()} ...) before launching it"
    return ToolRun(tool, tuple(tuple(f) for f in findings), elsewhere, error, seconds)
