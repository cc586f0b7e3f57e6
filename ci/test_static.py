"""The static workflow and the pull request comment, run by act on the reduced copy (ci/README.md).

In the order GitHub meets them: a push to main (whose caches the pull requests restore), a pull request that
changes nothing, then one that changes one token of a kernel."""

from __future__ import annotations

import re
from typing import Any

import pytest
from act import FAMILY, REPOSITORY, Run, World, job_name

# The golden jobs' matrix comes from the shard count's job (the copy's pyproject.toml: shards = 2), which act runs
# with them.
SHARD_COUNT = "shard count"
GOLDEN_JOBS = ["golden snapshots (shard 1)", "golden snapshots (shard 2)"]
GOLDEN_GREEN = {SHARD_COUNT: "success", **dict.fromkeys(GOLDEN_JOBS, "success")}
# The one required check that stands for the shard count, every shard and the orphan check (docs/ci.md).
ALL_SHARDS = "golden snapshots (all shards)"
STATIC_JOBS = [SHARD_COUNT, *GOLDEN_JOBS, "orphan snapshots", ALL_SHARDS, "harness tests"]
MARKER = "<!-- golden-snapshot-verdict -->"
# One token of a variant: the tile64x512 variant's thread count, which changes its CUDA on every target.
KERNEL_CHANGE = {f"kernels/{FAMILY}.py": ('"block_N": 512, "threads": 256', '"block_N": 512, "threads": 128')}
# A regression: the baseline variant's tile twice as tall takes twice the registers a thread, and its blocks per SM
# on the CUDA targets fall from 7 to 3 (the HIP targets, which have no machine facts, only change).
REGRESSION_CHANGE = {f"kernels/{FAMILY}.py": ('{"block_M": 32, "block_N": 256', '{"block_M": 64, "block_N": 256')}


def push_event(world: World) -> dict[str, Any]:
    return {"ref": "refs/heads/main", "after": world.sha("main"), "repository": {"full_name": REPOSITORY}}


def pull_request_event(world: World, number: int) -> dict[str, Any]:
    pull = world.github()["pulls"][str(number)]
    return {"action": "synchronize", "number": number, "pull_request": {**pull, "base": {"ref": "main"}},
            "repository": {"full_name": REPOSITORY}}  # fmt: skip


def comment_run(world: World, run_id: int, head: str, conclusion: str) -> Run:
    """comment.yml on the static run's completion (workflow_run), as GitHub starts it from main."""
    world.on_main()
    event = {"workflow_run": {"id": run_id, "name": "static", "event": "pull_request", "conclusion": conclusion,
                              "head_sha": head, "head_branch": "feature", "html_url": f"https://example.invalid/{run_id}",
                              "head_repository": {"full_name": "someone/kernels"}},
             "repository": {"full_name": REPOSITORY}}  # fmt: skip
    _, run = world.run("comment.yml", "workflow_run", event)
    return run


def comments(world: World, number: int) -> list[dict[str, Any]]:
    return [c for c in world.github()["comments"] if c["issue"] == number]


@pytest.fixture(scope="module")
def main_pushed(world: World) -> World:
    """The push to main, run once: the pull requests below read the caches it saves."""
    world.on_main()
    run_id, run = world.run("static.yml", "push", push_event(world), job="golden")
    assert run.jobs() == GOLDEN_GREEN, run.jobs()
    world.main_push = run_id
    return world


def test_a_push_to_main_saves_the_lowering_cache_of_its_commit(main_pushed):
    saved = {call["key"] for call in main_pushed.calls(main_pushed.main_push, "cache-save")}
    assert saved == {f"lowering-Linux-shard-1-{main_pushed.sha('main')}"}, "shard 2 lowers nothing: no cache"


def test_an_unchanged_pull_request_from_a_fork_is_green_and_commented_once(main_pushed):
    world = main_pushed
    head = world.pull_request(7)
    run_id, run = world.run("static.yml", "pull_request", pull_request_event(world, 7))
    assert run.jobs() == dict.fromkeys(STATIC_JOBS, "success"), run.jobs()
    assert world.calls(run_id, "cache-save") == [], "a pull request never saves a cache"
    summary = run.summary("golden snapshots (shard 1)")
    assert "all 15 checks passed" in summary and "14 from the lowering cache" in summary, summary
    assert "checks passed" in run.summary("orphan snapshots")
    for shard in (1, 2):
        verdict = world.artifact(run_id, f"verdict-shard-{shard}")
        assert (verdict / "pull-request").read_text() == "7\n" and (verdict / "verdict.md").is_file()
    assert not world.artifact(run_id, "golden-pending-shard-1").exists(), "nothing failed: nothing to review"

    comment = comment_run(world, run_id, head, "success")
    assert comment.jobs() == {"verdict on the pull request": "success"}, comment.output("verdict on the pull request")
    (posted,) = comments(world, 7)
    assert posted["body"].startswith(f"{MARKER}\nGolden snapshots of {head}")
    assert "> ## Golden snapshots, shard 1/2: all 15 checks passed" in posted["body"]


def test_a_one_token_kernel_change_fails_with_the_change_and_the_command_that_accepts_it(main_pushed):
    world = main_pushed
    head = world.pull_request(8, KERNEL_CHANGE)
    run_id, run = world.run("static.yml", "pull_request", pull_request_event(world, 8), job="golden")
    assert run.jobs() == {**GOLDEN_GREEN, GOLDEN_JOBS[0]: "failure"}, run.jobs()
    summary = run.summary(GOLDEN_JOBS[0])
    assert f"{FAMILY}/tile64x512" in summary and f'nox -s regen-golden -- -k "{FAMILY}' in summary, summary
    annotated = {error["kvPairs"].get("file") for error in run.commands(GOLDEN_JOBS[0], "error")}
    assert f"golden/{FAMILY}/tile64x512/sm_80.cu" in annotated, annotated
    pending = world.artifact(run_id, "golden-pending-shard-1")
    assert (pending / FAMILY / "tile64x512" / "sm_80.cu").is_file()
    assert (pending / "RESULTS.jsonl").is_file()

    comment_run(world, run_id, head, "failure")
    (posted,) = comments(world, 8)
    assert f"{FAMILY}/tile64x512" in posted["body"] and "nox -s regen-golden" in posted["body"]


def test_a_regression_is_red_and_leads_the_summary_and_the_comment(main_pushed):
    """Each shard that holds the regression names it first, in its job summary and its part of the comment."""
    world = main_pushed
    head = world.pull_request(10, REGRESSION_CHANGE)
    run_id, run = world.run("static.yml", "pull_request", pull_request_event(world, 10), job="golden")
    failed = [job for job, result in run.jobs().items() if result == "failure"]
    summaries = [run.summary(job) for job in failed]
    regressed = [summary for summary in summaries if "REGRESSION" in summary]
    assert regressed, (run.jobs(), summaries)
    for summary in regressed:
        overview = summary[summary.index("1. **") :].splitlines()[0]
        assert overview.startswith(f"1. **{FAMILY}/tile32x256: sm_80") and "REGRESSION (occupancy falling" in overview
        assert "of them a regression" in summary and '--accept-regression "occupancy=<why it is right>"' in summary

    comment_run(world, run_id, head, "failure")
    (posted,) = comments(world, 10)
    parts = [part for part in posted["body"].split("## Golden snapshots, shard")[1:] if "REGRESSION" in part]
    assert parts and all(part.index("REGRESSION (occupancy falling") < part.index("### 1.") for part in parts)
    assert "28 warps/SM (7 blocks of 128) -> 12 warps/SM (3 blocks of 128)" in posted["body"]


def test_the_comment_is_quoted_and_mentions_nobody(main_pushed):
    """What the pull request's code wrote (verdict.md) cannot pose as the bot or notify anyone."""
    world = main_pushed
    head = world.pull_request(9)
    run_id, run = world.run("static.yml", "pull_request", pull_request_event(world, 9), job="golden")
    assert run.jobs() == GOLDEN_GREEN
    verdict = world.artifact(run_id, "verdict-shard-1") / "verdict.md"
    verdict.write_text("# All approved by the maintainers\n\ncc @acme/maintainers\n")
    comment_run(world, run_id, head, "success")
    (posted,) = comments(world, 9)
    assert "\n> # All approved by the maintainers\n" in posted["body"]
    assert "@acme" not in posted["body"] and "@\u200bacme/maintainers" in posted["body"]
    # A second run updates the same comment.
    comment_run(world, run_id, head, "success")
    assert len(comments(world, 9)) == 1
    assert [c["method"] for c in world.calls(kind="gh") if "comments" in c["path"] and c["method"] != "GET"][
        -1
    ] == "PATCH"


def required_checks(world: World) -> set[str]:
    """The required status checks docs/ci.md tells a maintainer to set on main, as the copy's docs list them."""
    text = (world.repo / "docs" / "ci.md").read_text()
    listed = re.search(r"<!-- required checks -->\n(.*?)\n\n", text, re.S)
    assert listed, "docs/ci.md lists the required checks under its marker"
    return set(re.findall(r"`([^`]+)`", listed[1]))


def test_a_pull_request_that_raises_the_shard_count_cannot_merge_with_a_red_shard(main_pushed):
    """The shard count is the pull request's own pyproject.toml's. Raised to 3, the copy's checks fill two shards and
    the third has nothing to check, which the harness refuses: shard 3 is red, a job whose name no required check held
    while they named each shard (main's N = 2). The all-shards job, the one required check of the golden jobs, is red
    with it, and the required checks docs/ci.md lists name no shard."""
    world = main_pushed
    world.pull_request(11, {"pyproject.toml": ("shards = 2", "shards = 3")})
    _, run = world.run("static.yml", "pull_request", pull_request_event(world, 11), job="all-shards")
    shard_3 = "golden snapshots (shard 3)"
    assert set(run.jobs()) == {SHARD_COUNT, *GOLDEN_JOBS, shard_3, "orphan snapshots", ALL_SHARDS}, run.jobs()
    # act gives every entry of a matrix the whole matrix's result: a job's own result is its steps'.
    red = {job_name(entry) for entry in run.log if entry.get("stepResult") == "failure"}
    assert red == {shard_3, ALL_SHARDS} and run.jobs()[ALL_SHARDS] == "failure", red
    assert "no golden case matches this selection" in run.output(shard_3), run.output(shard_3)
    (error,) = run.commands(ALL_SHARDS, "error")
    assert error["arg"] == "golden snapshots (shard 1 to 3): failure", error
    # What branch protection sees: the per-shard list of before is green on this run; the one check of today is red.
    per_shard = {SHARD_COUNT, *GOLDEN_JOBS, "orphan snapshots"}
    assert not per_shard & red, "the list of before would merge this"
    required = required_checks(world)
    assert ALL_SHARDS in required and not required & per_shard and not any(re.search(r"shard \d", r) for r in required)
    assert sorted(required & red) == [ALL_SHARDS]
