"""`tilelang-golden init`: what a repository needs to run the harness, written into it.

    tilelang-golden init --families acme.ops [--golden tests/golden] [--harness REQUIREMENT]
    tilelang-golden init --print PATH      # one file as init would write it (to merge by hand)

It writes the nox sessions (noxfile.py), the workflows (static, regen, comment, gpu), the inputs of the hashed locks
(requirements*.in; `nox -s lock` makes the locks), the GPU runners' set-up (deploy/arc/) and .gitignore's lines,
and adds `[tool.tilelang-golden]` to pyproject.toml where it has none. It never overwrites: a file that exists with
other content is left as it is and listed with what to merge, and the command then exits 1. The files are this
repository's own (harness/init_files/: the workflows, locks' inputs and runner set-up are links to them), so a
repository runs what the harness's own CI runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata, resources
from importlib.resources.abc import Traversable
from pathlib import Path

from harness.config import PYPROJECT, SECTION, ConfigError, read_config

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

    walk(resources.files("harness") / "init_files", ())
    return dict(sorted(found.items()))


def installed_requirement() -> str:
    """The harness as pip installed it here (PEP 610's direct_url.json): a git URL at its commit, a wheel's URL,
    a folder, or the version from an index; what the sessions install in an adopting repository."""
    try:
        distribution = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise ConfigError(f"{DISTRIBUTION} is not installed here; pass --harness REQUIREMENT") from None
    direct = distribution.read_text("direct_url.json")
    if not direct:
        return f"{DISTRIBUTION}=={distribution.version}"
    origin = json.loads(direct)
    vcs = origin.get("vcs_info")
    if vcs:
        return f"{DISTRIBUTION} @ {vcs['vcs']}+{origin['url']}@{vcs['commit_id']}"
    return f"{DISTRIBUTION} @ {origin['url']}"


def settings_section(families: Sequence[str], golden: str, harness: str) -> str:
    listed = ", ".join(json.dumps(name) for name in families)
    return (
        f"\n[tool.{SECTION}]\n"
        f"families = [{listed}]  # the packages of family files\n"
        f"golden = {json.dumps(golden)}  # the snapshot folder\n"
        f"harness = {json.dumps(harness)}  # what the nox sessions install\n"
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
            "  noxfile.py: keep yours and append the sessions:\n"
            "      `tilelang-golden init --print noxfile.py >> noxfile.py`, then keep one of each session both define\n"
            "      (static, regen-golden, tests, gpu, upgrade-preview, lock)"
        )
    return f"  {name}: merge by hand with `tilelang-golden init --print {name}`"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tilelang-golden init", description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", metavar="PACKAGE", help="importable packages of family files")
    parser.add_argument("--golden", default="golden", help="the snapshot folder (default: golden)")
    parser.add_argument("--harness", help="pip requirement of the harness (default: where it was installed from)")
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
        harness = options.harness or installed_requirement()
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
    if settings.harness is None:
        print(f"  {PYPROJECT}: add `harness = {json.dumps(harness)}` under [tool.{SECTION}]: the sessions install it")
    refused = [o.path for o in outcomes if o.action == "exists"]
    if refused:
        print(f"\n{len(refused)} files exist with other content and were left as they are; merge what they need:")
        print("\n".join(merge_advice(name) for name in refused))
        return 1
    print(f"\n{NEXT_STEPS}")
    return 0
