"""A scratch repository that adopts the harness: its own package of families, not named `kernels` and not at
its root (`src/acme/ops/`), holding three of TileLang's examples as this project registers them, and its
settings in its own `pyproject.toml`.

    python tests/scratch_repo.py DIR    # builds one at DIR (the GPU machine runs `nox -s gpu`'s script there)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Self-contained families (they import nothing of `kernels`), as TileLang's examples write them.
FAMILIES = ("softmax", "layer_norm", "hadamard")
PACKAGE = "acme.ops"
SOURCES = "src"  # the package's folder is on the path as an installed project's would be
PYPROJECT = f"""[project]
name = "acme"
version = "0.1.0"

[tool.tilelang-golden]
families = ["{PACKAGE}"]
golden = "tests/golden"
"""


def make_scratch_repo(root: Path) -> Path:
    """The scratch repository at `root`: pyproject.toml and src/acme/ops/ with FAMILIES; its source folder."""
    package = root / SOURCES / PACKAGE.replace(".", "/")
    package.mkdir(parents=True)
    for folder in (package.parent, package):
        (folder / "__init__.py").write_text("")
    for name in FAMILIES:
        shutil.copyfile(REPO / "kernels" / f"{name}.py", package / f"{name}.py")
    (root / "pyproject.toml").write_text(PYPROJECT)
    return root / SOURCES


if __name__ == "__main__":
    print(make_scratch_repo(Path(sys.argv[1])))
