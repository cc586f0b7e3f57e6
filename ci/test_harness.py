"""harness.yml, the harness's own checks (lint, the wheel), run by act on the reduced copy: a push to main uploads the
wheel, a pull request only builds it. Then what of the caller's environment a job sees (ci/act.py, RUNNER_VARIABLES).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
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


FAIL_LOUDLY = """name: fail
on: push
jobs:
  fail:
    name: fail
    runs-on: ubuntu-24.04
    steps:
      - run: |
          seq 1 2000
          echo "::error title=fail::the last words"
          exit 3
"""


def test_a_failed_steps_last_words_reach_the_log(tmp_path: Path):
    """act's host mode may stop reading a failed step's terminal before its last lines (ci/bin/bash says where); the
    scenarios judge a failure by its `::error::`, so every line of a failed step has to arrive."""

    def fill(repo: Path) -> None:
        (repo / ".github" / "workflows").mkdir(parents=True)
        (repo / ".github" / "workflows" / "fail.yml").write_text(FAIL_LOUDLY)

    world = World(tmp_path, Path(sys.executable), fill)
    _, run = world.run("fail.yml", "push", push_event(world))
    assert run.jobs() == {"fail": "failure"}
    (error,) = run.commands("fail", "error")
    assert error["arg"] == "the last words", error
    assert run.output("fail").count("\n") >= 2000


def test_the_steps_bash_keeps_the_exit_status_and_lingers_only_after_a_failure(tmp_path: Path):
    """ci/bin/bash runs the bash after it on PATH (never itself) with the step's arguments."""
    wrapper = Path(__file__).parent / "bin" / "bash"
    env = {"PATH": f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}"}
    script = tmp_path / "step.sh"
    script.write_text('echo "$BASH_VERSION"; exit "$1"\n')
    for status in (0, 3):
        started = time.monotonic()
        done = subprocess.run([str(wrapper), "-e", str(script), str(status)], env=env, capture_output=True, text=True)
        assert done.returncode == status and done.stdout.strip(), done
        assert status == 0 or time.monotonic() - started >= 1, "a failed step lingers for act's reader"
