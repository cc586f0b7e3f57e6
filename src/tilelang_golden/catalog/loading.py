"""How the harness finds a repository's families: every module of its family packages holding `FAMILY = Family(...)`,
checked as it loads; a module that fails is reported as broken and the others still load."""

from __future__ import annotations
import __future__

import copy
import importlib
import pkgutil
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilelang_golden.config import DEFAULT_FAMILIES, DEFAULT_GOLDEN
from tilelang_golden.family import Family, FamilyError


@dataclass(frozen=True)
class BrokenFamily:
    """A module under kernels/ that does not yield a usable family; its cases are not run."""

    name: str
    file: str
    error: str


@dataclass(frozen=True)
class Registry:
    families: tuple[Family, ...]
    broken: tuple[BrokenFamily, ...]


def shown_file(package: Any, package_name: str, name: str) -> str:
    """A family module's file as messages name it: its path from the repository's root (the working directory),
    `src/acme/ops/attention.py`; a package outside the repository by its dotted name, `acme/ops/attention.py`."""
    path = Path(list(package.__path__)[0]) / f"{name}.py"
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return f"{package_name.replace('.', '/')}/{name}.py"


def family_modules(package: Any) -> list[str]:
    """Module names of a package's family files: every module not starting with `_`."""
    return sorted(info.name for info in pkgutil.iter_modules(package.__path__) if not info.name.startswith("_"))


def load_families(*packages: str, snapshot_folder: str = f"{DEFAULT_GOLDEN}/") -> Registry:
    """Import every family module of each package (default: tilelang_golden.config's DEFAULT_FAMILIES), in order; a
    module that fails is reported, the others still load. A run loads its families once and passes them on: nothing
    here is cached, so two runs in one process (the tests) see the families each names."""
    families: list[Family] = []
    broken: list[BrokenFamily] = []
    for package_name in packages or DEFAULT_FAMILIES:
        found = _load_package(package_name, {f.name: f.file for f in families}, snapshot_folder)
        families += found.families
        broken += found.broken
    return Registry(tuple(families), tuple(broken))


def on_targets(registry: Registry, targets: Sequence[str] | None) -> Registry:
    """Every family on those of its targets that `targets` names (the repository's `targets` setting; None: all).
    Copies, not `replace`: a family's declarations were checked against all its targets, and a `does_not_lower`
    entry for a target left out is simply never read."""
    if targets is None:
        return registry
    narrowed = []
    for family in registry.families:
        narrowed.append(copy.copy(family))
        object.__setattr__(narrowed[-1], "targets", tuple(t for t in family.target_names if t in targets))
    return Registry(tuple(narrowed), registry.broken)


def _load_package(package_name: str, taken: Mapping[str, str], snapshot_folder: str) -> Registry:
    """One package's families; a name another package's family has is refused (its snapshots are under
    `<snapshot_folder><name>/`)."""
    package = importlib.import_module(package_name)
    families: list[Family] = []
    broken: list[BrokenFamily] = []
    for name in family_modules(package):
        file = shown_file(package, package_name, name)
        try:
            module = importlib.import_module(f"{package_name}.{name}")
            if getattr(module, "annotations", None) is __future__.annotations:
                raise FamilyError(
                    f"{file}: remove `from __future__ import annotations`: it turns every annotation into a string, "
                    "and TileLang resolves a kernel's `T.Tensor(...)` annotations from those strings, so a kernel "
                    "whose shapes use names local to its factory fails to trace with NameError"
                )
            family = getattr(module, "FAMILY", None)
            if not isinstance(family, Family):
                raise FamilyError(
                    f"{file}: a family module must define FAMILY = Family(...) (found {type(family).__name__}); "
                    "start the file name with `_` if it is not a family"
                )
            if name in taken:
                raise FamilyError(
                    f"{file}: family {name!r} is also {taken[name]}; its snapshots live under "
                    f"{snapshot_folder}{name}/, so a name is one family in a run: rename one module"
                )
            if family.name != name:
                raise FamilyError(
                    f"{file}: FAMILY.name is {family.name!r}; it must be the module's name, {name!r}, "
                    f"because its snapshots live under {snapshot_folder}{name}/"
                )
        except FamilyError as error:
            broken.append(BrokenFamily(name, file, str(error)))
            continue
        except Exception as error:  # a family file that does not import must not stop the others
            where = traceback.extract_tb(error.__traceback__)[-1]
            broken.append(
                BrokenFamily(
                    name,
                    file,
                    f"{file}: importing it raised {type(error).__name__}: {error} "
                    f"(at {Path(where.filename).name}:{where.lineno}); fix the file and rerun",
                )
            )
            continue
        object.__setattr__(family, "file", file)
        object.__setattr__(family, "package", package_name)
        families.append(family)
    return Registry(tuple(families), tuple(broken))
