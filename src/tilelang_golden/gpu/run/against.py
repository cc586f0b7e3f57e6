"""The pull request's kernels against the base's (`nox -s gpu -- --against REF`): what is compared, and the base's
families.

A variant is A/B-timed when its static snapshot for the device's target differs between REF and the
working tree: its kernel changed. REF's kernel is built from REF's own family file, imported beside
the working tree's under another name (the harness is the working tree's), from REF's copy of each package of
families (`kernels/`, or the repository's own: `src/acme/ops/`). A variant whose
snapshot did not change has the same kernel on both sides and keeps the baseline's check only. One
new in the working tree, gone from it, or whose base cannot be built is reported as such, never
timed against nothing.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import io
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from tilelang_golden.catalog.cases import Case
from tilelang_golden.catalog.loading import Registry, load_families
from tilelang_golden.config import DEFAULT_FAMILIES
from tilelang_golden.family import Family
from tilelang_golden.static.snapshots.case_files import case_files

# Where REF's packages of families are unpacked, one folder per commit, relative to the checkout (build/ is ignored).
BASE_TREES = PurePath("build/against")
BASE_NAME = "@base"  # a base family's name is its own plus this: its cases' keys never meet the working tree's
# A base family's package as a worker finds it again: `<its folder in the base tree>:<package>`.
BASE_PACKAGE = ":"

# Why a variant is not A/B-timed although it runs here.
NEW = "new in the working tree: no snapshot at the base"


class BaseUnavailable(RuntimeError):
    """REF is not a commit of this clone, or its packages of families cannot be read: nothing can be compared."""


@dataclass(frozen=True)
class Base:
    """REF resolved to a commit, and its packages of families unpacked under `tree`, each in its folder."""

    ref: str
    sha: str
    tree: PurePath
    folders: dict[str, PurePath] = field(default_factory=dict)  # package -> its folder in the repository

    @property
    def short(self) -> str:
        return self.sha[:12]


@dataclass(frozen=True)
class AbPairs:
    """What the A/B timing compares on one target: PR key -> the base's case, and every other variant with why."""

    base: Base
    pairs: dict[str, Case] = field(default_factory=dict)
    not_compared: dict[str, str] = field(default_factory=dict)  # PR key -> why (new, base not built, ...)
    unchanged: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)  # at the base, absent from the working tree


def git(*args: str, stdin: bytes | None = None) -> bytes:
    """A git command's standard output; BaseUnavailable with git's own words when it fails."""
    try:
        done = subprocess.run(["git", *args], input=stdin, capture_output=True, check=False)
    except OSError as error:
        raise BaseUnavailable(f"git could not be run ({error}); --against needs git and the clone's history") from None
    if done.returncode != 0:
        raise BaseUnavailable(f"`git {' '.join(args)}` failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def package_folder(package: str) -> PurePath:
    """A package's folder from the repository's root (the working directory): `src/acme/ops`; one imported from
    outside the repository by its dotted name (`kernels`), where a tree holds it."""
    folder = Path(list(importlib.import_module(package).__path__)[0]).resolve()
    try:
        return PurePath(folder.relative_to(Path.cwd().resolve()))
    except ValueError:
        return PurePath(*package.split("."))


def resolve(ref: str, packages: Sequence[str] = DEFAULT_FAMILIES) -> Base:
    """REF as a commit of this clone, its copy of each package of families unpacked (once per commit) under
    build/against/."""
    try:
        sha = git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").decode().strip()
    except BaseUnavailable:
        raise BaseUnavailable(
            f"--against {ref}: not a commit of this clone; fetch it first (in CI: the pull request's merge base, "
            f"`git fetch origin <sha>`)"
        ) from None
    base = Base(ref, sha, BASE_TREES / sha[:12], {package: package_folder(package) for package in packages})
    for folder in base.folders.values():
        if not (Path(base.tree) / folder / "__init__.py").is_file():
            archive = git("archive", "--format=tar", sha, folder.as_posix())
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(base.tree, filter="data")
    return base


def load_package(package: str) -> Registry:
    """A package of family files as `tilelang_golden.gpu.kernel_session.case_ref` names it: this checkout's, by its name
    (`kernels`, `tests.gpu_families`), or a base tree's, `<folder>:<package>`
    (`build/against/<sha>/src/acme/ops:acme.ops`)."""
    if BASE_PACKAGE in package:
        folder, name = package.rsplit(BASE_PACKAGE, 1)
        return load_base(PurePath(folder), name)
    return load_families(package)


def load_bases(base: Base) -> Registry:
    """Every package of families of the base, in the order of its folders."""
    loaded = [load_base(base.tree / folder, package) for package, folder in base.folders.items()]
    return Registry(
        tuple(f for each in loaded for f in each.families), tuple(b for each in loaded for b in each.broken)
    )


def load_base(folder: PurePath, package_name: str) -> Registry:
    """A base package's families, imported from its folder beside this checkout's package of the same name: while
    they import, the name is the base's package (so `from kernels._gemm import ...` finds the base's helper), and
    afterwards this checkout's modules are back. Each family is renamed `<name>@base` and its file is the one in
    the tree."""
    ours = {name: module for name, module in sys.modules.items() if _in_package(name, package_name)}
    for name in ours:
        del sys.modules[name]
    try:
        # The base's package by its file, its modules found in its own folder: nothing on sys.path changes.
        spec = importlib.util.spec_from_file_location(
            package_name, Path(folder) / "__init__.py", submodule_search_locations=[str(folder)]
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules[package_name] = package
        spec.loader.exec_module(package)
        loaded = load_families(package_name)
    finally:
        for name in [name for name in sys.modules if _in_package(name, package_name)]:
            del sys.modules[name]
        sys.modules.update(ours)
    families = []
    for family in loaded.families:
        renamed = dataclasses.replace(family)  # the base's own object stays as its module holds it
        object.__setattr__(renamed, "name", f"{family.name}{BASE_NAME}")
        object.__setattr__(renamed, "file", (folder / PurePath(family.file).name).as_posix())
        object.__setattr__(renamed, "package", f"{folder.as_posix()}{BASE_PACKAGE}{package_name}")
        families.append(renamed)
    broken = tuple(dataclasses.replace(b, file=(folder / PurePath(b.file).name).as_posix()) for b in loaded.broken)
    return Registry(tuple(families), broken)


def _in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def base_snapshots(base: Base, paths: Sequence[str]) -> dict[str, bytes | None]:
    """Each path's content at the base (None where the base has no such file), read in one `git cat-file`."""
    if not paths:
        return {}
    answer = git("cat-file", "--batch", stdin="".join(f"{base.sha}:{p}\n" for p in paths).encode())
    found: dict[str, bytes | None] = {}
    at = 0
    for path in paths:
        end = answer.index(b"\n", at)
        header = answer[at:end].split()
        if header[-1] == b"missing":
            found[path], at = None, end + 1
            continue
        size = int(header[2])
        found[path], at = answer[end + 1 : end + 1 + size], end + 1 + size + 1
    return found


def pair_with_base(
    base: Base, cases: Sequence[Case], target: str, golden: PurePath, known: Sequence[str], every: bool = False
) -> AbPairs:
    """Which of `cases` (this checkout's, on `target`) changed since the base, each paired with the base's case;
    `known`: every variant key of this checkout, so that a variant the base has and this checkout lost is gone.
    `every`: pair the unchanged variants too (identical kernels: what a false alarm of the A/B gate looks like)."""
    paths = [f"{golden.as_posix()}/{name}" for case in cases for name in case_files(case)]
    at_base = base_snapshots(base, paths)
    try:
        loaded = load_bases(base)
        families: dict[str, Family | str] = {b.name: b.error for b in loaded.broken}
        families.update({f.name.removesuffix(BASE_NAME): f for f in loaded.families})
        base_error = None
    except Exception as error:  # a base package did not import at all: say so per variant
        families, base_error = {}, f"the base's families did not load with this harness ({error})"
    result = AbPairs(base)
    for case in cases:
        files = [f"{golden.as_posix()}/{name}" for name in case_files(case)]
        if all(at_base[path] is None for path in files):
            result.not_compared[case.key] = NEW
        elif not every and all(at_base[path] == _read(Path(path)) for path in files):
            result.unchanged.append(case.key)
        elif base_error:
            result.not_compared[case.key] = base_error
        else:
            paired = _base_case(families.get(case.family.name), case, base)
            if isinstance(paired, Case):
                result.pairs[case.key] = paired
            else:
                result.not_compared[case.key] = paired
    result.gone.extend(sorted(_keys_at_base(base, golden, target) - set(known)))
    return result


def _base_case(family: Family | str | None, case: Case, base: Base) -> Case | str:
    """The base's case of the same variant on the same target, or why there is none."""
    if family is None:
        return f"{base.short}:{case.family.file} has no family {case.family.name!r}"
    if isinstance(family, str):
        return f"the base's family file does not load with this harness: {family}"
    names = {v.name: v for v in family.variants}
    if case.variant.name not in names:
        return f"{base.short}:{case.family.file} has no variant {case.variant.name!r}"
    return Case(family, names[case.variant.name], case.target)


def _keys_at_base(base: Base, golden: PurePath, target: str) -> set[str]:
    """`family/variant` of every snapshot the base holds for `target`."""
    listed = git("ls-tree", "-r", "--name-only", base.sha, "--", golden.as_posix()).decode().splitlines()
    keys = set()
    for path in listed:
        parts = PurePath(path).relative_to(golden).parts
        if len(parts) == 3 and PurePath(parts[2]).stem == target:
            keys.add(f"{parts[0]}/{parts[1]}")
    return keys


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None
