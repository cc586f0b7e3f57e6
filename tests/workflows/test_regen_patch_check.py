""".github/regen-patch-check, what regen.yml's `patch` job runs on the regen's patch before it hands it on: run as
the job runs it, in a git repository at the commit the patch was made against. Each attack below is first shown to
do what it does with `git apply`, then refused."""

from __future__ import annotations

import ast
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SUBPROCESS_LIMIT_S

CHECK = REPO / ".github" / "regen-patch-check"
WORKFLOW = ".github/workflows/static.yml"
WORKFLOW_TEXT = "# Every pull request\non:\n  pull_request:\n"
# A snapshot-folder patch that git applies: modification hunks whose two sides differ, no rename header. The paths
# git reads from it (`--numstat`, `--summary`, `--stat`) are its new side only.
TWO_SIDED = (
    f"diff --git a/{WORKFLOW} b/golden/x.cu\n"
    f"--- a/{WORKFLOW}\n+++ b/golden/x.cu\n@@ -1,3 +1,3 @@\n-# Every pull request\n+// x\n on:\n   pull_request:\n"
)


def git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}  # fmt: skip
    env.pop("GIT_INDEX_FILE", None)
    return subprocess.run(["git", *args], cwd=repo, env=env, input=stdin, capture_output=True, check=True,
                          timeout=SUBPROCESS_LIMIT_S).stdout  # fmt: skip


def committed(root: Path, files: dict[str, str]) -> Path:
    """A git repository at `root` holding `files` (path -> text) in one commit on main."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "init", "--quiet", "--initial-branch", "main")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "base")
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with a workflow, snapshots under golden/ and a file beside it."""
    root = tmp_path / "repo"
    files = {WORKFLOW: WORKFLOW_TEXT, "golden/fam/a/sm_90.cu": "// a\nint a;\n", "golden/fam/a/sm_90.yaml": "a: 1\n",
             "golden/fam/b/sm_90.error": "failed\n", "golden/MANIFEST.yaml": "tilelang: 1\n",
             "README.md": "r\n"}  # fmt: skip
    return committed(root, files)


def check(repo: Path, patch: bytes | str, folder: str = "golden", *, cwd: Path | None = None):
    """The check's exit status, what it printed, and OUT (None when it wrote none)."""
    patch_file, out = repo.parent / "golden.patch", repo.parent / "checked.patch"
    patch_file.write_bytes(patch.encode() if isinstance(patch, str) else patch)
    out.write_text("an earlier run's")
    done = subprocess.run([str(CHECK), str(patch_file), folder, str(out)], cwd=cwd or repo, capture_output=True,
                          text=True, timeout=SUBPROCESS_LIMIT_S)  # fmt: skip
    return done.returncode, done.stdout + done.stderr, out.read_bytes() if out.exists() else None


def staged_patch(repo: Path, change) -> tuple[bytes, str]:
    """The patch `git diff --cached --binary` makes of `change(repo)` (as the regen job makes it), and the tree the
    change makes; the repository is then put back to its commit."""
    change(repo)
    git(repo, "add", "--all")
    patch, tree = git(repo, "diff", "--cached", "--binary"), git(repo, "write-tree").decode().strip()
    git(repo, "reset", "--quiet", "--hard")
    git(repo, "clean", "--quiet", "-fdx")
    return patch, tree


def applied(repo: Path, patch: bytes, tmp_path: Path) -> Path:
    """A clone of the repository with `git apply --index` of the patch done, as a maintainer applies it."""
    clone = tmp_path / f"clone-{len(list(tmp_path.glob('clone-*')))}"
    git(tmp_path, "clone", "--quiet", str(repo), str(clone))
    (tmp_path / "apply.patch").write_bytes(patch)
    git(clone, "apply", "--index", str(tmp_path / "apply.patch"))
    return clone


def refused(repo: Path, patch: bytes | str, *paths: str) -> str:
    """git applies the patch, and the check refuses it, naming the paths on its last line; returns what it printed."""
    patch = patch.encode() if isinstance(patch, str) else patch
    subprocess.run(["git", "apply", "--check", "--cached", "-"], cwd=repo, input=patch, check=True)
    status, output, out = check(repo, patch)
    last = output.strip().splitlines()[-1]
    assert status == 1, output
    assert last.startswith("refused: the patch may change only the regular files a regen writes under golden/, not "), (
        output
    )
    assert all(path in last for path in paths), output
    assert out is None, "nothing to apply is left"
    return output


def snapshot_change(repo: Path) -> None:
    """What a regen does: a snapshot created (one of them binary), one changed, one deleted, one made executable."""
    (repo / "golden/fam/c/sm_90.cu").parent.mkdir(parents=True)
    (repo / "golden/fam/c/sm_90.cu").write_text("// c\n")
    (repo / "golden/fam/c/sm_90.machine.yaml").write_bytes(bytes(range(256)))
    (repo / "golden/fam/a/sm_90.cu").write_text("// a\nint a_1;\n")
    (repo / "golden/fam/b/sm_90.error").unlink()
    (repo / "golden/fam/a/sm_90.yaml").chmod(0o755)


def test_an_ordinary_snapshot_patch_is_accepted_and_out_makes_exactly_its_change(repo, tmp_path):
    patch, tree = staged_patch(repo, snapshot_change)
    status, output, out = check(repo, patch)
    assert status == 0, output
    assert output.strip().splitlines()[-1].startswith("checked: 5 regular file(s) under golden/"), output
    for line in ("ok golden/fam/c/sm_90.cu created (000000 -> 100644)",
                 "ok golden/fam/a/sm_90.cu changed (100644 -> 100644)",
                 "ok golden/fam/b/sm_90.error deleted (100644 -> 000000)",
                 "ok golden/fam/a/sm_90.yaml changed (100644 -> 100755)"):  # fmt: skip
        assert line in output, output
    clone = applied(repo, out, tmp_path)
    assert git(clone, "write-tree").decode().strip() == tree, "OUT applied makes the tree the regen made"
    assert (clone / "golden/fam/c/sm_90.machine.yaml").read_bytes() == bytes(range(256))
    assert os.access(clone / "golden/fam/a/sm_90.yaml", os.X_OK)
    # The check wrote nothing into the checkout: its index and files are the commit's.
    assert git(repo, "status", "--porcelain", "--ignored") == b""


def test_an_empty_patch_is_accepted_and_changes_nothing(repo):
    status, output, out = check(repo, b"")
    assert (status, out) == (0, b""), output
    assert output.strip() == "no snapshot changed"


def test_out_is_the_diff_git_makes_of_the_result_not_the_text_it_was_given(repo, tmp_path):
    patch, tree = staged_patch(repo, snapshot_change)
    first, rest = patch.split(b"\ndiff --git ", 1)
    noisy = b"a comment before the first diff\n" + first + b"\nsome text between two files\ndiff --git " + rest
    assert subprocess.run(["git", "apply", "--check", "-"], cwd=repo, input=noisy).returncode == 0, "git takes it"
    status, output, out = check(repo, noisy)
    assert status == 0, output
    assert b"comment" not in out and b"text between" not in out
    assert out.startswith(b"diff --git a/golden/") and b"\nindex " in out
    assert git(applied(repo, out, tmp_path), "write-tree").decode().strip() == tree


def test_a_hunk_whose_two_sides_differ_is_refused(repo, tmp_path):
    # What it does: git's own listings name golden/x.cu alone, and `git apply --index` deletes the workflow.
    (tmp_path / "two-sided.patch").write_text(TWO_SIDED)
    listed = git(repo, "apply", "--numstat", str(tmp_path / "two-sided.patch")).decode()
    assert listed.split("\t")[2].strip() == "golden/x.cu" and WORKFLOW not in listed
    assert not (applied(repo, TWO_SIDED.encode(), tmp_path) / WORKFLOW).exists()
    refused(repo, TWO_SIDED, WORKFLOW)


def test_the_same_two_sided_hunk_inside_the_folder_is_handed_on_as_what_it_does(repo, tmp_path):
    """Both sides under golden/: allowed (a rename is no different), and OUT says what git's listings of the
    patch hide, that the first snapshot is deleted."""
    inside = (
        TWO_SIDED.replace(WORKFLOW, "golden/fam/a/sm_90.cu")
        .replace("golden/x.cu", "golden/fam/x/sm_90.cu")
        .replace(
            "@@ -1,3 +1,3 @@\n-# Every pull request\n+// x\n on:\n   pull_request:\n",
            "@@ -1,2 +1,2 @@\n-// a\n+// x\n int a;\n",
        )
    )
    status, output, out = check(repo, inside)
    assert status == 0, output
    assert b"diff --git a/golden/fam/a/sm_90.cu b/golden/fam/a/sm_90.cu\ndeleted file mode 100644\n" in out
    assert b"diff --git a/golden/fam/x/sm_90.cu b/golden/fam/x/sm_90.cu\nnew file mode 100644\n" in out
    clone = applied(repo, out, tmp_path)
    assert not (clone / "golden/fam/a/sm_90.cu").exists()
    assert (clone / "golden/fam/x/sm_90.cu").read_text() == "// x\nint a;\n"


def test_a_rename_inside_the_folder_is_accepted_and_one_from_outside_refused(repo, tmp_path):
    patch, tree = staged_patch(repo, lambda root: (root / "golden/fam/a").rename(root / "golden/fam/x"))
    assert b"rename from golden/fam/a/sm_90.cu" in patch, "git diff finds renames: the regen's patch may have them"
    status, output, out = check(repo, patch)
    assert status == 0, output
    assert git(applied(repo, out, tmp_path), "write-tree").decode().strip() == tree
    moved = (
        b"diff --git a/README.md b/golden/f/v/r.cu\nsimilarity index 100%\nrename from README.md\n"
        b"rename to golden/f/v/r.cu\n"
    )
    refused(repo, moved, "README.md")


def workflow_change(repo: Path) -> None:
    (repo / WORKFLOW).write_text(WORKFLOW_TEXT + "  push:\n")


def test_a_patch_of_github_is_refused_the_folder_being_the_checks(repo):
    """A pull request that sets `golden = ".github"` gets a patch of its workflows from the regen: the folder given
    to the check is the base's, and .github/ is never one."""
    patch, _ = staged_patch(repo, workflow_change)
    refused(repo, patch, WORKFLOW)
    status, output, out = check(repo, patch, ".github")
    assert (status, out) == (2, None) and "unusable FOLDER" in output


def test_a_deletion_outside_the_folder_is_refused(repo):
    patch, _ = staged_patch(repo, lambda root: (root / "README.md").unlink())
    assert patch.startswith(b"diff --git a/README.md b/README.md\ndeleted file mode 100644")
    refused(repo, patch, "README.md")


def test_a_folder_that_only_starts_like_it_is_outside(repo):
    patch, _ = staged_patch(repo, lambda root: (root / "goldenx").mkdir() or (root / "goldenx/a").write_text("a\n"))
    refused(repo, patch, "goldenx/a")


def test_gits_own_files_are_no_snapshots(repo):
    patch, _ = staged_patch(repo, lambda root: (root / "golden/.gitattributes").write_text("* filter=x\n"))
    refused(repo, patch, "golden/.gitattributes")


def test_a_new_file_of_mode_040000_is_refused(repo, tmp_path):
    patch = "diff --git a/golden/f/d/sm_90.cu b/golden/f/d/sm_90.cu\nnew file mode 040000\nindex 0000000..e69de29\n"
    # What it does: git applies it, and the index holds an entry that git's own listings then skip.
    clone = applied(repo, patch.encode(), tmp_path)
    assert b"golden/f/d" not in git(clone, "ls-files", "--stage")
    output = refused(repo, patch, "golden/f/d/sm_90.cu")
    # Each of two readings refuses it: git's summary of the patch, and the tree git wrote from that index.
    assert "refused golden/f/d/sm_90.cu: the patch gives it mode 040000" in output
    assert "refused golden/f/d/sm_90.cu: named by the patch, but no file there changed" in output


def test_a_symbolic_link_is_refused(repo, tmp_path):
    patch, _ = staged_patch(repo, lambda root: (root / "golden/fam/a/sm_80.cu").symlink_to("../../../.github"))
    assert b"new file mode 120000" in patch
    assert (applied(repo, patch, tmp_path) / "golden/fam/a/sm_80.cu").is_symlink(), "git makes the link"
    output = refused(repo, patch, "golden/fam/a/sm_80.cu")
    assert "refused golden/fam/a/sm_80.cu created (000000 -> 120000): not a regular file" in output


def test_a_submodule_is_refused(repo):
    patch = (
        "diff --git a/golden/fam/a/sm_80.cu b/golden/fam/a/sm_80.cu\nnew file mode 160000\nindex 0000000..1234567\n"
        "--- /dev/null\n+++ b/golden/fam/a/sm_80.cu\n@@ -0,0 +1 @@\n"
        "+Subproject commit 1234567890123456789012345678901234567890\n"
    )
    output = refused(repo, patch, "golden/fam/a/sm_80.cu")
    assert "refused golden/fam/a/sm_80.cu created (000000 -> 160000): not a regular file" in output


def test_a_snapshot_turned_into_a_link_is_refused(repo):
    def to_link(root: Path) -> None:
        (root / "golden/fam/a/sm_90.cu").unlink()
        (root / "golden/fam/a/sm_90.cu").symlink_to(f"../../../{WORKFLOW}")

    patch, _ = staged_patch(repo, to_link)
    refused(repo, patch, "golden/fam/a/sm_90.cu")


def test_a_path_with_dot_dot_is_refused_with_gits_message(repo):
    patch = (
        "diff --git a/golden/../.github/x.yml b/golden/../.github/x.yml\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/golden/../.github/x.yml\n@@ -0,0 +1 @@\n+x\n"
    )
    status, output, out = check(repo, patch)
    assert (status, out) == (1, None), output
    assert "refused: git cannot apply the patch" in output and "invalid path 'golden/../.github/x.yml'" in output


def test_a_patch_git_cannot_apply_is_refused_with_gits_message(repo):
    patch = "diff --git a/golden/MANIFEST.yaml b/golden/MANIFEST.yaml\n--- a/golden/MANIFEST.yaml\n" \
            "+++ b/golden/MANIFEST.yaml\n@@ -1 +1 @@\n-tilelang: 2\n+tilelang: 3\n"  # fmt: skip
    status, output, out = check(repo, patch)
    assert (status, out) == (1, None), output
    assert output.strip().splitlines()[-1].startswith("refused: git cannot apply the patch"), output
    assert "git: error: patch failed: golden/MANIFEST.yaml:1" in output


@pytest.mark.parametrize("name", ["::error title=regen::x.cu", "a::b.cu", "##[error title=regen]passed.cu"])
def test_a_snapshot_path_holding_a_workflow_command_is_refused(repo, name):
    """The runner reads `::command::` at a line's start and the legacy `##[command]` anywhere in a line: the job that
    prints the check's log would run either, were the path accepted (and printed outside a stop-commands block)."""
    patch, _ = staged_patch(repo, lambda root: (root / "golden/fam/a" / name).write_text("x\n"))
    output = refused(repo, patch, name)
    assert f"refused golden/fam/a/{name} created (000000 -> 100644): a name holding a workflow command" in output


def test_paths_are_the_repositorys_from_a_subfolder_too(repo):
    patch, _ = staged_patch(repo, snapshot_change)
    status, output, out = check(repo, patch, cwd=repo / "golden" / "fam")
    assert status == 0 and out, output


def test_names_from_the_patch_never_start_a_line_of_the_log(repo):
    """A path is data: the workflow prints the log, where a line starting with `::` would be a workflow command."""
    patch, _ = staged_patch(repo, lambda root: (root / "::error::x").write_text("x\n"))
    status, output, _ = check(repo, patch)
    assert status == 1 and "::error::x" in output
    assert not [line for line in output.splitlines() if line.lstrip().startswith("::")], output


@pytest.mark.parametrize("folder", ["", "/golden", "../golden", "golden/../.github", ".", "./golden", "a//b",
                                    ".github", ".github/golden", ".git", "golden/.git"])  # fmt: skip
def test_an_unusable_folder_is_a_usage_error(repo, folder):
    status, output, out = check(repo, b"", folder)
    assert (status, out) == (2, None) and "unusable FOLDER" in output, output


def test_usage_errors(repo, tmp_path):
    assert subprocess.run([str(CHECK)], cwd=repo, capture_output=True).returncode == 2
    missing = subprocess.run([str(CHECK), str(tmp_path / "none.patch"), "golden"], cwd=repo, capture_output=True)
    assert missing.returncode == 2 and b"no such file" in missing.stderr
    (tmp_path / "empty.patch").write_bytes(b"")
    (tmp_path / "elsewhere").mkdir()
    ceiling = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    outside = subprocess.run([str(CHECK), str(tmp_path / "empty.patch"), "golden"], cwd=tmp_path / "elsewhere",
                             capture_output=True, env=ceiling)  # fmt: skip
    assert outside.returncode == 2 and b"inside a git checkout" in outside.stderr


def test_a_trailing_slash_on_the_folder_is_the_folder(repo):
    patch, _ = staged_patch(repo, snapshot_change)
    assert check(repo, patch, "golden/")[0] == 0


# -- only the files a regen writes ---------------------------------------------------------------------------------


def load_check() -> dict:
    """The check's names, read from the script as the job runs it (it is no module)."""
    return runpy.run_path(str(CHECK))


def test_the_files_a_regen_may_write_are_the_harnesss_own_names():
    """The allowlist is the harness's: each case's files, each family's ledger and summary, the manifest, the costs."""
    from tilelang_golden.static.snapshots.acknowledged import LEDGER
    from tilelang_golden.static.snapshots.case_files import SNAPSHOT_FILES
    from tilelang_golden.static.snapshots.costs import COSTS
    from tilelang_golden.static.snapshots.snapshot import MANIFEST
    from tilelang_golden.static.variant_effects import SUMMARY_NAME

    names = load_check()
    assert set(names["CASE_SUFFIXES"]) == {suffix for suffix, _ in SNAPSHOT_FILES}
    assert set(names["FAMILY_FILES"]) == {LEDGER, SUMMARY_NAME}
    assert set(names["FOLDER_FILES"]) == {MANIFEST, COSTS}
    from tilelang_golden.gpu.gate.baseline_file import TIMING_DIR

    assert TIMING_DIR.name.encode() == names["TIMING"], "the timing baselines' folder"


def every_file_a_regen_writes(repo: Path) -> None:
    for name in ("golden/fam/a/sm_90.cu", "golden/fam/a/sm_90.yaml", "golden/fam/a/sm_90.machine.yaml",
                 "golden/fam/a/gfx942.hip", "golden/fam/a/gfx942.yaml", "golden/fam/b/sm_90.error",
                 "golden/fam/REGRESSIONS.yaml", "golden/fam/SUMMARY.md", "golden/MANIFEST.yaml",
                 "golden/COSTS.yaml", "golden/fam/v1.5/sm_100a.cu"):  # fmt: skip
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(f"# {name}\n")


def test_every_file_a_regen_writes_is_accepted(repo):
    patch, _ = staged_patch(repo, every_file_a_regen_writes)
    status, output, out = check(repo, patch)
    assert status == 0 and out, output
    assert output.strip().splitlines()[-1].startswith("checked: 11 regular file(s) under golden/"), output


def rekeyed_timing_baseline(repo: Path) -> None:
    """A tampered regen's: the H200's baseline under another torch, which the GPU check then reported only."""
    (repo / "golden/timing").mkdir(parents=True, exist_ok=True)
    (repo / "golden/timing/nvidia-h200.yaml").write_text("format: 1\nkey:\n  gpu: NVIDIA H200\n  torch: 0.0.0\n")


@pytest.mark.parametrize("already_there", [False, True], ids=["created", "changed"])
def test_a_timing_baseline_is_refused(repo, already_there):
    if already_there:
        rekeyed_timing_baseline(repo)
        (repo / "golden/timing/nvidia-h200.yaml").write_text("format: 1\nkey:\n  gpu: NVIDIA H200\n  torch: 2.13.0\n")
        git(repo, "add", "--all")
        git(repo, "commit", "--quiet", "-m", "baseline")
    patch, _ = staged_patch(repo, rekeyed_timing_baseline)
    output = refused(repo, patch, "golden/timing/nvidia-h200.yaml")
    assert "golden/timing/nvidia-h200.yaml" in output and "a GPU timing baseline (timing/)" in output, output


@pytest.mark.parametrize(
    "name", ["golden/.env", "golden/fam/.hidden.yaml", "golden/fam/a/.sm_90.cu", "golden/.fam/a/sm_90.cu"]
)
def test_a_dotfile_is_refused(repo, name):
    patch, _ = staged_patch(repo, lambda root: (root / name).parent.mkdir(parents=True, exist_ok=True)
                            or (root / name).write_text("x\n"))  # fmt: skip
    output = refused(repo, patch, name)
    assert "a dotfile or dot-folder: a regen writes none" in output, output


@pytest.mark.parametrize(
    "name",
    ["golden/fam/a/sm_90.bin", "golden/fam/a/b/sm_90.cu", "golden/notes.txt", "golden/fam/README.md",
     "golden/fam/a/sm_90.cu.orig", "golden/x.cu", "golden/fam/a/sm 90.cu", "golden/9fam/REGRESSIONS.yaml"],
)  # fmt: skip
def test_any_other_file_under_the_folder_is_refused(repo, name):
    patch, _ = staged_patch(repo, lambda root: (root / name).parent.mkdir(parents=True, exist_ok=True)
                            or (root / name).write_text("x\n"))  # fmt: skip
    output = refused(repo, patch, name)
    assert "not a file a regen writes" in output, output


def test_a_deletion_of_another_file_under_the_folder_is_refused_too(repo):
    """Both sides are checked: a file that is no snapshot may not be deleted by a regen either."""
    (repo / "golden/fam/notes.txt").write_text("kept by hand\n")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", "notes")
    patch, _ = staged_patch(repo, lambda root: (root / "golden/fam/notes.txt").unlink())
    refused(repo, patch, "golden/fam/notes.txt")


# -- the regressions a patch records, judged by the default branch's harness (tilelang_golden.regen_patch) --------

MACHINE_FACTS = """format: 1
case: {{family: fam, variant: a, target: sm_80}}
kernels:
- name: k
  spill_store_bytes: {spills}
  spill_load_bytes: 0
  occupancy: {{threads: 128, blocks_per_sm: {blocks}, warps_per_sm: {warps}}}
  sass: {{async_copies: {{}}, tma: {{}}, mma: {{}}}}
"""
REASON = "a taller tile, measured faster on the H200"
FAMILY_SOURCE = "from tilelang_golden.family import Family, Variant\nFAMILY = Family(name='fam', variants=[])\n"


def record(case: str = "fam/a/sm_80", name: str = "occupancy", reason: str = REASON, by: str = "regen option",
           change: str = "28 warps/SM (7 blocks of 128) -> 12 warps/SM (3 blocks of 128)") -> str:  # fmt: skip
    return (f"- case: {case}\n  class: {name}\n  kernel: k\n  change: {change}\n  reason: {reason}\n"
            f"  acknowledged_by: {by}\n  tilelang: 0.1.15\n")  # fmt: skip


@pytest.fixture
def facts_repo(tmp_path: Path) -> Path:
    """The dispatched commit: a family's file, one case's machine facts, the costs."""
    root = tmp_path / "commit"
    files = {"pyproject.toml": '[tool.tilelang-golden]\nfamilies = ["kernels"]\n', "kernels/fam.py": FAMILY_SOURCE,
             "golden/fam/a/sm_80.machine.yaml": MACHINE_FACTS.format(spills=0, blocks=7, warps=28),
             "golden/COSTS.yaml": "seconds:\n  fam/a/sm_80: 0.5\n"}  # fmt: skip
    return committed(root, files)


def judge(repo: Path, change, accept: str = "") -> tuple[int, str]:
    """The judge as the patch job runs it: main's src/ on PYTHONPATH, in the dispatched commit, on the regen's patch."""
    patch, _ = staged_patch(repo, change)
    (repo.parent / "golden.patch").write_bytes(patch)
    environ = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    command = [sys.executable, "-P", "-m", "tilelang_golden.regen_patch", str(repo.parent / "golden.patch"), "golden",
               f"--accept-regression={accept}"]  # fmt: skip
    done = subprocess.run(command, cwd=repo, env=environ, capture_output=True, text=True, timeout=SUBPROCESS_LIMIT_S)
    return done.returncode, done.stdout + done.stderr


def writes(*files: tuple[str, str]):
    def change(root: Path) -> None:
        for name, text in files:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)

    return change


FEWER_WARPS = ("golden/fam/a/sm_80.machine.yaml", MACHINE_FACTS.format(spills=0, blocks=3, warps=12))
MORE_WARPS = ("golden/fam/a/sm_80.machine.yaml", MACHINE_FACTS.format(spills=0, blocks=8, warps=32))
LEDGER = "golden/fam/REGRESSIONS.yaml"


def test_a_regression_without_a_record_is_refused_whatever_the_dispatch_accepted(facts_repo):
    """A tampered regen writes the slower kernel and no ledger record: the static check would pass it (it equals a
    fresh lowering), and `git apply` takes it."""
    for accept in ("", f"occupancy={REASON}"):
        status, output = judge(facts_repo, writes(FEWER_WARPS), accept)
        assert status == 1, output
        assert ("refused golden/fam/a/sm_80.machine.yaml: a regression (occupancy: occupancy falling (resident warps "
                "per SM): k: 28 warps/SM (7 blocks of 128) -> 12 warps/SM (3 blocks of 128))") in output  # fmt: skip
        assert "no acknowledged record of fam/a/sm_80 occupancy k in fam/REGRESSIONS.yaml" in output
        assert output.strip().splitlines()[-1].startswith("refused: 1 finding(s) in what the regen wrote"), output


def test_a_regression_the_dispatch_accepted_with_its_record_passes(facts_repo):
    status, output = judge(facts_repo, writes(FEWER_WARPS, (LEDGER, record())), f"occupancy={REASON}")
    assert status == 0, output
    assert output.strip() == ("regressions: 1 in the changed snapshots, each with an acknowledged record; 1 record(s) "
                              "added or changed, each acknowledged by the dispatch or the family")  # fmt: skip


def test_nothing_of_the_commits_checkout_is_imported(facts_repo):
    """The job runs the judge with the commit's checkout as its working directory: `python -P` keeps that off
    sys.path, where a `yaml.py` of the pull request's would have run in the job that decides."""
    writes(("yaml.py", "raise SystemExit('the commit\\'s code ran')\n"))(facts_repo)
    git(facts_repo, "add", "--all")
    git(facts_repo, "commit", "--quiet", "-m", "a module beside the snapshots")
    status, output = judge(facts_repo, writes(MORE_WARPS))
    assert status == 0 and "the commit's code ran" not in output, output


def test_an_empty_patch_has_nothing_to_judge(facts_repo):
    status, output = judge(facts_repo, lambda root: None)
    assert status == 0 and output.startswith("regressions: 0 in the changed snapshots"), output


def test_an_improvement_needs_no_record(facts_repo):
    status, output = judge(facts_repo, writes(MORE_WARPS))
    assert status == 0 and output.startswith("regressions: 0 in the changed snapshots"), output


@pytest.mark.parametrize(
    "accept, problem",
    [("", "'regen option', but the dispatch's accept_regression does not name occupancy"),
     (f"spills={REASON}", "'regen option', but the dispatch's accept_regression does not name occupancy"),
     ("occupancy=another reason", "'regen option' with a reason that is not the one the dispatch's"),
     (f"spills,occupancy= {REASON} ", None)],
    ids=["withheld", "another-class", "another-reason", "two-classes"],
)  # fmt: skip
def test_a_record_of_the_regen_option_needs_the_dispatchs_class_and_reason(facts_repo, accept, problem):
    """The maintainer withheld accept_regression (or gave another class or reason): a tampered regen writes the record
    anyway, with the reason it likes."""
    status, output = judge(facts_repo, writes(FEWER_WARPS, (LEDGER, record())), accept)
    if problem is None:
        assert status == 0, output
        return
    assert status == 1 and f"refused record golden/fam/REGRESSIONS.yaml: fam/a/sm_80 occupancy k: {problem}" in output


@pytest.mark.parametrize(
    "source, passes",
    [(f"ACK = {{'occupancy': '{REASON[:10]}' '{REASON[10:]}'}}\nV = Variant('a', kernel=None, "
      "acknowledged_regressions=ACK)\n", True),
     (f"V = Variant('a', kernel=None, acknowledged_regressions={{'occupancy': {REASON!r}}})\n", True),
     ("V = Variant('a', kernel=None, acknowledged_regressions={'occupancy': 'something else'})\n", False),
     (f"V = Variant('a', kernel=None, acknowledged_regressions=dict(occupancy={REASON!r}))\n", False),
     (f"# acknowledged_regressions={{'occupancy': {REASON!r}}}\n", False), ("", False)],
    ids=["name-bound", "literal", "another-reason", "not-a-literal", "a-comment", "none"],
)  # fmt: skip
def test_a_record_of_a_variant_declaration_needs_the_declaration_in_the_reviewed_family_file(facts_repo, source,
                                                                                            passes):  # fmt: skip
    """Read with ast from the dispatched commit, the code the maintainer reviewed: never run."""
    writes(("kernels/fam.py", FAMILY_SOURCE + source))(facts_repo)
    git(facts_repo, "commit", "--quiet", "--allow-empty", "--all", "-m", "the family, reviewed")
    status, output = judge(facts_repo, writes(FEWER_WARPS, (LEDGER, record(by="variant declaration"))))
    assert status == (0 if passes else 1), output
    if not passes:
        assert "'variant declaration', but the family's file in the dispatched commit declares no" in output


def test_a_record_by_no_one_or_of_another_family_is_refused(facts_repo):
    ledger = record(by="the regen job") + record(case="other/a/sm_80")
    status, output = judge(facts_repo, writes((LEDGER, ledger)), f"occupancy={REASON}")
    assert status == 1, output
    assert "acknowledged by the regen job, which is neither 'regen option' nor 'variant declaration'" in output
    assert "golden/fam/REGRESSIONS.yaml: other/a/sm_80 occupancy k: a case of another family" in output


def test_a_record_already_on_the_commit_is_not_judged_again(facts_repo):
    writes((LEDGER, record(reason="given in an earlier dispatch")))(facts_repo)
    git(facts_repo, "add", "--all")
    git(facts_repo, "commit", "--quiet", "-m", "ledger")
    status, output = judge(facts_repo, writes(MORE_WARPS))
    assert status == 0, output


def test_an_unreadable_ledger_or_snapshot_is_refused(facts_repo):
    status, output = judge(facts_repo, writes((LEDGER, "- not: a record\n"), (FEWER_WARPS[0], "kernels: [1]\n")))
    assert status == 1, output
    assert "refused golden/fam/REGRESSIONS.yaml: not a ledger of acknowledged regressions" in output
    assert "refused golden/fam/a/sm_80.machine.yaml: cannot be read as facts (a kernel without its name)" in output


def test_costs_may_gain_and_lose_cases_but_never_move_one(facts_repo):
    added = ("golden/COSTS.yaml", "seconds:\n  fam/a/sm_80: 0.5\n  fam/b/sm_80: 3.0\n")
    assert judge(facts_repo, writes(added))[0] == 0
    assert judge(facts_repo, writes(("golden/COSTS.yaml", "seconds: {}\n")))[0] == 0
    status, output = judge(facts_repo, writes(("golden/COSTS.yaml", "seconds:\n  fam/a/sm_80: 900\n")))
    assert status == 1, output
    assert (
        "refused golden/COSTS.yaml: a regen never changes a case's recorded seconds: fam/a/sm_80 0.5 -> 900" in output
    )
    status, output = judge(facts_repo, lambda root: (root / "golden/COSTS.yaml").unlink())
    assert status == 1 and "refused golden/COSTS.yaml: deleted" in output, output


def test_the_judge_needs_nothing_but_the_standard_library_pyyaml_and_the_regression_classes():
    """The patch job gives it main's src/ and PyYAML, nothing of the lock: no TileLang, no torch."""
    code = ("import sys; before = set(sys.modules); import tilelang_golden.regen_patch; "
            "print(sorted({m.split('.')[0] for m in set(sys.modules) - before} - set(sys.stdlib_module_names))); "
            "print(sorted(m for m in sys.modules if m.startswith('tilelang_golden')))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO / "src")},
                          capture_output=True, text=True, check=True, timeout=SUBPROCESS_LIMIT_S)  # fmt: skip
    third_party, harness = done.stdout.splitlines()
    helpers = ("_yaml", "_cython", "cython_runtime")  # PyYAML's C loader and its runtime
    assert [name for name in ast.literal_eval(third_party) if not name.startswith(helpers)] == [
        "tilelang_golden",
        "yaml",
    ], done.stdout
    assert harness == "['tilelang_golden', 'tilelang_golden.regen_patch', 'tilelang_golden.regressions']"


def test_the_judges_names_are_the_writers():
    from tilelang_golden import regen_patch
    from tilelang_golden.static.snapshots.acknowledged import LEDGER as LEDGER_NAME
    from tilelang_golden.static.snapshots.acknowledged import RECORD_KEYS
    from tilelang_golden.static.snapshots.case_files import FACTS_SUFFIX, MACHINE_SUFFIX
    from tilelang_golden.static.snapshots.costs import COSTS

    assert (regen_patch.LEDGER, regen_patch.COSTS, regen_patch.RECORD_KEYS) == (LEDGER_NAME, COSTS, RECORD_KEYS)
    assert set(regen_patch.READS) == {FACTS_SUFFIX, MACHINE_SUFFIX}
