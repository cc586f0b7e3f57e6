"""The harness in a repository that adopts it: settings in its pyproject.toml ([tool.tilelang-golden]), its own
package of families outside the root (src/acme/ops/), and the static check's life cycle there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO, SUBPROCESS_LIMIT_S
from scratch_repo import FAMILIES, make_scratch_repo

from harness.config import Config, ConfigError, read_config
from harness.static.results import RESULTS

# `tilelang-golden static` (what `nox -s static` runs), in one process (-n 0) on one target, to stay short.
STATIC = ["-m", "harness", "static", "-p", "no:cacheprovider", "--no-cache", "-n", "0", "-k", "sm_90"]


def test_a_repository_without_settings_has_this_projects_layout(tmp_path):
    assert read_config(tmp_path) == Config()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert read_config(tmp_path) == Config(("kernels",), Path("golden"), Path("golden/timing"))


def test_settings_are_read_and_the_timing_folder_follows_the_golden_one(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tilelang-golden]\nfamilies = ["acme.ops", "acme.moe"]\ngolden = "t/g"\n'
    )
    assert read_config(tmp_path) == Config(("acme.ops", "acme.moe"), Path("t/g"), Path("t/g/timing"))


@pytest.mark.parametrize(
    "section, problem",
    [
        ('familys = ["a"]', "unknown keys ['familys']; the settings are families, golden and timing"),
        ('families = "acme.ops"', "families must be a non-empty list of importable package names"),
        ('families = ["src/acme/ops"]', "families must be a non-empty list of importable package names"),
        ('golden = "/abs/golden"', "golden must be a folder inside the repository"),
        ('timing = "../timing"', "timing must be a folder inside the repository"),
    ],
)
def test_unusable_settings_are_refused_naming_the_file_and_the_key(tmp_path, section, problem):
    (tmp_path / "pyproject.toml").write_text(f"[tool.tilelang-golden]\n{section}\n")
    with pytest.raises(ConfigError, match="pyproject.toml \\[tool.tilelang-golden\\]") as refused:
        read_config(tmp_path)
    assert problem in str(refused.value)


def static(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`tilelang-golden static` in the adopting repository: its root the working directory, its package
    importable as an installed project's is."""
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "TL_LOWER_TRACE")}
    environ["PYTHONPATH"] = os.pathsep.join([str(root / "src"), environ.get("PYTHONPATH", "")])
    command = [sys.executable, *STATIC, *args]
    return subprocess.run(command, cwd=root, env=environ, capture_output=True, text=True, timeout=SUBPROCESS_LIMIT_S)


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


def test_the_command_names_its_commands_and_refuses_another():
    from harness.cli import COMMANDS, main

    assert set(COMMANDS) == {"static", "regen", "gpu", "summary"}
    result = subprocess.run([sys.executable, "-m", "harness", "stat"], capture_output=True, text=True, timeout=60)
    assert (
        result.returncode == 2
        and "unknown command 'stat'" in result.stderr
        and "tilelang-golden static" in (result.stderr)
    )
    with pytest.raises(SystemExit) as helped:
        main(["gpu", "--help"])
    assert helped.value.code == 0


def test_the_harness_builds_as_a_wheel_with_its_command(tmp_path):
    """What a repository installs from a git URL: the package and its `tilelang-golden` console script. Built from
    a copy of the project, so the build leaves nothing in the checkout."""
    source = tmp_path / "source"
    shutil.copytree(
        REPO / "scripts" / "harness", source / "scripts" / "harness", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(REPO / "kernels", source / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", source)
    command = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        str(tmp_path / "dist"),
        str(source),
    ]
    built = subprocess.run(command, capture_output=True, text=True, timeout=SUBPROCESS_LIMIT_S)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("tilelang_golden-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("harness/cli.py", "harness/config.py", "harness/static/results.py", "harness/static/kinds.py",
                   "harness/gpu/command.py", "harness/static/session_items.py"):  # fmt: skip
        assert module in names, f"{module} is not in {wheel.name}"
    (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    assert "tilelang-golden = harness.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
