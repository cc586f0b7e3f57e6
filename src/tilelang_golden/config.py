"""A repository's settings for the harness: `[tool.tilelang-golden]` in its `pyproject.toml`.

    [tool.tilelang-golden]
    families = ["acme.ops"]        # importable packages of family files, in order (default: ["kernels"])
    golden = "tests/golden"        # the snapshot folder (default: "golden")
    timing = "tests/golden/timing" # the GPU timing baselines (default: "<golden>/timing")
    targets = ["sm_90", "sm_100a"] # the targets snapshotted and run on (default: all of targets.TARGETS)
    harness = "tilelang-golden @ git+https://github.com/ORG/tilelang-golden@COMMIT"
                                   # where the nox sessions install the harness from (default: this project)
    projects = [".", "kernels"]    # the repository's projects the sessions install, editable (default: ["."])
    shards = 2                     # the static workflow's golden jobs, `--shard I/N` (default: 2; docs/ci.md)

`harness` and `projects` are read by the nox sessions (`tilelang-golden init` writes `harness`), `shards` by the static
workflow's first job, which makes its matrix from it. Every key is optional and the defaults are this project's own
layout, so a repository laid out like it needs no section. Paths are relative to the repository's root, where the
sessions run. A command-line option given for a run (`--families`, `--golden-dir`, `--timing-dir`) wins over the file.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

from tilelang_golden.targets import TARGETS

PYPROJECT = "pyproject.toml"
SECTION = "tilelang-golden"  # under [tool]
DEFAULT_FAMILIES = ("kernels",)
DEFAULT_GOLDEN = "golden"
DEFAULT_SHARDS = 2


class ConfigError(ValueError):
    """The settings cannot be used; the message names the file, the key and what it must be."""


@dataclass(frozen=True)
class Config:
    families: tuple[str, ...] = DEFAULT_FAMILIES
    golden: Path = Path(DEFAULT_GOLDEN)
    timing: Path = Path(DEFAULT_GOLDEN) / "timing"
    targets: tuple[str, ...] | None = None  # None: every target of tilelang_golden.targets.TARGETS
    harness: str | None = None  # a pip requirement; None: the repository itself is the harness's project
    # Folders holding a pyproject.toml, installed editable after the harness: where the packages of families live.
    projects: tuple[str, ...] = (".",)
    shards: int = DEFAULT_SHARDS  # the static workflow's golden jobs (`--shard I/N`)


KEYS = tuple(setting.name for setting in dataclasses.fields(Config))


def read_config(root: Path | None = None) -> Config:
    """The settings of the repository at `root` (default: the working directory); the defaults without a
    `pyproject.toml` or without the section."""
    path = (root or Path.cwd()) / PYPROJECT
    if not path.is_file():
        return Config()
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{PYPROJECT}: not valid TOML ({error})") from None
    section = document.get("tool", {}).get(SECTION, {})
    where = f"{PYPROJECT} [tool.{SECTION}]"
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: expected a table of settings")
    unknown = sorted(set(section) - set(KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown}; the settings are {', '.join(KEYS)}")
    families = section.get("families", list(DEFAULT_FAMILIES))
    if not (isinstance(families, list) and families and all(_is_package(name) for name in families)):
        raise ConfigError(
            f'{where}: families must be a non-empty list of importable package names (families = ["acme.ops"]), '
            f"got {families!r}"
        )
    golden = _folder(section, "golden", DEFAULT_GOLDEN, where)
    timing = _folder(section, "timing", f"{golden.as_posix()}/timing", where)
    targets = section.get("targets")
    if targets is not None and not (isinstance(targets, list) and targets and set(targets) <= set(TARGETS)):
        raise ConfigError(f"{where}: targets must be a non-empty list of some of {list(TARGETS)}, got {targets!r}")
    harness = section.get("harness")
    if harness is not None and not (isinstance(harness, str) and harness.strip()):
        raise ConfigError(
            f"{where}: harness must be a pip requirement (tilelang-golden @ git+URL@COMMIT), got {harness!r}"
        )
    projects = section.get("projects", ["."])
    if not (isinstance(projects, list) and projects and all(isinstance(folder, str) for folder in projects)):
        raise ConfigError(
            f'{where}: projects must be a non-empty list of folders (projects = [".", "kernels"]), got {projects!r}'
        )
    for folder in projects:
        _folder({"projects": folder}, "projects", ".", where)
    shards = section.get("shards", DEFAULT_SHARDS)
    if type(shards) is not int or shards < 1:  # bool is an int to isinstance
        raise ConfigError(f"{where}: shards must be a whole number, 1 or more (shards = 2), got {shards!r}")
    targets = tuple(targets) if targets else None
    return Config(tuple(families), golden, timing, targets, harness, tuple(projects), shards)


def _is_package(name: Any) -> bool:
    return isinstance(name, str) and all(part.isidentifier() for part in name.split("."))


def _folder(section: dict[str, Any], key: str, default: str, where: str) -> Path:
    value = section.get(key, default)
    if not isinstance(value, str) or not value or Path(value).is_absolute() or ".." in Path(value).parts:
        raise ConfigError(f"{where}: {key} must be a folder inside the repository, as a relative path, got {value!r}")
    if key != "projects" and Path(value).parts[:1] in ((), (".git",), (".github",)):
        # The repository's root, git's own folder and the workflows' are no snapshot folder: a regen writes there.
        raise ConfigError(f"{where}: {key} must be a folder of its own, not the root, .git/ or .github/, got {value!r}")
    return Path(value)


def main(argv: Sequence[str]) -> int:
    """`tilelang-golden config KEY`: one setting as a run reads it (a list one item a line), for a workflow's shell
    step: `golden=$(python -m tilelang_golden config golden)`."""
    if len(argv) != 1 or argv[0] not in KEYS:
        print(f"usage: tilelang-golden config KEY, KEY one of {', '.join(KEYS)}", file=sys.stderr)
        return 2
    try:
        value = getattr(read_config(), argv[0])
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    if value is not None:
        print("\n".join(map(str, value)) if isinstance(value, tuple) else value)
    return 0
