""".github/regen-patch-check, what regen.yml's `patch` job runs on the regen's patch before it hands it on: run as
the job runs it, in a git repository at the commit the patch was made against. Each attack below is first shown to
do what it does with `git apply`, then refused."""

from __future__ import annotations

import os
import subprocess
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


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with a workflow, snapshots under golden/ and a file beside it."""
    root = tmp_path / "repo"
    files = {WORKFLOW: WORKFLOW_TEXT, "golden/fam/a/sm_90.cu": "// a\nint a;\n", "golden/fam/a/sm_90.yaml": "a: 1\n",
             "golden/fam/b/sm_90.error": "failed\n", "golden/MANIFEST.yaml": "tilelang: 1\n",
             "README.md": "r\n"}  # fmt: skip
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "init", "--quiet", "--initial-branch", "main")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "base")
    return root


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
    assert last.startswith("refused: the patch may change only regular files under golden/, not "), output
    assert all(path in last for path in paths), output
    assert out is None, "nothing to apply is left"
    return output


def snapshot_change(repo: Path) -> None:
    """What a regen does: a snapshot created (one of them binary), one changed, one deleted, one made executable."""
    (repo / "golden/fam/c/sm_90.cu").parent.mkdir(parents=True)
    (repo / "golden/fam/c/sm_90.cu").write_text("// c\n")
    (repo / "golden/fam/c/sm_90.bin").write_bytes(bytes(range(256)))
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
    assert (clone / "golden/fam/c/sm_90.bin").read_bytes() == bytes(range(256))
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
    inside = TWO_SIDED.replace(WORKFLOW, "golden/fam/a/sm_90.cu").replace(
        "@@ -1,3 +1,3 @@\n-# Every pull request\n+// x\n on:\n   pull_request:\n",
        "@@ -1,2 +1,2 @@\n-// a\n+// x\n int a;\n",
    )
    status, output, out = check(repo, inside)
    assert status == 0, output
    assert b"diff --git a/golden/fam/a/sm_90.cu b/golden/fam/a/sm_90.cu\ndeleted file mode 100644\n" in out
    assert b"diff --git a/golden/x.cu b/golden/x.cu\nnew file mode 100644\n" in out
    clone = applied(repo, out, tmp_path)
    assert not (clone / "golden/fam/a/sm_90.cu").exists() and (clone / "golden/x.cu").read_text() == "// x\nint a;\n"


def test_a_rename_inside_the_folder_is_accepted_and_one_from_outside_refused(repo, tmp_path):
    patch, tree = staged_patch(repo, lambda root: (root / "golden/fam/a/sm_90.cu").rename(root / "golden/fam/x.cu"))
    assert b"rename from golden/fam/a/sm_90.cu" in patch, "git diff finds renames: the regen's patch may have them"
    status, output, out = check(repo, patch)
    assert status == 0, output
    assert git(applied(repo, out, tmp_path), "write-tree").decode().strip() == tree
    moved = (
        b"diff --git a/README.md b/golden/r.md\nsimilarity index 100%\nrename from README.md\nrename to golden/r.md\n"
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
    patch = "diff --git a/golden/d b/golden/d\nnew file mode 040000\nindex 0000000..e69de29\n"
    # What it does: git applies it, and the index holds an entry that git's own listings then skip.
    clone = applied(repo, patch.encode(), tmp_path)
    assert b"golden/d" not in git(clone, "ls-files", "--stage")
    output = refused(repo, patch, "golden/d")
    # Each of two readings refuses it: git's summary of the patch, and the tree git wrote from that index.
    assert "refused golden/d: the patch gives it mode 040000" in output
    assert "refused golden/d: named by the patch, but no file there changed" in output


def test_a_symbolic_link_is_refused(repo, tmp_path):
    patch, _ = staged_patch(repo, lambda root: (root / "golden/fam/link").symlink_to("../../.github"))
    assert b"new file mode 120000" in patch
    assert (applied(repo, patch, tmp_path) / "golden/fam/link").is_symlink(), "git makes the link"
    output = refused(repo, patch, "golden/fam/link")
    assert "refused golden/fam/link created (000000 -> 120000): not a regular file" in output


def test_a_submodule_is_refused(repo):
    patch = (
        "diff --git a/golden/sub b/golden/sub\nnew file mode 160000\nindex 0000000..1234567\n--- /dev/null\n"
        "+++ b/golden/sub\n@@ -0,0 +1 @@\n+Subproject commit 1234567890123456789012345678901234567890\n"
    )
    output = refused(repo, patch, "golden/sub")
    assert "refused golden/sub created (000000 -> 160000): not a regular file" in output


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
