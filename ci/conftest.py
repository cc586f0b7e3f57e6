"""One reduced repository for the scenarios of a worker (`nox -s workflows` deals the files to xdist workers, a file
to one worker, its scenarios in order), met in the order GitHub would meet them: main's push first (whose caches the
pull requests restore), then the pull requests, the regen and the GPU dispatch. Each file starts from main itself."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from act import World


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    # Outside this checkout: git in a job's workspace must not find this repository above it.
    world = World(tmp_path_factory.mktemp("workflows"), Path(sys.executable))
    world.seed_venvs(["static", "tests", "lint", "wheel"])
    return world
