"""regen.yml, dispatched by hand, run by act on the reduced copy (ci/README.md)."""

from __future__ import annotations

import hashlib
import re
import subprocess

from act import FAMILY, REPOSITORY, World
from test_static import KERNEL_CHANGE, REGRESSION_CHANGE

COMMIT_JOB = "commit to regenerate"
REGEN_JOB = "untrusted: regen-golden by the commit's code"
PATCH_JOB = "the patch touches the snapshot folder only"
GREEN = {COMMIT_JOB: "success", REGEN_JOB: "success", PATCH_JOB: "success"}
WORKFLOW = ".github/workflows/static.yml"
# The regen's code of a pull request that sets its snapshot folder to tools/ (the base's is golden/; the settings
# refuse .github/ itself), changes a file there and a workflow, and makes the workflow's own `git diff` of that folder
# (git's external diff) print a crafted patch: a hunk from
# a workflow to a snapshot with no rename header, which git's listings show as golden/x.cu alone and `git apply`
# turns into the workflow's deletion, followed by the real diff of the changed workflow. With the run's artifact
# token it also uploads `golden-regen` itself (here as the upload stand-in stores it).
SETTINGS_CHANGE = {"pyproject.toml": ('families = ["kernels"]\n', 'families = ["kernels"]\ngolden = "tools"\n')}
TAMPERING_SESSION = f"""

@nox.session(name="regen-golden", venv_backend="none")
def regen_golden(session):
    import os, subprocess
    changed = Path(".github/workflows/harness.yml")
    changed.write_text(changed.read_text() + "# the regen's\\n")
    Path("tools/regen-note.txt").write_text("a change under its own folder, which the workflow diffs\\n")
    real = subprocess.run(["git", "diff", "--no-ext-diff", "--binary", "--", str(changed)], capture_output=True,
                          text=True, check=True).stdout
    old = Path("{WORKFLOW}").read_text().splitlines(keepends=True)[:3]
    crafted = ("diff --git a/{WORKFLOW} b/golden/x.cu\\n--- a/{WORKFLOW}\\n+++ b/golden/x.cu\\n@@ -1,3 +1,3 @@\\n"
               + "-" + old[0] + "+// x\\n" + "".join(" " + line for line in old[1:]) + real)
    Path("build").mkdir(exist_ok=True)
    Path("build/crafted.patch").write_text(crafted)
    diff = Path("build/crafted-diff")
    diff.write_text("#!/bin/sh\\ncat " + str(Path("build/crafted.patch").resolve()) + "\\n")
    diff.chmod(0o755)
    session.run("git", "config", "diff.external", str(diff.resolve()), external=True)
    uploaded = Path(os.environ["STAND_IN_STATE"], "artifacts", os.environ["GITHUB_RUN_ID"], "golden-regen")
    uploaded.mkdir(parents=True, exist_ok=True)
    (uploaded / "golden.patch").write_text(crafted)
"""

# A regen whose code was tampered with (its venv restored from a cache an earlier dispatch wrote, say) and that writes
# what the maintainer withheld: the baseline variant's occupancy falling on sm_80 with no accept_regression, a ledger
# record claiming the regen option with a reason of its own, and a case's recorded cost moved.
WITHHELD_REGRESSION_SESSION = f"""

@nox.session(name="regen-golden", venv_backend="none")
def regen_golden(session):
    machine = Path("golden/{FAMILY}/tile32x256/sm_80.machine.yaml")
    machine.write_text(machine.read_text().replace("blocks_per_sm: 7", "blocks_per_sm: 3")
                       .replace("warps_per_sm: 28", "warps_per_sm: 12"))
    Path("golden/{FAMILY}/REGRESSIONS.yaml").write_text(
        "- case: {FAMILY}/tile32x256/sm_80\\n  class: occupancy\\n  kernel: residual_add__kernel\\n"
        "  change: 28 warps/SM (7 blocks of 128) -> 12 warps/SM (3 blocks of 128)\\n"
        "  reason: the regen says so\\n  acknowledged_by: regen option\\n  tilelang: 0.1.15\\n")
    costs = Path("golden/COSTS.yaml")
    costs.write_text(costs.read_text().replace("{FAMILY}/tile32x256/sm_80: 1.6", "{FAMILY}/tile32x256/sm_80: 900"))
"""
# The same kind of regen writing beside the snapshots: the H200's timing baseline under another torch (which the GPU
# check reported only, switching the timing gate off) and a dotfile.
BESIDE_THE_SNAPSHOTS_SESSION = """

@nox.session(name="regen-golden", venv_backend="none")
def regen_golden(session):
    baseline = Path("golden/timing/nvidia-h200.yaml")
    baseline.write_text(baseline.read_text().replace("torch: 2.11.0+cu130", "torch: 0.0.0"))
    Path("golden/.hidden").write_text("a dotfile\\n")
"""

UNCHANGING_SESSION = """

@nox.session(name="regen-golden", venv_backend="none")
def regen_golden(session):
    session.log("golden files: 0 created, 0 updated, 0 deleted")
"""
# Where the sessions above go: the repository's own noxfile, loaded after the shared ones (their regen is replaced).
ANCHOR = "\n\n@nox.session\ndef lint("


def dispatch(world: World, filter_: str, number: int | None, accept: str = "", *, branch: str = "gpu-dispatch",
             head: str | None = None):  # fmt: skip
    """The regen started by hand as docs/ci.md says: for pull request `number` (its head, or `head`) on gpu-dispatch
    kept at main's head, or for main on main (`number` None). `branch`: started elsewhere, against the docs."""
    pr, sha = ("", "") if number is None else (str(number), head or world.sha(f"pr-{number}"))
    if number is None and branch == "gpu-dispatch":
        branch = "main"
    world.on_main()
    world.branch("gpu-dispatch")  # at main's head, as docs/ci.md keeps it
    world.checkout(branch)
    inputs = {"pr": pr, "sha": sha, "filter": filter_, "accept_regression": accept}
    repository = {"full_name": REPOSITORY, "default_branch": "main"}
    event = {"inputs": inputs, "ref": f"refs/heads/{branch}", "repository": repository}
    return world.run("regen.yml", "workflow_dispatch", event)


def summary_sha256(summary: str) -> str:
    (sha,) = re.findall(
        r'echo "([0-9a-f]{64})  golden\.patch" \| sha256sum -c && git apply --index golden\.patch', summary
    )
    return sha


def test_a_regen_with_a_filter_hands_back_a_checked_patch_of_golden_only(world, tmp_path):
    world.pull_request(20, KERNEL_CHANGE)
    run_id, run = dispatch(world, "tile64x512", 20)
    assert run.jobs() == GREEN, run.jobs()
    # Its venv is built from the lock, not restored: gpu-dispatch's cache scope is any earlier dispatch's to write (the
    # stand-in cache holds main's static venv under the key the job used to restore).
    assert "Cache restored from key" not in run.output(REGEN_JOB) and "Cache not found" not in run.output(REGEN_JOB)
    assert not world.calls(run_id, "cache-save")
    patch = world.artifact(run_id, "golden-regen") / "golden.patch"
    touched = subprocess.run(["git", "apply", "--numstat", str(patch)], capture_output=True, text=True, check=True)
    paths = {line.split("\t")[2] for line in touched.stdout.splitlines()}
    assert paths and all(path.startswith(f"golden/{FAMILY}/tile64x512/") for path in paths), paths
    # The summary's sha256 is the artifact's, and its command applies it in a checkout of the pull request's head.
    summary = run.summary(PATCH_JOB)
    assert summary_sha256(summary) == hashlib.sha256(patch.read_bytes()).hexdigest(), summary
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--branch", "pr-20", str(world.repo), str(clone)], check=True)
    (clone / "golden.patch").write_bytes(patch.read_bytes())
    command = re.search(r"```bash\n(.*?)\n```", summary, re.S)[1]
    subprocess.run(["bash", "-c", command], cwd=clone, check=True, capture_output=True)
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=clone, capture_output=True, text=True)
    assert set(staged.stdout.split()) == paths


def test_a_regression_is_refused_until_the_dispatch_acknowledges_it_and_its_reason_is_in_the_patch(world):
    world.pull_request(24, REGRESSION_CHANGE)
    run_id, run = dispatch(world, "tile32x256", 24)
    assert run.jobs()[REGEN_JOB] == "failure", run.jobs()
    summary = run.summary(REGEN_JOB)
    assert "regen-golden refused" in summary and "REGRESSION (occupancy falling" in summary, summary
    assert "dispatch the regen workflow again with accept_regression: occupancy=<why it is right>" in run.output(
        REGEN_JOB
    )

    reason = "a taller tile, measured faster on the H200"
    run_id, run = dispatch(world, "tile32x256", 24, f"occupancy={reason}")
    assert run.jobs() == GREEN, run.jobs()
    patch = (world.artifact(run_id, "golden-regen") / "golden.patch").read_text()
    assert f"+++ b/golden/{FAMILY}/REGRESSIONS.yaml" in patch and f"+  reason: {reason}" in patch, patch
    assert f"+++ b/golden/{FAMILY}/tile32x256/sm_80.machine.yaml" in patch


def test_a_patch_that_touches_anything_else_is_refused_by_the_default_branchs_check(world):
    world.pull_request(21, {**SETTINGS_CHANGE, "noxfile_harness.py": (ANCHOR, TAMPERING_SESSION + ANCHOR)})
    run_id, run = dispatch(world, "", 21)
    assert run.jobs() == {**GREEN, PATCH_JOB: "failure"}, run.jobs()
    unchecked = world.artifact(run_id, "golden-regen-unchecked") / "golden.patch"
    listed = subprocess.run(["git", "apply", "--numstat", str(unchecked)], capture_output=True, text=True, check=True)
    assert "golden/x.cu" in listed.stdout and WORKFLOW not in listed.stdout, "git's listing hides the deletion"
    (error,) = run.commands(PATCH_JOB, "error")
    # Both refused by the base's folder, golden/: the workflow the hunk deletes, the workflow the regen changed.
    assert error["arg"].startswith("refused: the patch may change only the regular files a regen writes under golden/")
    assert WORKFLOW in error["arg"] and ".github/workflows/harness.yml" in error["arg"], error
    assert "sha256" not in run.summary(PATCH_JOB)
    # The golden-regen the regen's code uploaded is replaced: the run's artifact holds nothing to apply.
    assert sorted(path.name for path in world.artifact(run_id, "golden-regen").iterdir()) == ["REFUSED.txt"]


def refused_run(world: World, run_id: int, run) -> str:
    """The patch job failed with one error, nothing to apply left: the error's text."""
    assert run.jobs() == {**GREEN, PATCH_JOB: "failure"}, run.jobs()
    (error,) = run.commands(PATCH_JOB, "error")
    assert "sha256" not in run.summary(PATCH_JOB)
    assert sorted(path.name for path in world.artifact(run_id, "golden-regen").iterdir()) == ["REFUSED.txt"]
    return error["arg"]


def test_a_regression_the_dispatch_did_not_accept_is_refused_by_the_default_branchs_harness(world):
    """A tampered regen writes the slower kernel, a ledger record with a reason nobody gave, and a moved cost. Each
    would pass `git apply` and the static check (a snapshot equal to a fresh lowering passes): main's harness, reading
    the patch as data, refuses them."""
    world.pull_request(28, {"noxfile_harness.py": (ANCHOR, WITHHELD_REGRESSION_SESSION + ANCHOR)})
    run_id, run = dispatch(world, "", 28)
    error = refused_run(world, run_id, run)
    assert error.startswith("refused: 3 finding(s) in what the regen wrote"), error
    log = run.output(PATCH_JOB)
    assert (
        f"refused record golden/{FAMILY}/REGRESSIONS.yaml: {FAMILY}/tile32x256/sm_80 occupancy "
        "residual_add__kernel: 'regen option', but the dispatch's accept_regression does not name occupancy"
    ) in log
    assert (f"refused golden/{FAMILY}/tile32x256/sm_80.machine.yaml: a regression (occupancy: occupancy falling "
            "(resident warps per SM): residual_add__kernel: 28 warps/SM (7 blocks of 128) -> 12 warps/SM (3 blocks of "
            "128)) with no acknowledged record") in log  # fmt: skip
    assert (
        f"refused golden/COSTS.yaml: a regen never changes a case's recorded seconds: {FAMILY}/tile32x256/sm_80" in log
    )


def test_a_timing_baseline_or_a_dotfile_in_the_patch_is_refused(world):
    world.pull_request(29, {"noxfile_harness.py": (ANCHOR, BESIDE_THE_SNAPSHOTS_SESSION + ANCHOR)})
    run_id, run = dispatch(world, "", 29)
    error = refused_run(world, run_id, run)
    assert error.startswith("refused: the patch may change only the regular files a regen writes under golden/"), error
    assert "golden/timing/nvidia-h200.yaml" in error and "golden/.hidden" in error, error
    log = run.output(PATCH_JOB)
    assert "refused golden/timing/nvidia-h200.yaml changed (100644 -> 100644): a GPU timing baseline" in log
    assert "refused golden/.hidden created (000000 -> 100644): a dotfile or dot-folder" in log


# A pull request that rewrites the regen workflow: the patch job's check replaced by a look-alike of its summary for
# whatever the regen's code uploaded. Had it run, its marker would be in the log.
ALTERED_REGEN = (
    """      - name: Check the patch
        env:""",
    """      - name: Check the patch, altered
        run: |
          echo ALTERED-REGEN-RAN
          echo "## Regenerated snapshots: sha256 of the look-alike" >> "$GITHUB_STEP_SUMMARY"
      - name: The real check, never run
        if: false
        env:""",
)


def test_a_pull_request_s_own_regen_workflow_never_runs(world):
    """Dispatched as docs/ci.md says, on gpu-dispatch at main's head: main's regen.yml runs, the pull request's code
    in its untrusted job only, and the patch job's summary alone says which patch to apply; a regen that changes
    nothing is green."""
    head = world.pull_request(25, {".github/workflows/regen.yml": ALTERED_REGEN,
                                   "noxfile_harness.py": (ANCHOR, UNCHANGING_SESSION + ANCHOR)})  # fmt: skip
    run_id, run = dispatch(world, "", 25)
    assert run.jobs() == GREEN, run.jobs()
    assert not any("ALTERED-REGEN-RAN" in run.output(job) for job in GREEN)
    assert "golden files: 0 created, 0 updated, 0 deleted" in run.output(REGEN_JOB), "the pull request's code ran"
    assert f"checked out {head}" in run.output(REGEN_JOB), "by its head SHA"
    # Its regen wrote nothing (the session stands in for an up-to-date regen, lowering nothing): green, an empty patch.
    assert (world.artifact(run_id, "golden-regen-unchecked") / "golden.patch").read_bytes() == b""
    assert (world.artifact(run_id, "golden-regen") / "golden.patch").read_bytes() == b""
    summary = run.summary(PATCH_JOB)
    assert "look-alike" not in summary and "no snapshot changed" in summary and "sha256" not in summary, summary


def test_a_regen_started_on_another_branch_runs_nothing_of_it(world):
    """The old way, a pull request's commits pushed to a branch of the repository and the regen started there: main's
    copy of the workflow (which this branch holds) refuses before anything of the commit runs. A branch whose copy is
    altered runs its own: that is why nothing tells a maintainer to push one."""
    world.pull_request(26, {"noxfile_harness.py": (ANCHOR, UNCHANGING_SESSION + ANCHOR)})
    run_id, run = dispatch(world, "", None, branch="pr-26")
    assert run.jobs() == {COMMIT_JOB: "failure", PATCH_JOB: "failure"}, run.jobs()  # act lists no skipped job
    (error,) = run.commands(COMMIT_JOB, "error")
    assert error["arg"].startswith("on refs/heads/pr-26: run main on main, or a pull request's head"), error
    assert not world.artifact(run_id, "golden-regen-unchecked").exists(), "nothing of the branch ran"
    assert [path.name for path in world.artifact(run_id, "golden-regen").iterdir()] == ["REFUSED.txt"]


def test_a_pull_request_is_regenerated_only_at_the_head_that_was_reviewed(world):
    world.pull_request(27)
    run_id, run = dispatch(world, "", 27, head="1" * 40)
    assert run.jobs()[COMMIT_JOB] == "failure", run.jobs()
    (error,) = run.commands(COMMIT_JOB, "error")
    assert error["arg"] == f"the head of pull request 27 is {world.sha('pr-27')}, not {'1' * 40}", error
    assert not world.artifact(run_id, "golden-regen-unchecked").exists()
