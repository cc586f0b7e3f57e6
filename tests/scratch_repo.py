"""A scratch repository that adopts the harness: its own package of families, not named `kernels` and not at
its root (`src/acme/ops/`), holding three of TileLang's examples as this project registers them, and its
settings in its own `pyproject.toml`.

    python tests/scratch_repo.py DIR    # builds one at DIR (the GPU machine runs `nox -s gpu`'s script there)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Self-contained families (they import nothing of `kernels`), as TileLang's examples write them.
FAMILIES = ("softmax", "layer_norm", "hadamard")
PACKAGE = "acme.ops"
SOURCES = "src"  # the package's folder is on the path as an installed project's would be
PROJECT = """[project]
name = "acme"
version = "0.1.0"
"""
GOLDEN = "tests/golden"
SETTINGS = f"""
[tool.tilelang-golden]
families = ["{PACKAGE}"]
golden = "{GOLDEN}"
"""


def make_scratch_repo(root: Path, settings: bool = True) -> Path:
    """The scratch repository at `root`: pyproject.toml (with the harness's settings, or without them for `init` to
    add) and src/acme/ops/ with FAMILIES; its source folder."""
    package = root / SOURCES / PACKAGE.replace(".", "/")
    package.mkdir(parents=True)
    for folder in (package.parent, package):
        (folder / "__init__.py").write_text("")
    for name in FAMILIES:
        shutil.copyfile(REPO / "kernels" / f"{name}.py", package / f"{name}.py")
    (root / "pyproject.toml").write_text(PROJECT + (SETTINGS if settings else ""))
    return root / SOURCES


def build_harness_wheel(folder: Path, python: Path = Path(sys.executable)) -> Path:
    """The harness's wheel, built from a copy of the project under `folder` (the build leaves nothing in the
    checkout), offline, with the setuptools of `python`; the wheel's path."""
    source = folder / "source"
    for name in ("src/tilelang_golden", ".github", "deploy/arc"):  # what init_files/ links to
        shutil.copytree(REPO / name, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    for path in [REPO / "pyproject.toml", REPO / "noxfile.py", *REPO.glob("requirements*.in")]:
        shutil.copy(path, source)
    shutil.copytree(REPO / "kernels", source / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    command = [str(python), "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
               "--wheel-dir", str(folder / "dist"), str(source)]  # fmt: skip
    built = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if built.returncode != 0:
        raise RuntimeError(f"the harness's wheel did not build:\n{built.stdout}{built.stderr}")
    (wheel,) = (folder / "dist").glob("tilelang_golden-*.whl")
    return wheel


if __name__ == "__main__":
    print(make_scratch_repo(Path(sys.argv[1])))
