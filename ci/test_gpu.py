"""gpu.yml for a pull request commit dispatched on gpu-dispatch, run by act on the reduced copy (ci/README.md).

The gpu-check container is the real `deploy/arc/image/serve` in a PID namespace of its own (its `kill -1` reaches
only what it started), with a python3 whose nox is a fake GPU check (ci/gpu_check/python3). Its request and
report folders are given to both sides by GPU_CHECK_REQUEST and GPU_CHECK_REPORT, as the pod mounts them."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from act import CI, REPO, REPOSITORY, Run, World, git

SERVE = REPO / "deploy" / "arc" / "image" / "serve"
JOBS = {"commit to check": "success", "gpu numerics and timing (gpu-h200)": "success"}
# The runner's bound on a container that never starts, shortened from gpu.yml's 600 s for the test.
START_LIMIT = 10
FAILED = "the GPU check failed with status 1: its log above and the job summary say why"


def handover(world: World, name: str) -> tuple[Path, Path]:
    request, report = world.root / name / "request", world.root / name / "report"
    request.mkdir(parents=True)
    report.mkdir(parents=True)
    return request, report


@contextlib.contextmanager
def serving(world: World, name: str, **env: str) -> Iterator[tuple[Path, Path]]:
    """The gpu-check container of one pod, which serves one request: serve waiting for the runner's request,
    stopped at the end. `env` adds to the fake check's environment (ci/gpu_check/python3)."""
    handed_over, report = handover(world, name)
    home = world.root / name / "home"
    home.mkdir()
    env = {"PATH": f"{CI / 'gpu_check'}:/usr/bin:/bin", "HOME": str(home), "FAKE_GPU_STATUS": "1",
           "FAKE_GPU_VERDICT": "1 of 2 variants failed", "GPU_CHECK_REQUEST": str(handed_over),
           "GPU_CHECK_REPORT": str(report), **env}  # fmt: skip
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    serve = subprocess.Popen(["unshare", *user, "--pid", "--fork", "--mount-proc", str(SERVE)], env=env)
    try:
        yield handed_over, report
    finally:
        serve.kill()
        serve.wait()


@pytest.fixture
def gpu_check(world: World, request: pytest.FixtureRequest) -> Iterator[tuple[Path, Path]]:
    """The gpu-check container for one test; an indirect parameter adds to the fake check's environment."""
    with serving(world, f"gpu-check-{request.node.name}", **getattr(request, "param", {})) as folders:
        yield folders


def dispatch(world: World, number: int, head: str, request: Path, report: Path, **env: str) -> tuple[int, Run]:
    world.checkout("gpu-dispatch")
    event = {"inputs": {"pr": str(number), "sha": head}, "ref": "refs/heads/gpu-dispatch",
             "repository": {"full_name": REPOSITORY}}  # fmt: skip
    return world.run("gpu.yml", "workflow_dispatch", event,
                     env={"GPU_CHECK_REQUEST": str(request), "GPU_CHECK_REPORT": str(report), **env})  # fmt: skip


def comment_run(world: World, run_id: int, conclusion: str) -> Run:
    world.on_main()
    event = {"workflow_run": {"id": run_id, "name": "gpu", "event": "workflow_dispatch", "conclusion": conclusion,
                              "head_sha": world.sha("main"), "head_branch": "gpu-dispatch",
                              "html_url": f"https://example.invalid/{run_id}",
                              "head_repository": {"full_name": REPOSITORY}},
             "repository": {"full_name": REPOSITORY}}  # fmt: skip
    _, run = world.run("comment.yml", "workflow_run", event)
    return run


def test_a_dispatched_pull_request_commit_gets_its_gpu_verdict_as_a_status_and_a_comment(world, gpu_check):
    head = world.pull_request(30)
    world.on_main()
    world.branch("gpu-dispatch")
    run_id, run = dispatch(world, 30, head, *gpu_check)
    assert run.jobs() == {**JOBS, "gpu numerics and timing (gpu-h200)": "failure"}, run.output("gpu numerics")
    # The check's workflow commands are printed, not run; the runner says in its own words that the check failed.
    for command in ("add-mask", "error"):
        found = [entry.get("arg") for entry in run.commands("gpu numerics and timing (gpu-h200)", command)]
        assert found == ([] if command == "add-mask" else [FAILED]), found
    assert "::error title=from the check::pwned" in run.output("gpu numerics and timing (gpu-h200)")
    report = world.artifact(run_id, "gpu-report-gpu-h200")
    assert sorted(path.name for path in report.iterdir()) == ["report.json", "summary.md"], "the link stays behind"
    assert "GPU check (job summary)" in run.summary("gpu numerics and timing (gpu-h200)")
    assert f"--against\n{world.sha('main')}\n" == (gpu_check[0] / "options").read_text(), "A/B against main"

    comment = comment_run(world, run_id, "failure")
    assert comment.jobs() == {"verdict on the pull request": "success"}, comment.output("verdict on the pull request")
    (status,) = world.github()["statuses"]
    assert (status["sha"], status["state"], status["context"]) == (head, "failure", "gpu")
    (posted,) = [c for c in world.github()["comments"] if c["issue"] == 30]
    assert posted["body"].startswith(f"<!-- gpu-check-verdict -->\nGPU check of {head}")
    assert "> ## GPU check on the stand-in: 1 of 2 variants failed" in posted["body"]
    assert "@\u200bacme/gpu-team" in posted["body"] and "@acme" not in posted["body"]


def test_a_gpu_check_that_never_reports_fails_the_job_within_its_bound(world):
    head = world.pull_request(31)
    world.on_main()
    world.branch("gpu-dispatch")
    run_id, run = dispatch(world, 31, head, *handover(world, "no-gpu-check"), GPU_CHECK_START_LIMIT=str(START_LIMIT))
    assert run.jobs() == {**JOBS, "gpu numerics and timing (gpu-h200)": "failure"}
    (error,) = run.commands("gpu numerics and timing (gpu-h200)", "error")
    assert f"did not start within {START_LIMIT} s" in error["arg"], error


@pytest.mark.parametrize("gpu_check", [{"FAKE_GPU_REPORT": "bzip2", "FAKE_GPU_STATUS": "0"}], indirect=True)
def test_a_compressed_report_the_check_writes_itself_is_refused(world, gpu_check):
    """The check can write report.tar before serve does: a bzip2 archive (a bomb, were it larger) fails the job,
    with the reason, however the check says it went."""
    head = world.pull_request(32)
    world.on_main()
    world.branch("gpu-dispatch")
    run_id, run = dispatch(world, 32, head, *gpu_check)
    assert run.jobs() == {**JOBS, "gpu numerics and timing (gpu-h200)": "failure"}, run.output("gpu numerics")
    (error,) = run.commands("gpu numerics and timing (gpu-h200)", "error")
    assert error["arg"] == "the GPU report was refused before anything of it was used (why: above)", error
    assert "refused: not an uncompressed tar archive" in run.output("gpu numerics and timing (gpu-h200)")
    assert not world.artifact(run_id, "gpu-report-gpu-h200").exists()


# -- the performance history -------------------------------------------------------------------------------------

HISTORY_JOB = "performance history"


def history_records(world: World) -> list[dict]:
    """The records on the repository's gpu-history branch, oldest first."""
    names = git(world.repo, "ls-tree", "-r", "--name-only", "gpu-history").splitlines()
    return [json.loads(git(world.repo, "show", f"gpu-history:{name}")) for name in sorted(names)]


def test_each_run_of_main_appends_a_record_that_no_pull_request_run_writes(world):
    """Two pushes to main: two records on gpu-history, each with its commit, and the site built (and published
    where the repository turns Pages on). Then a pull request's dispatched run: it gets main's records for its A/B
    table and writes none."""
    world.on_main()
    pushed = []
    for push, pages in enumerate(("false", "true")):
        if push:
            git(world.repo, "commit", "--quiet", "--allow-empty", "-m", "a second commit on main")
            world.github({**world.github(), "branches": {"main": world.sha("main")}})
        pushed.append(world.sha("main"))
        with serving(world, f"history-push-{push}", FAKE_GPU_STATUS="0") as (request, report):
            event = {"ref": "refs/heads/main", "after": pushed[-1], "repository": {"full_name": REPOSITORY}}
            handed = {"GPU_CHECK_REQUEST": str(request), "GPU_CHECK_REPORT": str(report)}
            run_id, run = world.run("gpu.yml", "push", event, env=handed, variables={"GPU_HISTORY_PAGES": pages})
        published = {"publish the performance history": "success"} if pages == "true" else {}
        assert run.jobs() == {**JOBS, HISTORY_JOB: "success", **published}, run.output(HISTORY_JOB)
        assert [r["commit"] for r in history_records(world)] == pushed, "one record per run, in commit order"
        site = world.artifact(run_id, "gpu-history-page")
        assert (site / "index.html").is_file() and (site / "inplace_update.html").is_file()
        assert "### Performance history" in run.summary(HISTORY_JOB)
        assert f"{push + 1} runs of main, 1 variant histories" in run.summary(HISTORY_JOB)
    (deployed,) = world.calls(run_id, "deploy-pages")
    assert "index.html" in deployed["files"], deployed
    assert "Published: https://acme.github.io/kernels/" in run.summary("publish the performance history")
    record = history_records(world)[-1]
    assert record["gpu"] == "NVIDIA H200" and list(record["variants"]) == ["inplace_update/tile32x256"]

    head = world.pull_request(33)
    world.on_main()
    world.branch("gpu-dispatch")
    with serving(world, "history-pull-request", FAKE_GPU_STATUS="0") as (request, report):
        _, run = dispatch(world, 33, head, request, report)
        handed = sorted(p.name for p in (request / "src" / "build" / "gpu-history" / "records").rglob("*.json"))
    assert run.jobs() == JOBS, "no history job for a pull request's commit"
    assert len(handed) == 2, "main's records reach the pull request's check, for its A/B table"
    assert [r["commit"] for r in history_records(world)] == pushed, "the pull request's run wrote nothing"


# -- what a pull request's checkout may hold -------------------------------------------------------------------------

GPU_JOB = "gpu numerics and timing (gpu-h200)"


def pull_request_with_link(world: World, number: int, path: str, target: Path) -> str:
    """A pull request whose head commits `path` as a symbolic link to `target` (an absolute path), merged as GitHub
    merges it; returns the head's SHA."""
    git(world.repo, "checkout", "--quiet", "-B", f"pr-{number}", "main")
    (world.repo / path).parent.mkdir(parents=True, exist_ok=True)
    (world.repo / path).symlink_to(target)
    git(world.repo, "add", "--force", path)  # build/ is ignored: a pull request adds it all the same
    git(world.repo, "commit", "--quiet", "-m", f"pull request {number}: {path} -> {target}")
    return world.merge(number)


@contextlib.contextmanager
def main_history(world: World) -> Iterator[None]:
    """Main's gpu-history branch: the one the runs of main left, else one record made here and removed after."""
    if git(world.repo, "branch", "--list", "gpu-history"):
        yield
        return

    def stdin_git(*args: str, text: str) -> str:
        return subprocess.run(["git", *args], cwd=world.repo, input=text, capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip

    blob = stdin_git("hash-object", "-w", "--stdin", text="{}\n")
    model = stdin_git("mktree", text=f"100644 blob {blob}\tstand-in.json\n")
    records = stdin_git("mktree", text=f"040000 tree {model}\tnvidia-h200\n")
    root = stdin_git("mktree", text=f"040000 tree {records}\trecords\n")
    commit = stdin_git("-c", "user.name=ci", "-c", "user.email=ci@example.com", "commit-tree", root, "-m", "a record",
                       text="")  # fmt: skip
    git(world.repo, "branch", "gpu-history", commit)
    try:
        yield
    finally:
        git(world.repo, "branch", "--delete", "--force", "gpu-history")


def test_a_commit_that_links_build_out_of_the_workspace_is_refused_before_the_hand_over(world):
    """The runner extracts main's history into the checkout's build/gpu-history: a pull request commit holding `build`
    as a link to the runner's own files is refused, with the reason, and nothing is written through the link or
    handed over."""
    runner_files = world.root / "runner-files"
    runner_files.mkdir()
    head = pull_request_with_link(world, 34, "build", runner_files)
    world.on_main()
    world.branch("gpu-dispatch")
    request, report = handover(world, "linked-build")
    with main_history(world):
        _, run = dispatch(world, 34, head, request, report, GPU_CHECK_START_LIMIT=str(START_LIMIT))
    assert run.jobs() == {**JOBS, GPU_JOB: "failure"}, run.output(GPU_JOB)
    (error,) = run.commands(GPU_JOB, "error")
    assert error["arg"].startswith("the commit holds build/gpu-history, or build as a link or a file"), error
    assert list(runner_files.rglob("*")) == [], "nothing written through the link"
    assert list(request.iterdir()) == [], "nothing handed over"
