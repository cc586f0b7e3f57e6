"""A repository that adopts the harness, run by act: its own package of families (src/acme/ops/), the files
`tilelang-golden init` wrote, and the harness installed from its wheel. In the order a team meets them: main green,
a pull request changing one token red with the verdict, the regen workflow's patch of its snapshot folder, and
the pull request green once the patch is committed."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from act import NOT_A_RUNNERS, REPO, REPOSITORY, World, git
from stand_in import link_or_copy
from test_regen import GREEN, REGEN_JOB, dispatch

from tests.scratch_repo import GOLDEN, PACKAGE, build_harness_wheel, make_scratch_repo

GOLDEN_JOBS = ["golden snapshots (shard 1)", "golden snapshots (shard 2)"]
STATIC_PYTHON = REPO / ".nox" / "static" / "bin" / "python"  # has the harness (editable) and TileLang
# One token of the softmax kernel, as a kernel author would change it.
KERNEL_CHANGE = {"src/acme/ops/softmax.py": ("x[i, j] / row_sum[i]", "x[i, j] * row_sum[i]")}


def run_here(command: list[str], cwd: Path) -> None:
    """A command as the team runs it on its own machine: not under CI (a regen refuses there)."""
    environ = {name: value for name, value in os.environ.items() if not NOT_A_RUNNERS.match(name) and name != "CI"}
    done = subprocess.run(command, cwd=cwd, env=environ, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{command}:\n{done.stdout}{done.stderr}"


def adopting_repository(wheel: Path):
    def fill(repo: Path) -> None:
        make_scratch_repo(repo, settings=False)
        harness = f"tilelang-golden @ {wheel.as_uri()}#sha256={hashlib.sha256(wheel.read_bytes()).hexdigest()}"
        run_here([str(STATIC_PYTHON), "-m", "tilelang_golden", "init", "--families", PACKAGE, "--golden", GOLDEN,
                  "--harness", harness], repo)  # fmt: skip
        with (repo / "pyproject.toml").open("a") as settings:
            settings.write('targets = ["sm_90", "gfx942"]\n')  # two targets keep the jobs short
        # Stand-ins for `nox -s lock`, which needs the network: this repository's locks, made from the same
        # requirements*.in (its requirements.in only adds a test package), so the seeded venvs match their keys.
        for lock in ("requirements.txt", "requirements-nox.txt"):
            shutil.copy(REPO / lock, repo / lock)
        (repo / "tests").mkdir(exist_ok=True)
        (repo / "tests" / "test_ops.py").write_text("def test_the_ops_package_imports():\n    import acme.ops\n")
        # The first snapshots, as the team makes them: `nox -s regen-golden`, in a venv brought up to date from this
        # checkout's static one (linked, as the stand-in cache restores it).
        shutil.copytree(REPO / ".nox" / "static", repo / ".nox" / "static", copy_function=link_or_copy, symlinks=True)
        run_here([sys.executable, "-m", "nox", "-s", "regen-golden"], repo)
        for made in (".nox", "build"):  # the jobs start from a clean checkout and the stand-in cache
            shutil.rmtree(repo / made, ignore_errors=True)

    return fill


@pytest.fixture(scope="module")
def adopter(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("adopter")
    wheel = build_harness_wheel(root / "wheel", STATIC_PYTHON)
    world = World(root, Path(sys.executable), adopting_repository(wheel))
    world.seed_venvs(["static", "tests"])
    return world


def push_to_main(world: World) -> tuple[int, object]:
    world.on_main()
    event = {"ref": "refs/heads/main", "after": world.sha("main"), "repository": {"full_name": REPOSITORY}}
    return world.run("static.yml", "push", event)


def pull_request_run(world: World, number: int):
    pull = world.github()["pulls"][str(number)]
    event = {"action": "synchronize", "number": number, "pull_request": {**pull, "base": {"ref": "main"}},
             "repository": {"full_name": REPOSITORY}}  # fmt: skip
    return world.run("static.yml", "pull_request", event)


def test_init_wrote_the_repositorys_files_and_regen_its_snapshots(adopter: World):
    files = git(adopter.repo, "ls-files").splitlines()
    assert {".github/workflows/static.yml", "noxfile.py", "requirements.in", "deploy/arc/image/serve"} <= set(files)
    # <golden>/<family>/<variant>/<target>.<kind>: every case on the two targets of the setting, no other.
    cases = [Path(name) for name in files if name.startswith(f"{GOLDEN}/") and name.count("/") == GOLDEN.count("/") + 3]
    assert {path.parts[-3] for path in cases} == {"softmax", "layer_norm", "hadamard"}, cases
    assert {path.name.split(".")[0] for path in cases} == {"sm_90", "gfx942"}, "the targets setting"


def test_main_is_green(adopter: World):
    _, run = push_to_main(adopter)
    assert run.jobs() == {"shard count": "success", **dict.fromkeys(GOLDEN_JOBS, "success"),
                          "orphan snapshots": "success", "golden snapshots (all shards)": "success",
                          "harness tests": "success"}, run.jobs()  # fmt: skip


def test_a_one_token_change_is_red_and_the_regen_patch_turns_it_green(adopter: World):
    adopter.pull_request(1, KERNEL_CHANGE)
    _, red = pull_request_run(adopter, 1)
    failed = [job for job in GOLDEN_JOBS if red.jobs()[job] == "failure"]
    assert failed and red.jobs()["orphan snapshots"] == "success", red.jobs()
    summary = "".join(red.summary(job) for job in failed)
    assert f"{GOLDEN}/softmax/" in summary and "nox -s regen-golden -- -k" in summary, summary

    regen_id, regen = dispatch(adopter, "softmax", 1)  # on gpu-dispatch, for the pull request's head
    assert regen.jobs() == GREEN, regen.output(REGEN_JOB)
    patch = adopter.artifact(regen_id, "golden-regen") / "golden.patch"
    git(adopter.repo, "checkout", "--quiet", "pr-1")
    git(adopter.repo, "apply", "--index", str(patch))
    touched = git(adopter.repo, "diff", "--cached", "--name-only").splitlines()
    assert touched and all(name.startswith(f"{GOLDEN}/softmax/") for name in touched), touched
    git(adopter.repo, "commit", "--quiet", "-m", "Regenerated snapshots of softmax")
    adopter.merge(1)
    _, green = pull_request_run(adopter, 1)
    assert all(green.jobs()[job] == "success" for job in GOLDEN_JOBS), green.jobs()
