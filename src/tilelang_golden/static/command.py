"""The static session as a command: pytest with the golden plugin and its items, on every core, under a pytest
configuration the harness owns. `tilelang-golden static` and `regen` run it, and so does the upgrade preview, whose
cost is then a static run's."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

# The static session's items live in the package; --pyargs collects that module by its name. The repository's own
# conftest.py files serve its tests, not this session: pytest would import them (testpaths) in every process, and a
# tests/conftest.py that imports TileLang and torch costs each worker seconds.
GOLDEN = ["-p", "tilelang_golden.static.plugin", "--noconftest", "--pyargs", "tilelang_golden.static.session_items"]
# Lowerings of one group stay on one worker (docs/internals.md); -n auto starts none when the cache holds them.
WORKERS = ["-n", "auto", "--dist", "loadgroup"]
# What pytest would take from the checkout, none of which reaches the gate: an ini file's or pyproject's `addopts`
# (`-k "not ..."`, `--deselect` hide cases from every CI shard with no change to the harness or the workflows), its
# other settings, and the plugins its environment installs. No configuration file (`-c` of an empty one, the rootdir
# the working directory, as without one), no plugin but the ones named here; xdist workers start with these same
# arguments and this process's environment.
OWN_CONFIGURATION = ["-c", os.devnull, "--disable-plugin-autoload", "-p", "xdist"]
# The environment's pytest options and plugins, dropped for the same reason.
IGNORED_ENVIRONMENT = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")


def ignore_pytest_environment() -> list[str]:
    """Drop the environment's pytest options and plugins from this process (and the workers it starts); a line for
    each one dropped, saying so."""
    dropped = []
    for name in IGNORED_ENVIRONMENT:
        value = os.environ.pop(name, None)
        if value:
            dropped.append(f"{name}={value!r} ignored: the static session's pytest options are its command line's")
    return dropped


def static_session(argv: Sequence[str]) -> int:
    """The session with these options (pytest's and the plugin's); its exit status."""
    import pytest

    for line in ignore_pytest_environment():
        sys.stderr.write(f"{line}\n")
    rootdir = ["--rootdir", str(Path.cwd())]
    return int(pytest.main([*OWN_CONFIGURATION, *rootdir, *GOLDEN, *WORKERS, *argv]))
