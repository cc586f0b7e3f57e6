"""harness.yml, the harness's own checks (lint, the wheel), run by act on the reduced copy: a push to main uploads the
wheel, a pull request only builds it. Then what of the caller's environment a job sees (ci/act.py, RUNNER_VARIABLES).
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from act import REPOSITORY, World

WHEEL_JOB = "harness wheel"
WHEEL_ARTIFACT = "tilelang-golden-wheel"


def push_event(world: World) -> dict[str, Any]:
    return {"ref": "refs/heads/main", "after": world.sha("main"), "repository": {"full_name": REPOSITORY}}


def test_a_push_to_main_lints_and_uploads_the_harness_wheel_without_this_repositorys_families(world: World):
    world.on_main()
    run_id, run = world.run("harness.yml", "push", push_event(world))
    assert run.jobs() == {"lint (ruff, workflow schema, zizmor, hadolint)": "success", WHEEL_JOB: "success"}, run.jobs()
    assert [call["name"] for call in world.calls(run_id, "upload-artifact")] == [WHEEL_ARTIFACT]
    (wheel,) = world.artifact(run_id, WHEEL_ARTIFACT).glob("tilelang_golden-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "tilelang_golden/cli.py" in names and "tilelang_golden/init_files/github/workflows/static.yml" in names
    assert not [name for name in names if name.startswith("kernels/")]


def test_a_pull_request_builds_the_wheel_and_uploads_nothing(world: World):
    """A pull request's wheel would be an artifact named like main's, built from its code."""
    world.pull_request(40)
    pull = world.github()["pulls"]["40"]
    event = {"action": "synchronize", "number": 40, "pull_request": {**pull, "base": {"ref": "main"}},
             "repository": {"full_name": REPOSITORY}}  # fmt: skip
    run_id, run = world.run("harness.yml", "pull_request", event, job="wheel")
    assert run.jobs() == {WHEEL_JOB: "success"}, run.output(WHEEL_JOB)
    assert "Created wheel for tilelang-golden" in run.output(WHEEL_JOB), "the wheel is built"
    assert world.calls(run_id, "upload-artifact") == []
    assert not world.artifact(run_id, WHEEL_ARTIFACT).exists()


PRINT_ENVIRONMENT = """name: environment
on: push
jobs:
  environment:
    name: environment
    runs-on: ubuntu-24.04
    steps:
      - run: env
"""


def test_a_job_sees_none_of_the_callers_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """act in its host mode hands its own environment to every job; it gets only a runner's part of the caller's."""

    def fill(repo: Path) -> None:
        (repo / ".github" / "workflows").mkdir(parents=True)
        (repo / ".github" / "workflows" / "environment.yml").write_text(PRINT_ENVIRONMENT)

    world = World(tmp_path, Path(sys.executable), fill)
    monkeypatch.setenv("GH_TOKEN", "leaked-token")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "leaked-key")
    monkeypatch.setenv("LC_MEASUREMENT", "C.UTF-8")  # allowed: it shows the caller's environment does reach a job
    # pip's settings reach a job (this machine's offline index), but not an index URL with a login in it.
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://ci:leaked-password@pypi.example.invalid/simple")
    monkeypatch.setenv("PIP_PROGRESS_BAR", "off")
    _, run = world.run("environment.yml", "push", push_event(world))
    printed = run.output("environment")
    assert run.jobs() == {"environment": "success"}, printed
    assert "LC_MEASUREMENT=C.UTF-8" in printed and "PIP_PROGRESS_BAR=off" in printed, printed
    assert "leaked" not in printed and "GH_TOKEN" not in printed and "AWS_SECRET_ACCESS_KEY" not in printed, printed
    assert "PIP_EXTRA_INDEX_URL" not in printed, printed
