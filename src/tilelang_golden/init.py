"""`tilelang-golden init`: what a repository needs to run the harness, written into it.

    tilelang-golden init --families acme.ops [--golden tests/golden] [--harness REQUIREMENT]
    tilelang-golden init --print PATH      # one file as init would write it (to merge by hand)

It writes the nox sessions (noxfile.py), the workflows (static, regen, comment, gpu) and the scripts they run from
the default branch (.github/regen-patch-check, dispatched-commit, gpu-report-unpack), the inputs of the hashed locks
(requirements*.in; `nox -s lock` makes the locks), the GPU runners' set-up (deploy/arc/) and .gitignore's lines, and
adds `[tool.tilelang-golden]` to pyproject.toml where it has none. It never overwrites: a file that exists with
other content is left as it is and listed with what to merge, and the command then exits 1. The files are this
repository's own (tilelang_golden/init_files/: the workflows, locks' inputs and runner set-up are links to them), so a
repository runs what the harness's own CI runs. The harness the sessions install must be pinned by content (a git
URL at a commit, an archive's URL with its SHA-256): the name `tilelang-golden` is not registered on PyPI, so a
requirement resolved from an index would install whatever anyone uploads under it.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata, resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from tilelang_golden.config import DEFAULT_SHARDS, PYPROJECT, SECTION, ConfigError, read_config

DISTRIBUTION = "tilelang-golden"
# Names a wheel keeps apart from where they go: a folder or file starting with a dot is easily lost on the way.
DESTINATIONS = {"github": ".github", "gitignore": ".gitignore"}
NEXT_STEPS = """next, in this repository:
  nox -s lock            # the hashed locks from requirements*.in (CPython 3.11; needs PyPI and PyTorch's index)
  nox -s regen-golden    # the first snapshots
  nox -s static          # green: what every pull request runs
  git add -A && git commit -m "Golden-file CI for our TileLang kernels"
docs: the harness's docs/adoption.md (the workflows' settings, the GPU runners)"""


@dataclass(frozen=True)
class Outcome:
    path: str  # relative to the repository
    action: str  # "written", "unchanged" or "exists"


def shipped() -> dict[str, Traversable]:
    """Every file init writes, by its path in the repository."""
    found: dict[str, Traversable] = {}

    def walk(folder: Traversable, prefix: tuple[str, ...]) -> None:
        for entry in folder.iterdir():
            if entry.name == "__pycache__":
                continue
            parts = (*prefix, DESTINATIONS.get(entry.name, entry.name) if not prefix else entry.name)
            if entry.is_dir():
                walk(entry, parts)
            else:
                found["/".join(parts)] = entry

    walk(resources.files("tilelang_golden") / "init_files", ())
    return dict(sorted(found.items()))


def requirement_from_origin(direct_url: str | None, version: str) -> str:
    """The requirement that installs the harness as pip installed it here, from PEP 610's direct_url.json
    (`direct_url`; None where pip took it from an index, which records only its `version`): a VCS URL at its commit,
    an archive's URL with the SHA-256 pip recorded for it, a folder's URL. Whether that pins the harness is
    unpinned_harness's to say."""
    if direct_url is None:
        return f"{DISTRIBUTION}=={version}"
    origin = json.loads(direct_url)
    fragment = []
    archive = origin.get("archive_info")
    if archive is not None:
        hashes = dict(archive.get("hashes") or {})
        if "=" in archive.get("hash", ""):  # the field's older form, "sha256=<hex>"
            name, _, value = archive["hash"].partition("=")
            hashes.setdefault(name, value)
        fragment += [f"sha256={hashes['sha256']}"] if "sha256" in hashes else []
    if origin.get("subdirectory"):
        fragment.append(f"subdirectory={origin['subdirectory']}")
    url = origin["url"]
    vcs = origin.get("vcs_info")
    if vcs:
        url = f"{vcs['vcs']}+{url}@{vcs['commit_id']}"
    return f"{DISTRIBUTION} @ {url}" + (f"#{'&'.join(fragment)}" if fragment else "")


@functools.cache
def _shipped_noxfile_function(name: str) -> Callable[..., Any]:
    """One function of the shipped noxfile, defined from its source alone: importing the noxfile needs nox, which
    the harness's environment need not have. The function imports what it uses itself."""
    tree = ast.parse((resources.files("tilelang_golden") / "init_files" / "noxfile.py").read_text())
    (function,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module(body=[function], type_ignores=[]), "noxfile.py", "exec"), namespace)
    return namespace[name]


def unpinned_harness(requirement: str) -> str | None:
    """Why the sessions would refuse to install `requirement` as the harness, and what to name instead; None where it
    pins one. The rule is the shipped noxfile's `unpinned_harness`, which each session applies before installing."""
    return _shipped_noxfile_function("unpinned_harness")(requirement)


def harness_requirement(given: str | None) -> str:
    """What the sessions install as the harness: `given` (--harness), or where the harness here was installed from.
    ConfigError where that does not pin it: a name anyone could register on PyPI, or a URL whose content can move."""
    if given is None:
        try:
            distribution = metadata.distribution(DISTRIBUTION)
        except metadata.PackageNotFoundError:
            raise ConfigError(f"{DISTRIBUTION} is not installed here; pass --harness REQUIREMENT") from None
        requirement = requirement_from_origin(distribution.read_text("direct_url.json"), distribution.version)
    else:
        requirement = given
    unpinned = unpinned_harness(requirement)
    if unpinned:
        where = "--harness" if given is not None else "the harness as installed here:"
        advice = "" if given is not None else "; pass that with --harness"
        raise ConfigError(f"{where} {unpinned}{advice}")
    return requirement


def settings_section(families: Sequence[str], golden: str, harness: str) -> str:
    listed = ", ".join(json.dumps(name) for name in families)
    return (
        f"\n[tool.{SECTION}]\n"
        f"families = [{listed}]  # the packages of family files\n"
        f"golden = {json.dumps(golden)}  # the snapshot folder\n"
        f"harness = {json.dumps(harness)}  # what the nox sessions install\n"
        f"shards = {DEFAULT_SHARDS}  # the static workflow's golden jobs (`tilelang-golden costs` predicts them)\n"
    )


def write_files(root: Path, files: dict[str, Traversable]) -> list[Outcome]:
    """Each file written where nothing is; one that exists is never touched."""
    outcomes = []
    for name, source in files.items():
        target = root / name
        content = source.read_bytes()
        if target.exists():
            same = target.is_file() and target.read_bytes() == content
            outcomes.append(Outcome(name, "unchanged" if same else "exists"))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        if content.startswith(b"#!"):
            target.chmod(0o755)  # a script the runner's image runs (deploy/arc/image/serve)
        outcomes.append(Outcome(name, "written"))
    return outcomes


def merge_advice(name: str) -> str:
    if name == "noxfile.py":
        return (
            "  noxfile.py: keep your sessions in noxfile_<name>.py (the shipped noxfile.py loads every noxfile_*.py\n"
            "      after its own: static, regen-golden, tests, gpu, upgrade-preview, lock), then run init again:\n"
            "      `git mv noxfile.py noxfile_ours.py && tilelang-golden init`"
        )
    return f"  {name}: merge by hand with `tilelang-golden init --print {name}`"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tilelang-golden init", description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", metavar="PACKAGE", help="importable packages of family files")
    parser.add_argument("--golden", default="golden", help="the snapshot folder (default: golden)")
    parser.add_argument(
        "--harness",
        help="what the sessions install as the harness, pinned: `tilelang-golden @ git+URL@<40-hex commit>` or a "
        "wheel's URL with #sha256= (default: where the harness here was installed from, where that is pinned)",
    )
    parser.add_argument("--print", dest="show", metavar="PATH", help="print one file as init would write it")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    options = parser.parse_args(argv)
    files = shipped()
    if options.show:
        if options.show not in files:
            parser.error(f"init writes no {options.show}; it writes {', '.join(files)}")
        sys.stdout.write(files[options.show].read_text())
        return 0
    root = Path.cwd()
    pyproject = root / PYPROJECT
    if not pyproject.is_file():
        parser.error(f"no {PYPROJECT} here: run init at the root of a Python project (the sessions install it)")
    has_section = f"[tool.{SECTION}]" in pyproject.read_text()
    if not has_section and not options.families:
        parser.error(f"{PYPROJECT} has no [tool.{SECTION}]: name the packages of family files, --families acme.ops")
    try:
        configured = read_config(root).harness if has_section else None
        # What the sessions install: --harness, else the setting (checked below), else the harness at hand.
        harness = harness_requirement(options.harness) if options.harness or configured is None else configured
        if not has_section:
            with pyproject.open("a") as appended:
                appended.write(settings_section(options.families, options.golden, harness))
        settings = read_config(root)
    except ConfigError as error:
        parser.error(str(error))
    outcomes = write_files(root, files)
    for outcome in outcomes:
        if outcome.action != "unchanged":
            print(f"{outcome.action:>7}  {outcome.path}")
    print(f"{'has' if has_section else 'added':>7}  {PYPROJECT} [tool.{SECTION}]")
    same = sum(o.action == "unchanged" for o in outcomes)
    if same:
        print(f"{same} files are already as init writes them")
    unpinned = settings.harness and unpinned_harness(settings.harness)
    if settings.harness is None:
        print(f"  {PYPROJECT}: add `harness = {json.dumps(harness)}` under [tool.{SECTION}]: the sessions install it")
    elif unpinned:
        print(f"  {PYPROJECT} [tool.{SECTION}] harness: {unpinned}; the sessions refuse it")
    refused = [o.path for o in outcomes if o.action == "exists"]
    if refused:
        print(f"\n{len(refused)} files exist with other content and were left as they are; merge what they need:")
        print("\n".join(merge_advice(name) for name in refused))
    if refused or unpinned:
        return 1
    print(f"\n{NEXT_STEPS}")
    return 0
