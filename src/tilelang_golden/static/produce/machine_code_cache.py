"""A content-addressed store of compiled machine code, kept across runs beside the lowering cache.

nvcc is the dearest step of a case after TileLang's lowering, and what it makes of a module is decided by the
module's CUDA text, arch and options (`machine_code.Module.key`) and by the compilers and headers that read it. An
entry is keyed on those and on the installed code a lowering's files depend on (`lowering_cache.installed_code`:
TileLang's build, NVIDIA's compilers, the harness's producing modules), so a key names one compile's output and
nothing else. A regen reads it too: it lowers every case afresh to prove the lowering deterministic, and CUDA text it
has seen before compiles to what it compiled to then. A corrupt entry is a miss with a warning, never a hit.
"""

from __future__ import annotations

import base64
import hashlib
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tilelang_golden.files import atomic_write
from tilelang_golden.static.produce.lowering_cache import CorruptEntry
from tilelang_golden.static.produce.machine_code import PackedCode

# What an entry file holds; a change to it makes every old entry a miss.
ENTRY_FORMAT = 1


@dataclass(frozen=True)
class MachineCodeCache:
    """A folder of entries `<key[:2]>/<key>.json`, one per distinct module and installed code."""

    root: Path

    def load(self, module_key: str, code: Mapping[str, str]) -> PackedCode | None:
        """The machine code stored for the module under this installed code, or None."""
        key = entry_key(module_key, code)
        path = self._path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            if entry["format"] != ENTRY_FORMAT or entry["key"] != key:
                return _ignored(path, "its format or key does not match")
            listings = {name: base64.b64decode(data, validate=True) for name, data in entry["listings"].items()}
            return PackedCode(entry["arch"], tuple(entry["options"]), dict(entry["reports"]), listings)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            return _ignored(path, f"not a machine code entry ({type(error).__name__}: {error})")

    def store(self, module_key: str, code: Mapping[str, str], packed: PackedCode) -> None:
        key = entry_key(module_key, code)
        listings = {name: base64.b64encode(data).decode() for name, data in packed.listings.items()}
        entry = {"format": ENTRY_FORMAT, "key": key, "arch": packed.arch, "options": list(packed.options),
                 "reports": dict(packed.reports), "listings": listings}  # fmt: skip
        atomic_write(self._path(key), json.dumps(entry, sort_keys=True))

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"


def entry_key(module_key: str, code: Mapping[str, str]) -> str:
    """The module's key (its arch, options and CUDA) with the installed code that compiles it and reads the result."""
    return hashlib.sha256(json.dumps({"module": module_key, **code}, sort_keys=True).encode()).hexdigest()


def _ignored(path: Path, why: str) -> None:
    warnings.warn(f"{path}: machine code cache entry ignored, {why}; the module is compiled again", CorruptEntry, 3)
    return None
