"""One GPU run of main as a record of the performance history, and the history read back from its folder.

A record is one JSON file: the commit and when it was made, the run, the GPU model and the versions that decide its
speed (driver, CUDA, nvcc, torch, TileLang), and per variant its median time, its ratio to its PyTorch reference and
the spread of each. One file a run, so two runs appending at once never touch the same file, and a damaged file costs
only its own run: reading the folder reports it, by its path and what is wrong, and goes on with the others.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tilelang_golden.files import atomic_write

FORMAT = 1
RECORDS = "records"  # the history's folder of records, one subfolder per GPU model
# A timed variant's figures, named as the GPU report's (report.json) `timing` of the variant names them.
FIGURES = ("median_ms", "spread", "ratio", "ratio_spread")
NAME_LENGTH = 120  # the longest variant, GPU or version name a record may have: a page shows it whole
VERSIONS = ("driver", "cuda", "hip", "nvcc", "torch", "tilelang")  # those the device reports; unknown otherwise


class BadRecord(ValueError):
    """A record, or the report it is made from, that cannot be read: the message names the file and what is wrong."""


@dataclass(frozen=True)
class VariantFigures:
    """One variant's figures in one run: its median time, the ratio reference ms / variant ms (higher is faster; the
    figure that survives a machine change) and the spread of each over the run's rounds."""

    median_ms: float
    spread: float
    ratio: float
    ratio_spread: float


@dataclass(frozen=True)
class Record:
    commit: str  # 40 hex
    commit_time: str  # ISO 8601, the committer's: the history's order
    run_time: str  # ISO 8601, when the run was recorded: orders the runs of one commit
    run_url: str
    gpu: str  # the model, as the device reports it: one history per model
    versions: dict[str, str]
    variants: dict[str, VariantFigures]  # family/variant -> its figures

    @property
    def order(self) -> tuple[datetime, datetime]:
        return (datetime.fromisoformat(self.commit_time), datetime.fromisoformat(self.run_time))

    def file_name(self) -> str:
        """`20261203T181257Z-9ba5a60c1d2e-20261203T190000Z.json`: sorted by name, sorted by commit, then run."""
        stamp = [t.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ") for t in self.order]
        return f"{stamp[0]}-{self.commit[:12]}-{stamp[1]}.json"

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "commit": self.commit,
            "commit_time": self.commit_time,
            "run_time": self.run_time,
            "run_url": self.run_url,
            "gpu": self.gpu,
            "versions": self.versions,
            "variants": {key: vars(timed) for key, timed in sorted(self.variants.items())},
        }


def gpu_folder(gpu: str) -> str:
    """`NVIDIA H200` -> `nvidia-h200`: the GPU model's folder under records/."""
    return re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "unknown-gpu"


def record_from_report(
    report: Mapping[str, Any], commit: str, commit_time: str, run_url: str, run_time: str, where: str
) -> Record:
    """The record of one run from its GPU report; BadRecord naming `where` (the report's path) if it is not one."""
    device = _member(report, "device", dict, where)
    versions = _member(device, "versions", dict, where)
    variants = {}
    for entry in _member(report, "variants", list, where):
        timed = _timed(entry.get("timing") if isinstance(entry, dict) else None)
        if timed is not None:  # not timed (failed, does not fit): no point in this run, a gap in its plot
            variants[_name(str(entry.get("variant")), "variant", where)] = timed
    if not variants:
        raise BadRecord(f"{where}: no variant was timed in this run: there is nothing to add to the history")
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise BadRecord(f"{where}: the commit must be a full 40-hex SHA, not {commit!r}")
    for name, stamp in (("commit time", commit_time), ("run time", run_time)):
        _time(stamp, f"{where}: the {name}")
    return Record(
        commit=commit,
        commit_time=commit_time,
        run_time=run_time,
        run_url=run_url,
        gpu=_name(_member(device, "name", str, where), "gpu", where),
        versions={name: str(versions.get(name, "unknown")) for name in VERSIONS if name in versions or name != "hip"},
        variants=variants,
    )


def write_record(record: Record, folder: Path) -> Path:
    """The record under `folder`/records/<gpu model>/, written whole or not at all; its path."""
    path = folder / RECORDS / gpu_folder(record.gpu) / record.file_name()
    atomic_write(path, json.dumps(record.as_dict(), indent=1, sort_keys=True) + "\n")
    return path


@dataclass
class History:
    """Every readable record, in commit order, and each file that was skipped with why."""

    records: list[Record] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # `records/.../x.json: why`


def read_history(folder: Path) -> History:
    """The history under `folder` (the branch's checkout): never raises for a bad record, only skips it."""
    history = History()
    root = folder / RECORDS
    for path in sorted(root.rglob("*")):  # none when there is no folder yet
        if path.is_dir():
            continue
        place = str(path.relative_to(folder))
        try:
            history.records.append(read_record(path, place))
        except BadRecord as error:
            history.skipped.append(f"{error}: skipped")
    history.records.sort(key=lambda r: r.order)
    return history


def read_record(path: Path, place: str) -> Record:
    if path.suffix != ".json" or path.is_symlink():
        raise BadRecord(f"{place}: not a record (a record is a regular .json file)")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise BadRecord(f"{place}: unreadable ({error})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        found = document.get("format") if isinstance(document, dict) else type(document).__name__
        raise BadRecord(f"{place}: format {found!r}, where this harness reads format {FORMAT}")
    for name in ("commit", "commit_time", "run_time", "run_url", "gpu"):
        _member(document, name, str, place)
    for name in ("commit_time", "run_time"):
        _time(document[name], f"{place}: {name}")
    if not re.fullmatch(r"[0-9a-f]{40}", document["commit"]):
        raise BadRecord(f"{place}: the commit must be a full 40-hex SHA, not {_shown(document['commit'])}")
    _name(document["gpu"], "gpu", place)
    variants = {}
    for key, figures in _member(document, "variants", dict, place).items():
        timed = _timed(figures)
        if timed is None:
            raise BadRecord(
                f"{place}: variant {_shown(key)} lacks finite figures {', '.join(FIGURES)} (time and ratio positive, "
                "spreads not negative)"
            )
        variants[_name(key, "variant", place)] = timed
    versions = _member(document, "versions", dict, place)
    return Record(
        document["commit"],
        document["commit_time"],
        document["run_time"],
        document["run_url"],
        document["gpu"],
        {_name(str(k), "version", place): _name(str(v), "version", place) for k, v in versions.items()},
        variants,
    )


def _name(text: str, what: str, place: str) -> str:
    """`text` where it is a name a page can show: printable, at most NAME_LENGTH characters, and a variant's in the
    form family/variant; BadRecord otherwise (the page escapes it and maps it to a safe file name either way)."""
    fits = len(text) <= NAME_LENGTH and text.isprintable() and text.strip() == text and text != ""
    if what == "variant":
        family, slash, variant = text.partition("/")
        fits = fits and bool(slash and family and variant)
    if not fits:
        raise BadRecord(f"{place}: {what} {_shown(text)} is no name to show (printable, 1 to {NAME_LENGTH} characters"
                        f"{', family/variant' if what == 'variant' else ''})")  # fmt: skip
    return text


def _shown(text: Any) -> str:
    """`text` as a skipped record's reason may quote it: repr, cut short (the reason is listed on the page)."""
    said = repr(text)
    return said if len(said) <= 60 else f"{said[:57]}..."


def _timed(timing: Any) -> VariantFigures | None:
    if not isinstance(timing, dict):
        return None
    figures = {name: timing.get(name) for name in FIGURES}
    if not all(_finite(value) for value in figures.values()):
        return None
    # A time or a ratio is positive, a spread is not negative: anything else is no measurement to draw.
    if figures["median_ms"] <= 0 or figures["ratio"] <= 0 or figures["spread"] < 0 or figures["ratio_spread"] < 0:
        return None
    return VariantFigures(**{name: float(value) for name, value in figures.items()})


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _member(document: Mapping[str, Any], name: str, kind: type, where: str) -> Any:
    value = document.get(name)
    if not isinstance(value, kind):
        raise BadRecord(f"{where}: {name!r} is missing or not a {kind.__name__}")
    return value


def _time(stamp: str, what: str) -> datetime:
    try:
        found = datetime.fromisoformat(stamp)
    except ValueError:
        raise BadRecord(f"{what} {stamp!r} is not an ISO 8601 time") from None
    if found.tzinfo is None:
        raise BadRecord(f"{what} {stamp!r} has no time zone (write it as git log's %cI does)")
    return found
