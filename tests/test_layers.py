"""The harness's layers: only modules that lower or compile import TileLang, and imports go downward."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO, SUBPROCESS_LIMIT_S

HARNESS = REPO / "src" / "tilelang_golden"
# Modules that walk TVM IR, and those that lower and extract: only ever used to lower.
READS_IR = {
    "tilelang_golden.static.produce.facts",
    "tilelang_golden.static.produce.produced",
    "tilelang_golden.static.produce.session",  # what a run builds, traces and lowers: it holds the producing modules
    "tilelang_golden.upgrade.preview",
    "tilelang_golden.static.session_items",  # the static session's pytest items: they lower
}
# Which layers each layer may import from (besides itself and the standard library).
ALLOWED = {
    "tilelang_golden": set(),
    # the `tilelang-golden` command (and `python -m tilelang_golden`): above both halves, it runs them
    "tilelang_golden.cli": {
        "tilelang_golden.static",
        "tilelang_golden.gpu",
        "tilelang_golden.upgrade",
        "tilelang_golden.init",
        "tilelang_golden.config",
    },
    # `tilelang-golden upgrade-preview`: the static half's preview, then both TileLangs on the GPU
    "tilelang_golden.upgrade": {
        "tilelang_golden.config",
        "tilelang_golden.family",
        "tilelang_golden.families",
        "tilelang_golden.static",
        "tilelang_golden.gpu",
        "tilelang_golden.targets",
    },
    "tilelang_golden.init": {
        "tilelang_golden.config"
    },  # `tilelang-golden init`: writes the shipped files, adds the settings
    "tilelang_golden.__main__": {"tilelang_golden.cli"},
    "tilelang_golden.files": set(),  # below both halves: atomic writes
    "tilelang_golden.environment": set(),  # below both halves: CI or not
    "tilelang_golden.github": set(),  # below both halves: workflow commands and the step summary, escaped and capped
    "tilelang_golden.targets": set(),  # a project setting both halves read
    "tilelang_golden.config": {
        "tilelang_golden.targets"
    },  # a repository's settings ([tool.tilelang-golden]), read by both halves
    "tilelang_golden.family": {
        "tilelang_golden.targets",
        "tilelang_golden.config",
    },  # the targets a family narrows to; default packages
    "tilelang_golden.analysis": set(),  # what families' checks compute: with .family, all they may import
    "tilelang_golden.dtypes": set(),  # below both halves: element types by TVM's and torch's names
    # a chain of jit kernels traced on the meta device: what build makes of a Chain
    "tilelang_golden.families.chain": {"tilelang_golden.dtypes"},
    "tilelang_golden.families.build": {
        "tilelang_golden.family",
        "tilelang_golden.families.chain",
        "tilelang_golden.dtypes",
    },
    # a family's callables against the kernel's signature: checked by both halves
    "tilelang_golden.families.declaration": {
        "tilelang_golden.family",
        "tilelang_golden.families.build",
        "tilelang_golden.dtypes",
    },
    "tilelang_golden.static": {
        "tilelang_golden.config",
        "tilelang_golden.family",
        "tilelang_golden.analysis",
        "tilelang_golden.families",
        "tilelang_golden.targets",
        "tilelang_golden.files",
        "tilelang_golden.environment",
        "tilelang_golden.github",
    },
    "tilelang_golden.gpu": {
        "tilelang_golden.config",
        "tilelang_golden.family",
        "tilelang_golden.families",
        "tilelang_golden.dtypes",
        "tilelang_golden.static",
        "tilelang_golden.github",
        "tilelang_golden.targets",
        "tilelang_golden.files",
        "tilelang_golden.environment",
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
    return {n for n in names if n.split(".")[0] in ("tilelang_golden", "kernels")}


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
    from tilelang_golden.family import load_families

    words = {f.name for f in load_families().families} | {"block_M", "A_s", "matmul_relu"}
    mentions = [
        f"{path.relative_to(REPO)}: {word}"
        for path in [*sorted(HARNESS.rglob("*.py")), *GENERIC_SCRIPTS]
        for word in sorted(words)
        if word in path.read_text()
    ]
    assert not mentions, "\n".join(mentions)


# What a family file may import of the harness: what it declares, and what its checks may compute.
FAMILY_API = {"tilelang_golden.family", "tilelang_golden.analysis"}


def test_families_import_only_the_public_family_api():
    """kernels/*.py use tilelang_golden.family and tilelang_golden.analysis only (and no TVM internals), so the harness
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
                if (root == "tilelang_golden" and name not in FAMILY_API) or root in ("tvm", "tvm_ffi"):
                    wrong.append(f"kernels/{path.name} imports {name}")
    assert not wrong, "\n".join(wrong) + f"\na family may import {sorted(FAMILY_API)} of the harness, and no TVM"


def test_no_file_edits_the_module_path():
    """The harness and the families are installed projects; a script or noxfile that puts a folder on sys.path would
    find them another way than an adopting repository does."""
    listed = subprocess.run(["git", "ls-files", "*.py", "noxfile*"], cwd=REPO, capture_output=True, text=True)
    edits = re.compile(r"\bsys\.path\s*(\.(insert|append|extend)\b|\[[^\]]*\]\s*=|=)")
    found = [f"{name}:{number}" for name in listed.stdout.split() for number, line in
             enumerate((REPO / name).read_text().splitlines(), 1) if edits.search(line)]  # fmt: skip
    assert not found, found
