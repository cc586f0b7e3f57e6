"""Snapshots on disk: rendering facts and CUDA as text, reading them back, atomic writes, manifest.

A snapshot is a set of text files under `golden/`, addressed by paths relative to it. Every
write goes through a temporary file and an atomic rename, so an interrupted regen leaves each
file either old or new.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.facts import FORMAT_VERSION

MANIFEST = "MANIFEST.yaml"
FACTS_HEADER = "# Facts of one lowering, written by `nox -s regen-golden`; never edit by hand.\n"


class CorruptSnapshot(ValueError):
    """A snapshot file that cannot be read as what it claims to be; the message names it."""


def render_facts(facts: dict[str, Any]) -> str:
    """Facts as YAML: keys in extraction order, scalar lists inline, safe types only."""
    return FACTS_HEADER + yaml.safe_dump(facts, sort_keys=False, default_flow_style=None, width=120)


# Top-level keys of a facts file and the type each must have.
FACTS_SCHEMA: dict[str, type | tuple[type, ...]] = {
    "format": int,
    "case": dict,
    "params": dict,
    "pipelines": list,
    "warp_specialized": bool,
    "shared_buffers": dict,
    "dynamic_shared_memory_bytes": int,
    "launch": dict,
    "sync": dict,
    "mma": dict,
}


def parse_facts(text: str, path: str) -> dict[str, Any]:
    """Parse a facts file; raise CorruptSnapshot naming `path` and the problem."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise CorruptSnapshot(f"{path}: not valid YAML ({error})".replace("\n", " ")) from None
    if not isinstance(data, dict):
        raise CorruptSnapshot(f"{path}: expected a mapping of facts, found {type(data).__name__}")
    if "format" in data and data["format"] != FORMAT_VERSION:
        raise CorruptSnapshot(
            f"{path}: snapshot format {data['format']!r}, this harness reads and writes format "
            f"{FORMAT_VERSION}; run `nox -s regen-golden` to rewrite the snapshots"
        )
    missing = [key for key in FACTS_SCHEMA if key not in data]
    unknown = [key for key in data if key not in FACTS_SCHEMA]
    wrong = [
        f"{key} is {type(data[key]).__name__}, expected {FACTS_SCHEMA[key].__name__}"
        for key in FACTS_SCHEMA
        if key in data and (type(data[key]) is not FACTS_SCHEMA[key])  # bool is not an int here
    ]
    problems = [f"missing keys {missing}"] * bool(missing) + [f"unknown keys {unknown}"] * bool(unknown) + wrong
    if problems:
        raise CorruptSnapshot(f"{path}: {'; '.join(problems)}")
    return data


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader sees the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class SnapshotStore:
    """A folder of snapshot files (`golden/`, or the pending folder beside it)."""

    root: Path

    def read(self, relative: str) -> str | None:
        path = self.root / relative
        if not path.is_file():
            return None
        with open(path, encoding="utf-8", newline="") as stream:
            return stream.read()

    def write(self, relative: str, text: str) -> str:
        """Write one file if its content changed; return created, updated or unchanged."""
        old = self.read(relative)
        if old == text:
            return "unchanged"
        atomic_write(self.root / relative, text)
        return "created" if old is None else "updated"

    def delete(self, relative: str) -> None:
        """Remove one file and the folders it leaves empty (up to the root)."""
        path = self.root / relative
        path.unlink()
        for folder in path.parents:
            if folder == self.root or not folder.is_relative_to(self.root) or any(folder.iterdir()):
                break
            folder.rmdir()

    def files(self) -> set[str]:
        """Every snapshot file under the root, as paths relative to it (manifest excluded)."""
        if not self.root.is_dir():
            return set()
        found = {p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file()}
        return {f for f in found if f != MANIFEST and not f.startswith("timing/") and not Path(f).name.startswith(".")}

    def read_manifest(self) -> dict[str, Any] | None:
        text = self.read(MANIFEST)
        if text is None:
            return None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise CorruptSnapshot(f"{self.root / MANIFEST}: not valid YAML ({error})".replace("\n", " ")) from None
        if not isinstance(data, dict) or not {"format", "tilelang"} <= set(data):
            raise CorruptSnapshot(f"{self.root / MANIFEST}: expected a mapping with keys format and tilelang")
        return data


def render_manifest(tilelang_version: str) -> str:
    return (
        "# What every snapshot under golden/ was produced with; written by `nox -s regen-golden`.\n"
        + yaml.safe_dump({"format": FORMAT_VERSION, "tilelang": tilelang_version}, sort_keys=False)
    )


def installed_tilelang_version() -> str:
    from importlib.metadata import version

    return version("tilelang")
