"""regen.yml, dispatched by hand, run by act on the reduced copy (ci/README.md)."""

from __future__ import annotations

import subprocess

from act import FAMILY, REPOSITORY, World
from test_static import KERNEL_CHANGE

# A regen that runs code which rewrites the patch: the pull request's noxfile changes one snapshot and sets git's
# external diff, so the workflow's own `git diff` prints what that code wants, here a change to a workflow.
FAKE_PATCH = (
    "diff --git a/.github/workflows/static.yml b/.github/workflows/static.yml\n"
    "--- a/.github/workflows/static.yml\n+++ b/.github/workflows/static.yml\n@@ -1 +1 @@\n-# Every\n+# None\n"
)
TAMPERING_SESSION = f"""

@nox.session(name="regen-golden", venv_backend="none")
def regen_golden(session):
    Path("build").mkdir(exist_ok=True)
    Path("build/fake.patch").write_text({FAKE_PATCH!r})
    diff = Path("build/fake-diff")
    diff.write_text("#!/bin/sh\\ncat " + str(Path("build/fake.patch").resolve()) + "\\n")
    diff.chmod(0o755)
    session.run("git", "config", "diff.external", str(diff.resolve()), external=True)
    manifest = Path("golden/MANIFEST.yaml")
    manifest.write_text(manifest.read_text() + "\\n")
"""


def dispatch(world: World, filter_: str):
    event = {"inputs": {"filter": filter_}, "ref": "refs/heads/main", "repository": {"full_name": REPOSITORY}}
    return world.run("regen.yml", "workflow_dispatch", event)


def test_a_regen_with_a_filter_hands_back_a_patch_of_golden_only(world):
    world.pull_request(20, KERNEL_CHANGE)  # the branch a maintainer dispatches on
    world.checkout("pr-20")
    run_id, run = dispatch(world, "tile64x512")
    assert run.jobs() == {"regen-golden": "success", "the patch touches the snapshot folder only": "success"}, (
        run.jobs()
    )
    patch = world.artifact(run_id, "golden-regen") / "golden.patch"
    touched = subprocess.run(["git", "apply", "--numstat", str(patch)], capture_output=True, text=True, check=True)
    paths = {line.split("\t")[2] for line in touched.stdout.splitlines()}
    assert paths and all(path.startswith(f"golden/{FAMILY}/tile64x512/") for path in paths), paths
    assert "git apply --index golden.patch" in run.summary("the patch touches the snapshot folder only")


def test_a_patch_that_touches_anything_else_is_refused(world):
    world.pull_request(
        21, {"noxfile.py": ("\n\n@nox.session\ndef lint(", f"{TAMPERING_SESSION}\n\n@nox.session\ndef lint(")}
    )
    world.checkout("pr-21")
    run_id, run = dispatch(world, "")
    assert run.jobs() == {"regen-golden": "success", "the patch touches the snapshot folder only": "failure"}, (
        run.jobs()
    )
    (error,) = run.commands("the patch touches the snapshot folder only", "error")
    assert "refused" in error["arg"] and ".github/workflows/static.yml" in run.output(
        "the patch touches the snapshot folder only"
    )
    assert not world.artifact(run_id, "golden-regen").exists(), "no checked patch to apply"
