"""The harness's layers: only modules that lower or compile import TileLang, and imports go downward."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import REPO, SUBPROCESS_LIMIT_S

HARNESS = REPO / "scripts" / "harness"
# Modules that walk TVM IR, and those that lower and extract: only ever used to lower.
READS_IR = {
    "harness.static.facts",
    "harness.static.produce",
    "harness.static.session",  # what a run builds, traces and lowers: it holds the producing modules
    "harness.static.upgrade_preview",
    "harness.static.session_items",  # the static session's pytest items: they lower
}
# Which layers each layer may import from (besides itself and the standard library).
ALLOWED = {
    "harness": set(),
    # the `tilelang-golden` command (and `python -m harness`): above both halves, it runs them
    "harness.cli": {"harness.static", "harness.gpu", "harness.upgrade_command", "harness.init", "harness.config"},
    # `tilelang-golden upgrade-preview`: the static half's preview, then both TileLangs on the GPU
    "harness.upgrade_command": {"harness.config", "harness.family", "harness.static", "harness.gpu"},
    "harness.init": {"harness.config"},  # `tilelang-golden init`: writes the shipped files, adds the settings
    "harness.__main__": {"harness.cli"},
    "harness.files": set(),  # below both halves: atomic writes
    "harness.environment": set(),  # below both halves: CI or not
    "harness.github": set(),  # below both halves: workflow commands and the step summary, escaped and capped
    "harness.targets": set(),  # a project setting both halves read
    "harness.config": {"harness.targets"},  # a repository's settings ([tool.tilelang-golden]), read by both halves
    "harness.family": {"harness.targets", "harness.config"},  # the targets a family narrows to; default packages
    "harness.analysis": set(),  # what families' checks compute: with harness.family, all they may import
    "harness.dtypes": set(),  # below both halves: element types by TVM's and torch's names
    # a chain of jit kernels traced on the meta device: what build makes of a Chain
    "harness.chain": {"harness.dtypes"},
    "harness.build": {"harness.family", "harness.chain", "harness.dtypes"},
    # a family's callables against the kernel's signature: checked by both halves
    "harness.declaration": {"harness.family", "harness.build", "harness.dtypes"},
    "harness.static": {
        "harness.config",
        "harness.family",
        "harness.analysis",
        "harness.build",
        "harness.chain",
        "harness.declaration",
        "harness.targets",
        "harness.files",
        "harness.environment",
        "harness.github",
    },
    "harness.gpu": {
        "harness.config",
        "harness.family",
        "harness.build",
        "harness.dtypes",
        "harness.declaration",
        "harness.static",
        "harness.github",
        "harness.targets",
        "harness.files",
        "harness.environment",
    },
}


def modules() -> list[str]:
    """The harness's modules; not the files `init` ships (init_files/noxfile.py is a repository's noxfile)."""
    found = []
    for path in sorted(p for p in HARNESS.rglob("*.py") if "init_files" not in p.parts):
        parts = path.relative_to(HARNESS.parent).with_suffix("").parts
        found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def layer(module: str) -> str:
    return next(name for name in sorted(ALLOWED, key=len, reverse=True) if module.startswith(name))


def imported(module: str) -> set[str]:
    path = HARNESS.parent / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.split(".")[0] in ("harness", "kernels")}


def test_every_layer_imports_only_downward():
    wrong = []
    for module in modules():
        own = layer(module)
        for name in imported(module):
            if not name.startswith(own) and not any(name.startswith(allowed) for allowed in ALLOWED[own]):
                wrong.append(f"{module} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_tilelang_or_tvm_unless_it_lowers_or_compiles():
    """Import every harness module with TileLang and TVM made unimportable; only IR readers may fail."""
    check = f"""
import importlib, sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tilelang", "tvm", "tvm_ffi"):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, Hide())
failed = []
for module in {sorted(set(modules()) - READS_IR)!r}:
    try:
        importlib.import_module(module)
    except ImportError as error:
        failed.append(f"{{module}}: {{error}}")
print("\\n".join(failed))
"""
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=SUBPROCESS_LIMIT_S)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", "these import TileLang or TVM at import time:\n" + result.stdout


# The command lines that serve every family: every script but the two that belong to their seeds.
SEED_SCRIPTS = {"lower_num_stages.py", "schedule_as_annotation.py"}
GENERIC_SCRIPTS = sorted(path for path in (REPO / "scripts").glob("*.py") if path.name not in SEED_SCRIPTS)


def test_the_harness_names_no_family():
    """The harness and its generic scripts know no family: no registered family's name, and none of
    the seeds' own words."""
    from harness.family import load_families

    words = {f.name for f in load_families().families} | {"block_M", "A_s", "matmul_relu"}
    mentions = [
        f"{path.relative_to(REPO)}: {word}"
        for path in [*sorted(HARNESS.rglob("*.py")), *GENERIC_SCRIPTS]
        for word in sorted(words)
        if word in path.read_text()
    ]
    assert not mentions, "\n".join(mentions)


# What a family file may import of the harness: what it declares, and what its checks may compute.
FAMILY_API = {"harness.family", "harness.analysis"}


def test_families_import_only_the_public_family_api():
    """kernels/*.py use harness.family and harness.analysis only (and no TVM internals), so the harness
    can change behind them."""
    wrong = []
    for path in sorted((REPO / "kernels").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module]
                if isinstance(node, ast.ImportFrom) and node.module
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                root = name.split(".")[0]
                if (root == "harness" and name not in FAMILY_API) or root in ("tvm", "tvm_ffi"):
                    wrong.append(f"kernels/{path.name} imports {name}")
    assert not wrong, "\n".join(wrong) + f"\na family may import {sorted(FAMILY_API)} of the harness, and no TVM"
