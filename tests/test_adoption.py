"""The harness in a repository that adopts it: settings in its pyproject.toml ([tool.tilelang-golden]), its own
package of families outside the root (src/acme/ops/), and the static check's life cycle there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, SUBPROCESS_LIMIT_S, collected_cases
from scratch_repo import FAMILIES, GOLDEN, PACKAGE, build_harness_wheel, make_scratch_repo

from tilelang_golden import init
from tilelang_golden.config import Config, ConfigError, read_config
from tilelang_golden.static.snapshots.results import RESULTS

INIT_FILES = REPO / "src" / "tilelang_golden" / "init_files"
# `tilelang-golden static` (what `nox -s static` runs), in one process (-n 0) on one target, to stay short, with the
# scratch repository's own lowering cache as a user's runs have it: a regen fills it, the static runs after it read it.
STATIC = ["-m", "tilelang_golden", "static", "-p", "no:cacheprovider", "-n", "0", "-k", "sm_90"]


def test_a_repository_without_settings_has_this_projects_layout(tmp_path):
    assert read_config(tmp_path) == Config()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert read_config(tmp_path) == Config(("kernels",), Path("golden"), Path("golden/timing"))


def test_the_targets_setting_narrows_every_family_to_those_targets(tmp_path):
    root = tmp_path / "acme"
    make_scratch_repo(root)
    with (root / "pyproject.toml").open("a") as settings:
        settings.write('targets = ["gfx942", "sm_90"]\n')
    collected = static(root, "--collect-only", "-q", "-k", "not no_orphans")
    checks = collected_cases(collected.stdout.splitlines(), f"{GOLDEN}/")
    assert checks and {line.split("/")[-1] for line in checks} == {"sm_90", "gfx942"}, collected.stdout


def test_settings_are_read_and_the_timing_folder_follows_the_golden_one(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tilelang-golden]\nfamilies = ["acme.ops", "acme.moe"]\ngolden = "t/g"\n'
    )
    assert read_config(tmp_path) == Config(("acme.ops", "acme.moe"), Path("t/g"), Path("t/g/timing"))


@pytest.mark.parametrize(
    "section, problem",
    [
        (
            'familys = ["a"]',
            "unknown keys ['familys']; the settings are families, golden, timing, targets, harness, projects, shards",
        ),
        ('families = "acme.ops"', "families must be a non-empty list of importable package names"),
        ('families = ["src/acme/ops"]', "families must be a non-empty list of importable package names"),
        ('golden = "/abs/golden"', "golden must be a folder inside the repository"),
        ('timing = "../timing"', "timing must be a folder inside the repository"),
        ('targets = ["sm_90", "sm_91"]', "targets must be a non-empty list of some of ['sm_80'"),
        ("harness = 1", "harness must be a pip requirement"),
        ('golden = ".github"', "golden must be a folder of its own, not the root, .git/ or .github/"),
        ('golden = ".github/golden"', "golden must be a folder of its own"),
        ('timing = "."', "timing must be a folder of its own"),
        ('projects = "kernels"', "projects must be a non-empty list of folders"),
        ('projects = ["../elsewhere"]', "projects must be a folder inside the repository"),
        ("shards = 0", "shards must be a whole number, 1 or more (shards = 2), got 0"),
        ("shards = true", "shards must be a whole number, 1 or more (shards = 2), got True"),
    ],
)
def test_unusable_settings_are_refused_naming_the_file_and_the_key(tmp_path, section, problem):
    (tmp_path / "pyproject.toml").write_text(f"[tool.tilelang-golden]\n{section}\n")
    with pytest.raises(ConfigError, match="pyproject.toml \\[tool.tilelang-golden\\]") as refused:
        read_config(tmp_path)
    assert problem in str(refused.value)


def adopting_environment(root: Path) -> dict[str, str]:
    """The adopting repository's package importable as an installed project's is; not under CI."""
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "TL_LOWER_TRACE")}
    environ["PYTHONPATH"] = os.pathsep.join([str(root / "src"), environ.get("PYTHONPATH", "")])
    return environ


def static(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`tilelang-golden static` in the adopting repository, its root the working directory."""
    command = [sys.executable, *STATIC, *args]
    return subprocess.run(command, cwd=root, env=adopting_environment(root), capture_output=True, text=True,
                          timeout=SUBPROCESS_LIMIT_S)  # fmt: skip


def test_the_static_check_runs_in_an_adopting_repository_green_red_green(tmp_path):
    root = tmp_path / "acme"
    make_scratch_repo(root)
    first = static(root, "--regen")
    assert first.returncode == 0, first.stdout + first.stderr
    written = sorted(p.relative_to(root).as_posix() for p in (root / "tests" / "golden").rglob("*.cu"))
    assert written and {path.split("/")[2] for path in written} == set(FAMILIES), written
    assert all(path.endswith("/sm_90.cu") for path in written), "only the selected target"
    assert static(root).returncode == 0, "green on what it wrote"

    family = root / "src" / "acme" / "ops" / "softmax.py"
    family.write_text(family.read_text().replace("x[i, j] / row_sum[i]", "x[i, j] * row_sum[i]", 1))
    red = static(root)
    assert red.returncode == 1, red.stdout + red.stderr
    assert "what changed: 2 changes in 2 failing checks" in red.stdout or "what changed: 1 change in" in red.stdout, (
        red.stdout
    )
    # Every path is the adopting repository's: its snapshot folder, its family file, its pending folder.
    assert "tests/golden/softmax/threads256/sm_90.cu: CUDA changed" in red.stdout, red.stdout
    assert 'nox -s regen-golden -- -k "softmax and sm_90"' in red.stdout
    full = "diff -u tests/golden/softmax/threads256/sm_90.cu build/golden-pending/softmax/threads256/sm_90.cu"
    assert full in red.stdout, "the full diff's command names both files as they are in the repository"
    assert "produced files are in build/golden-pending/" in red.stdout
    results = [json.loads(line) for line in (root / "build" / "golden-pending" / RESULTS).read_text().splitlines()]
    failed = {r["check"] for r in results if r["status"] == "failed"}
    assert failed == {"softmax/threads256/sm_90", "softmax/threads512/sm_90"}, failed

    again = static(root, "--regen", "-k", "softmax")
    assert again.returncode == 0, again.stdout + again.stderr
    assert static(root).returncode == 0, "green after the regen"

    (family.parent / "moe.py").write_text("import no_such_module\n")
    broken = static(root, "-k", "moe")
    assert broken.returncode == 1 and "src/acme/ops/moe.py: importing it raised ModuleNotFoundError" in broken.stdout
    (family.parent / "moe.py").unlink()

    # What `nox -s upgrade-preview` runs there once it has installed the other TileLang: here the same one, so
    # every case of the repository's own families, from its snapshot folder, is identical.
    with (root / "pyproject.toml").open("a") as settings:
        settings.write('targets = ["sm_90"]\n')  # the targets setting: the preview lowers what the check lowers
    command = [sys.executable, "-m", "tilelang_golden", "upgrade-preview", "--output", "build/preview"]
    preview = subprocess.run(command, cwd=root, env=adopting_environment(root), capture_output=True, text=True,
                             timeout=SUBPROCESS_LIMIT_S)  # fmt: skip
    assert preview.returncode == 0, preview.stdout + preview.stderr
    rows = json.loads((root / "build" / "preview" / "report.json").read_text())["cases"]
    assert sorted(row["case"] for row in rows) == sorted(
        p.removeprefix("tests/golden/").removesuffix(".cu") for p in written
    )
    assert {row["status"] for row in rows} == {"identical"}, rows


def test_the_command_names_its_commands_and_refuses_another():
    from tilelang_golden.cli import COMMANDS, main

    commands = {"static", "regen", "gpu", "history", "upgrade-preview", "summary", "costs", "config", "init"}
    assert set(COMMANDS) == commands
    result = subprocess.run(
        [sys.executable, "-m", "tilelang_golden", "stat"], capture_output=True, text=True, timeout=60
    )
    assert (
        result.returncode == 2
        and "unknown command 'stat'" in result.stderr
        and "tilelang-golden static" in (result.stderr)
    )
    with pytest.raises(SystemExit) as helped:
        main(["gpu", "--help"])
    assert helped.value.code == 0


def test_the_harness_builds_as_a_wheel_with_its_command_and_what_init_writes(tmp_path):
    """What a repository installs from a git URL: the package, its `tilelang-golden` console script and the files
    `init` writes (their content, where the package links to this repository's own), and none of this repository's
    families. Built from a copy of the project, so the build leaves nothing in the checkout."""
    wheel = build_harness_wheel(tmp_path)
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    for module in ("cli.py", "config.py", "init.py", "static/snapshots/results.py", "gpu/command.py",
                   "upgrade/timing_worker.py", "upgrade/command.py", "family/__init__.py"):  # fmt: skip
        module = f"tilelang_golden/{module}"
        assert module in names, f"{module} is not in {wheel.name}"
    assert not [name for name in names if name.startswith("kernels/")], "this repository's families stay out"
    for name, shipped in init.shipped().items():
        packaged = archive.read(f"tilelang_golden/init_files/{shipped_path(shipped)}")
        assert packaged == shipped.read_bytes(), f"{name}: the wheel holds other content than init writes"
    (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    assert "tilelang-golden = tilelang_golden.cli:main" in archive.read(entry_points).decode()
    (metadata,) = [name for name in names if name.endswith(".dist-info/METADATA")]
    assert "Requires-Dist: tilelang" in archive.read(metadata).decode(), "a plain pip install gets what it imports"


def shipped_path(file: Any) -> str:
    return Path(str(file)).relative_to(INIT_FILES).as_posix()


def init_in(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tilelang_golden", "init", *args], cwd=root, capture_output=True,
                          text=True, timeout=SUBPROCESS_LIMIT_S)  # fmt: skip


HARNESS = f"tilelang-golden @ https://example.invalid/tilelang_golden-0.1.0-py3-none-any.whl#sha256={'0' * 64}"


def test_init_writes_what_a_repository_needs_and_adds_its_settings(tmp_path):
    root = tmp_path / "acme"
    make_scratch_repo(root, settings=False)
    done = init_in(root, "--families", PACKAGE, "--golden", GOLDEN, "--harness", HARNESS)
    assert done.returncode == 0, done.stdout + done.stderr
    expected = {".github/workflows/static.yml", ".github/workflows/regen.yml", ".github/workflows/comment.yml",
                ".github/workflows/gpu.yml", "noxfile.py", "requirements.in", "requirements-common.in",
                "requirements-gpu.in", "requirements-nox.in", ".gitignore", "deploy/arc/image/serve",
                "deploy/arc/values/base.yaml"}  # fmt: skip
    for name in expected:
        assert (root / name).is_file(), f"init did not write {name}"
        assert f"written  {name}" in done.stdout
    assert os.access(root / "deploy/arc/image/serve", os.X_OK), "the image's entry point stays executable"
    # The workflows are this repository's own, byte for byte: it runs what it ships.
    assert (root / ".github/workflows/static.yml").read_bytes() == (REPO / ".github/workflows/static.yml").read_bytes()
    assert read_config(root) == Config((PACKAGE,), Path(GOLDEN), Path(GOLDEN) / "timing", None, HARNESS)
    assert "nox -s lock" in done.stdout and "nox -s regen-golden" in done.stdout, "it says what to run next"

    again = init_in(root, "--families", PACKAGE)
    assert again.returncode == 0 and "written" not in again.stdout, again.stdout
    assert f"{len(init.shipped())} files are already as init writes them" in again.stdout
    assert (root / "pyproject.toml").read_text().count("[tool.tilelang-golden]") == 1, "the settings once"


def test_init_never_overwrites_and_says_what_to_merge(tmp_path):
    root = tmp_path / "acme"
    make_scratch_repo(root)
    (root / "noxfile.py").write_text("import nox\n")
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github/workflows/static.yml").write_text("name: ours\n")
    done = init_in(root, "--harness", HARNESS)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (root / "noxfile.py").read_text() == "import nox\n", "left as it was"
    assert (root / ".github/workflows/static.yml").read_text() == "name: ours\n"
    assert "2 files exist with other content and were left as they are" in done.stdout
    assert "`git mv noxfile.py noxfile_ours.py && tilelang-golden init`" in done.stdout, "where its sessions go"
    assert "merge by hand with `tilelang-golden init --print .github/workflows/static.yml`" in done.stdout
    assert (root / ".github/workflows/regen.yml").is_file(), "the others are written"
    assert "harness = " in done.stdout, "the settings it found lack the harness: it says what to add"
    shown = init_in(root, "--print", "noxfile.py")
    assert shown.returncode == 0 and shown.stdout == (INIT_FILES / "noxfile.py").read_text()


def test_init_needs_a_project_and_the_family_packages(tmp_path):
    refused = init_in(tmp_path)
    assert refused.returncode == 2 and "no pyproject.toml here" in refused.stderr
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    refused = init_in(tmp_path, "--harness", HARNESS)
    assert refused.returncode == 2 and "--families acme.ops" in refused.stderr
    assert not (tmp_path / "noxfile.py").exists(), "nothing written before the settings are known"


def test_this_repository_is_configured_as_init_writes_it():
    """Its workflows, locks' inputs, runner set-up and noxfile are what init ships (the package links to them), its own
    sessions are in a noxfile_*.py, and its requirements.in is the shipped one plus its own test packages."""
    for name, shipped in init.shipped().items():
        if Path(str(shipped)).is_symlink():
            assert Path(str(shipped)).resolve() == (REPO / name).resolve(), f"{name}: links elsewhere"
    assert (REPO / "requirements.in").read_text().startswith((INIT_FILES / "requirements.in").read_text())
    assert (INIT_FILES / "noxfile.py").resolve() == REPO / "noxfile.py", "its noxfile is the shipped one"
    assert (REPO / "noxfile_harness.py").is_file(), "its own sessions beside it, as an adopting repository's"
    gitignore = (REPO / ".gitignore").read_text().splitlines()
    assert set(line for line in (INIT_FILES / "gitignore").read_text().splitlines() if not line.startswith("#")) <= set(
        gitignore
    )


def test_config_prints_one_setting_for_a_workflow(tmp_path):
    root = tmp_path / "acme"
    make_scratch_repo(root)
    shown = subprocess.run([sys.executable, "-m", "tilelang_golden", "config", "golden"], cwd=root, capture_output=True,
                           text=True, timeout=SUBPROCESS_LIMIT_S)  # fmt: skip
    assert shown.returncode == 0 and shown.stdout == f"{GOLDEN}\n"
    unknown = subprocess.run([sys.executable, "-m", "tilelang_golden", "config", "gold"], cwd=root, capture_output=True,
                             text=True, timeout=SUBPROCESS_LIMIT_S)  # fmt: skip
    assert unknown.returncode == 2 and "families, golden, timing, targets, harness, projects, shards" in unknown.stderr


# --- the harness the sessions install: pinned by content, or refused ------------------------------------------

COMMIT = "4f1c2e9a0b7d3c5e8f6a1b2c3d4e5f60718293a4"
SHA256 = "9" * 64
WHEEL_URL = "https://example.invalid/tilelang_golden-0.1.0-py3-none-any.whl"
# A fragment other than one sha256: pip checks only a fragment's first hash.
BAD_FRAGMENT = "is not exactly one sha256= of 64 lowercase hex digits"
REPOSITORY_URL = "https://github.com/ORG/tilelang-golden"


class InstalledHarness:
    """importlib.metadata's view of the harness as pip installed it: PEP 610's direct_url.json (None: from an
    index, which leaves none)."""

    version = "0.1.0"

    def __init__(self, direct_url: dict[str, Any] | None) -> None:
        self.direct_url = direct_url

    def read_text(self, name: str) -> str | None:
        assert name == "direct_url.json"
        return None if self.direct_url is None else json.dumps(self.direct_url)


@pytest.mark.parametrize(
    "direct_url, requirement",
    [
        # pip install "tilelang-golden @ git+https://...@main": the commit it checked out, not the branch
        ({"url": REPOSITORY_URL, "vcs_info": {"vcs": "git", "requested_revision": "main", "commit_id": COMMIT}},
         f"tilelang-golden @ git+{REPOSITORY_URL}@{COMMIT}"),
        ({"url": REPOSITORY_URL, "vcs_info": {"vcs": "git", "commit_id": COMMIT}, "subdirectory": "harness"},
         f"tilelang-golden @ git+{REPOSITORY_URL}@{COMMIT}#subdirectory=harness"),
        ({"url": WHEEL_URL, "archive_info": {"hashes": {"sha256": SHA256, "md5": "1" * 32}}},
         f"tilelang-golden @ {WHEEL_URL}#sha256={SHA256}"),
        ({"url": WHEEL_URL, "archive_info": {"hash": f"sha256={SHA256}"}},  # the field's older form
         f"tilelang-golden @ {WHEEL_URL}#sha256={SHA256}"),
    ],
)  # fmt: skip
def test_init_names_the_installed_harness_by_its_commit_or_hash(monkeypatch, direct_url, requirement):
    monkeypatch.setattr(init.metadata, "distribution", lambda name: InstalledHarness(direct_url))
    assert init.harness_requirement(None) == requirement


@pytest.mark.parametrize(
    "direct_url, reason",
    [
        (None, "pip would take it from a package index, where nobody has registered tilelang-golden"),
        ({"url": WHEEL_URL, "archive_info": {}}, "an archive's URL without #sha256="),
        ({"url": WHEEL_URL, "archive_info": {"hash": f"md5={'1' * 32}"}}, "an archive's URL without #sha256="),
        ({"url": "file:///home/dev/tilelang-golden", "dir_info": {"editable": True}}, "a local folder"),
        ({"url": "file:///home/dev/tilelang-golden", "dir_info": {}}, "a local folder"),
        ({"url": "svn://example.invalid/harness", "vcs_info": {"vcs": "svn", "commit_id": "1234"}},
         "a VCS URL not at a full 40-hex commit"),
    ],
)  # fmt: skip
def test_init_refuses_a_harness_installed_from_where_nothing_pins_it(monkeypatch, direct_url, reason):
    monkeypatch.setattr(init.metadata, "distribution", lambda name: InstalledHarness(direct_url))
    with pytest.raises(ConfigError) as refused:
        init.harness_requirement(None)
    message = str(refused.value)
    assert message.startswith("the harness as installed here: ") and reason in message, message
    assert "a git URL at a full 40-hex commit" in message and "#sha256=" in message, "it says what to pass instead"
    assert message.endswith("; pass that with --harness")


def run_init(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`tilelang-golden init ARGS` in `root`, in this process: exit status, stdout, stderr."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        try:
            status = init.main(list(args))
        except SystemExit as stopped:  # argparse's refusal
            status = stopped.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(
    "given, reason",
    [
        ("tilelang-golden==0.1.0", "from a package index"),
        ("tilelang-golden", "from a package index"),
        (f"tilelang-golden @ git+{REPOSITORY_URL}@main", "a VCS URL not at a full 40-hex commit"),
        (f"tilelang-golden @ git+{REPOSITORY_URL}@{COMMIT[:12]}", "a VCS URL not at a full 40-hex commit"),
        (f"tilelang-golden @ git+{REPOSITORY_URL}", "a VCS URL not at a full 40-hex commit"),
        (f"tilelang-golden @ {WHEEL_URL}", "an archive's URL without #sha256="),
        (f"tilelang-golden @ {WHEEL_URL}#md5={'1' * 32}", BAD_FRAGMENT),
        # pip checks the md5 alone and installs; the sha256 behind it is never read.
        (f"tilelang-golden @ {WHEEL_URL}#md5={'1' * 32}&sha256={SHA256}", BAD_FRAGMENT),
        (f"tilelang-golden @ {WHEEL_URL}#sha256={SHA256}&sha256={'0' * 64}", BAD_FRAGMENT),
        (f"tilelang-golden @ {WHEEL_URL}#sha256={'AB' * 32}", BAD_FRAGMENT),
        ("tilelang-golden @ file:///home/dev/tilelang-golden", "a local folder"),
    ],
)
def test_init_refuses_an_unpinned_harness_requirement_and_writes_nothing(tmp_path, capsys, given, reason):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    status, out, err = run_init(tmp_path, capsys, "--families", PACKAGE, "--harness", given)
    assert status == 2, out + err
    assert f"--harness {given!r} does not pin the harness: " in err and reason in err, err
    assert f"tilelang-golden @ git+{REPOSITORY_URL}@<40-hex commit>" in err, "it says what to pass instead"
    assert (tmp_path / "pyproject.toml").read_text() == '[project]\nname = "x"\n', "no settings added"
    assert not (tmp_path / "noxfile.py").exists(), "nothing written"


@pytest.mark.parametrize(
    "given", [f"tilelang-golden @ git+{REPOSITORY_URL}@{COMMIT}", f"tilelang-golden @ {WHEEL_URL}#sha256={SHA256}"]
)
def test_init_writes_a_pinned_harness_requirement_as_given(tmp_path, capsys, given):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    status, out, err = run_init(tmp_path, capsys, "--families", PACKAGE, "--harness", given)
    assert status == 0, out + err
    assert read_config(tmp_path).harness == given


def test_init_says_that_a_configured_harness_is_unpinned(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tilelang-golden]\nfamilies = ["acme.ops"]\nharness = "tilelang-golden==0.1.0"\n'
    )
    status, out, err = run_init(tmp_path, capsys)
    assert status == 1, out + err
    assert "pyproject.toml [tool.tilelang-golden] harness: 'tilelang-golden==0.1.0' does not pin the harness" in out
