"""A content-addressed cache of what a case's lowering produces: its snapshot files, keyed on every input.

The key is a hash of what the lowering really consumes and of the code that turns it into files:
the PrimFunc as TileLang will lower it (printed with its metadata, after the family's kernel was
traced), the target's description, the pass configs, the case's names, parameters and declared
failure, the TileLang build (its version and the hash of its installed files' list), the
environment variables TileLang and TVM read, and the source of every harness module that produces
snapshot files. An entry holds exactly the files a fresh lowering writes; a corrupt, truncated or
mismatched entry is a miss with a warning, never a hit.

Modes: `read_write` (a check: hits are used, misses lowered and stored), `refresh` (every case is
lowered fresh and stored, and an entry already stored under the same key must hold the same files,
or the key misses an input: `StaleCacheEntry`). `nox -s regen-golden` and pushes to main refresh.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from tilelang_golden.catalog.build import BuiltKernel
from tilelang_golden.catalog.cases import Case
from tilelang_golden.family import snapshot_params
from tilelang_golden.files import atomic_write
from tilelang_golden.static.produce.toolchain import toolchain_build
from tilelang_golden.targets import TARGETS

# What an entry file holds; a change to it makes every old entry a miss.
ENTRY_FORMAT = 1
# Environment variables TileLang and TVM read (their prefixes): a different value may change a lowering.
ENVIRONMENT_PREFIXES = ("TL_", "TVM_", "TILELANG_")
# The module whose transitive harness imports produce the snapshot files (their source is in the key).
PRODUCER = "tilelang_golden.static.session"
# The package's folder, wherever this module sits in it.
HARNESS_ROOT = Path(find_spec(__name__.split(".")[0]).origin).resolve().parent


class CorruptEntry(UserWarning):
    """A cache entry that could not be read as what its name claims; it was ignored and will be rewritten."""


class StaleCacheEntry(RuntimeError):
    """A fresh lowering differs from the entry stored under the same key: the key misses an input."""


@dataclass(frozen=True)
class LoweringCache:
    """A folder of entries `<key[:2]>/<key>.json`; `read` False for a refresh (lower everything, store it). The
    machine code its cases compiled to is kept in `machine_code` (default: its `machine-code` folder), which a
    refresh reads too (`machine_code_cache`)."""

    root: Path
    read: bool = True
    machine_code_root: Path | None = None

    @property
    def machine_code(self) -> Path:
        return self.machine_code_root or self.root / "machine-code"

    def files(
        self, case: Case, key: str, lower: Callable[[], dict[str, str]], names: Sequence[str]
    ) -> tuple[dict[str, str], str]:
        """The case's snapshot files under `key` (`case_key`), and where they came from: `cache` (the entry stored
        under the key, holding exactly the files `names`) or `lowered` (`lower()`, then stored)."""
        stored = self._load(key, case, names)
        if self.read and stored is not None:
            return stored, "cache"
        files = lower()
        if stored is not None and stored != files:
            changed = sorted(path for path in files if files[path] != stored.get(path))
            raise StaleCacheEntry(
                f"{case.id}: the lowering cache holds other files under this case's key ({changed}): the key misses "
                f"an input of the lowering (static/produce/lowering_cache.py); delete {self.root} and report it"
            )
        self._store(key, case, files)
        return files, "lowered"

    def holds(self, case: Case, key: str, names: Sequence[str]) -> bool:
        """Whether a valid entry under the case's key, of the files `names`, is stored (a corrupt one warns, and
        counts as none)."""
        return self._load(key, case, names) is not None

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def _load(self, key: str, case: Case, names: Sequence[str]) -> dict[str, str] | None:
        path = self._path(key)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as error:
            return _ignored(path, f"unreadable ({error})")
        try:
            entry = json.loads(text)
            files = entry["files"]
            valid = (
                entry["format"] == ENTRY_FORMAT
                and entry["key"] == key
                and entry["case"] == case.id
                and entry["digest"] == _digest(files)
                and sorted(files) == sorted(names)
            )
        except (ValueError, KeyError, TypeError) as error:  # truncated or not an entry at all
            return _ignored(path, f"not a cache entry ({type(error).__name__}: {error})")
        if not valid:
            return _ignored(path, "its format, key, case, files or digest do not match")
        return files

    def _store(self, key: str, case: Case, files: dict[str, str]) -> None:
        entry = {"format": ENTRY_FORMAT, "key": key, "case": case.id, "digest": _digest(files), "files": files}
        atomic_write(self._path(key), json.dumps(entry, sort_keys=True))


def _ignored(path: Path, why: str) -> None:
    warnings.warn(f"{path}: lowering cache entry ignored, {why}; the case is lowered again", CorruptEntry, 2)
    return None


def _digest(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


# -- the key -------------------------------------------------------------------------------------


def case_key(case: Case, traced: Mapping[str, Any], code: Mapping[str, str]) -> str:
    """The hash of every input of the case's lowering: the case itself, its kernel as traced (`traced_kernel`), the
    environment, and the code that lowers it and turns the lowering into files (`installed_code`)."""
    inputs = {
        "entry_format": ENTRY_FORMAT,
        "case": case.id,
        "params": snapshot_params(case.params),
        "does_not_lower": case.does_not_lower,
        "target": TARGETS[case.target].description,
        **traced,
        **code,
        "environment": lowering_environment(),
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()


def traced_kernel(built: BuiltKernel) -> dict[str, Any]:
    """The variant's PrimFunc as text (with its metadata) and its pass configs, as the key reads them. Taken before
    any of the variant's lowerings: a jit kernel hands out one PrimFunc per argument set, and TileLang's passes
    rewrite parts of it in place (a launch thread's name), so printed after a lowering it would read differently."""
    return {
        "prim_func": "\n".join(launch.prim_func.script(show_meta=True) for launch in built.launches),
        "pass_configs": [dict(launch.pass_configs) for launch in built.launches],
    }


def installed_code() -> dict[str, str]:
    """The TileLang build, NVIDIA's compilers and the harness code a lowering's files depend on, for the key: the
    same for every case of a run, so a run reads it once (it hashes installed files)."""
    return {"tilelang": tilelang_build(), "toolchain": toolchain_build(), "harness": harness_fingerprint()}


def lowering_environment() -> dict[str, str]:
    """The variables TileLang and TVM may read, with their values. TileLang sets some itself on import, to paths
    inside its own installation: those paths read `<tilelang>/...`, so that the key does not depend on where the
    venv lives (a checkout moved, a CI cache restored under another path); the build itself is in the key
    (`tilelang_build`)."""
    home = tilelang_home()
    return {
        name: value.replace(home, "<tilelang>") if home else value
        for name, value in sorted(os.environ.items())
        if name.startswith(ENVIRONMENT_PREFIXES)
    }


def tilelang_home() -> str | None:
    """The folder of the installed tilelang package, found without importing it."""
    spec = find_spec("tilelang")
    return spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else None


def tilelang_build() -> str:
    """TileLang's version and the hash of its wheel's RECORD (every installed file with its own hash)."""
    try:
        installed = distribution("tilelang")
    except PackageNotFoundError:
        return "not installed"
    record = installed.read_text("RECORD") or ""
    return f"{installed.version} {hashlib.sha256(record.encode()).hexdigest()}"


def harness_fingerprint() -> str:
    """A hash of the source of every module that turns a lowering into snapshot files (normalization, facts,
    rendering, format versions): `producing_modules`."""
    digest = hashlib.sha256()
    for module, path in sorted(_producing_paths().items()):
        digest.update(module.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def producing_modules() -> set[str]:
    """`tilelang_golden.static.session` (what a run lowers and produces through) and every harness module it
    imports, transitively."""
    return set(_producing_paths())


def _producing_paths() -> dict[str, Path]:
    found: dict[str, Path] = {}
    pending = [PRODUCER]
    while pending:
        module = pending.pop()
        path = None if module in found else _module_path(module)
        if path is not None:
            found[module] = path
            pending += _harness_imports(path.read_bytes())
    return found


def _module_path(module: str) -> Path | None:
    """The file of a harness module (or package), or None for a name that is not one (an imported attribute)."""
    relative = Path(*module.split(".")[1:])
    for path in (HARNESS_ROOT / relative / "__init__.py", (HARNESS_ROOT / relative).with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _harness_imports(source: bytes) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return [name for name in names if name.split(".")[0] == __name__.split(".")[0]]
