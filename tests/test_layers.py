"""The harness's structure: layers that imports run down, no cycle, small modules and short signatures; only modules
that lower or compile import TileLang."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO, SUBPROCESS_LIMIT_S

HARNESS = REPO / "src" / "tilelang_golden"
PACKAGE = HARNESS.name
# Modules that walk TVM IR, and those that lower and extract: only ever used to lower.
READS_IR = {
    "tilelang_golden.static.produce.facts",
    "tilelang_golden.static.produce.machine_facts",  # it reads the lowering's launches through the facts
    "tilelang_golden.static.produce.produced",
    "tilelang_golden.static.session",  # what a run builds, traces and lowers: it holds the producing modules
    "tilelang_golden.upgrade.preview",
    "tilelang_golden.static.session_items",  # the static session's pytest items: they lower
}
# The package's layers from the ground up, as the path a case takes: a module imports from its own layer and the
# layers below it, never above (imports inside functions and for type checking included). A folder is a layer, the
# modules at its top one layer above its subfolders.
LAYERS = (
    # the ground both halves stand on: targets, element types, files, the environment, GitHub's commands
    {"targets", "dtypes", "files", "environment", "github", "analysis", "regressions", "contradictions"},
    {"config"},  # the repository's settings
    {"regen_patch"},  # a regen's patch judged as data (regen.yml's patch job): the regression classes alone
    {"family"},  # what a family author writes against
    {"catalog"},  # from families to cases: found, the unit of work (case, selection, sharding), built
    # what a snapshot is: its files' names, its normalized text, kinds of change, results, the write policy, the regen
    # command; the GPU side reads the static check through this layer alone
    {"static.snapshots"},
    {"static.produce"},  # lowering, facts, machine facts, the lowering cache
    {"static.report"},  # the verdict and job summary, read from the results
    {"static"},  # kinds, the run's session, the engine, the pytest plugin and its items
    {"gpu.run"},  # the device, the JIT compile, the worker process
    {"gpu.gate"},  # the rules a measurement is held to, and the records they judge
    {"gpu.measure"},  # numerics and timing, filling the gate's records
    {"gpu.report"},  # what a GPU run tells people and machines
    {"history"},  # main's GPU runs over time: records, change points, the site
    {"gpu"},  # the stages of one variant, the check end to end, `tilelang-golden gpu`
    {"upgrade"},  # what another TileLang would change: both halves
    {"init"},  # `tilelang-golden init`
    {"cli", "__main__"},  # the command
)
LINE_LIMIT = 500
PARAMETER_LIMIT = 8


def modules() -> list[str]:
    """The harness's modules; not the files `init` ships (init_files/noxfile.py is a repository's noxfile)."""
    found = []
    for path in sorted(p for p in HARNESS.rglob("*.py") if "init_files" not in p.parts):
        parts = path.relative_to(HARNESS.parent).with_suffix("").parts
        found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def module_path(module: str) -> Path:
    path = HARNESS.parent / Path(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def layer(module: str) -> int:
    """The index of the module's layer in LAYERS: its longest prefix there; the package's own face is the ground."""
    if module == PACKAGE:
        return 0
    name = module.removeprefix(PACKAGE + ".")
    matches = [
        (len(prefix), index)
        for index, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if name == prefix or name.startswith(prefix + ".")
    ]
    assert matches, f"{module} is in no layer: add it to LAYERS in {Path(__file__).name}"
    return max(matches)[1]


def imported(module: str) -> set[str]:
    """Every harness and family module `module` imports, anywhere in it: a `from PACKAGE import name` names the
    module `name` where it is one."""
    known = set(modules())
    names = set()
    for node in ast.walk(ast.parse(module_path(module).read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(
                f"{node.module}.{alias.name}" for alias in node.names if f"{node.module}.{alias.name}" in known
            )
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.split(".")[0] in (PACKAGE, "kernels")}


def test_every_import_runs_down_the_layers():
    up = [
        f"{module} (layer {layer(module)}) imports {name} (layer {layer(name)})"
        for module in modules()
        for name in sorted(imported(module))
        if name.split(".")[0] == PACKAGE and layer(name) > layer(module)
    ]
    families = [f"{module} imports {name}" for module in modules() for name in imported(module) if name[0] == "k"]
    assert not up + families, "\n".join(up + families)


# The GPU side and the history read the static check's snapshots through the snapshot layer only: the names of a case's
# files, the regen command, the snapshots' text and its normalization; never the static session, its kinds or plugin.
STATIC_SHARED = "static.snapshots"


def test_the_gpu_side_reads_only_the_snapshot_layer_of_the_static_check():
    reached = [
        f"{module} imports {name}"
        for module in modules()
        if module.removeprefix(PACKAGE + ".").split(".")[0] in ("gpu", "history")
        for name in sorted(imported(module))
        if name.startswith(f"{PACKAGE}.static") and not name.startswith(f"{PACKAGE}.{STATIC_SHARED}")
    ]
    assert not reached, "\n".join(reached)


def test_no_import_cycle():
    """No module reaches itself through the modules it imports, hidden inside a function or not."""
    nodes = set(modules())
    graph = {module: imported(module) & nodes for module in nodes}
    cycles, state = [], {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for name in sorted(graph[module]):
            if state.get(name) == "open":
                cycles.append(" -> ".join([*path[path.index(name) :], name]))
            elif name not in state:
                visit(name, [*path, name])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "\n".join(cycles)


def test_no_module_is_over_the_line_limit():
    long = {module: n for module in modules() if (n := len(module_path(module).read_text().splitlines())) > LINE_LIMIT}
    assert not long, f"modules over {LINE_LIMIT} lines (split them by responsibility): {long}"


def test_no_public_function_takes_more_than_the_parameter_limit():
    """A public function or method takes at most PARAMETER_LIMIT parameters (self and cls aside): more is a record."""
    wide = []
    for module in modules():
        for node in ast.walk(ast.parse(module_path(module).read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
                arguments = node.args
                names = [a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]]
                count = len([n for n in names if n not in ("self", "cls")])
                if count > PARAMETER_LIMIT:
                    wide.append(f"{module}.{node.name}: {count}")
    assert not wide, f"public functions over {PARAMETER_LIMIT} parameters: {wide}"


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


# The command lines that serve every family: the benchmarks and tools, not seeds/, whose modules belong to their seeds.
GENERIC_SCRIPTS = sorted(path for folder in ("benchmarks", "tools") for path in (REPO / folder).glob("*.py"))


def test_the_harness_names_no_family():
    """The harness and its generic scripts know no family: no registered family's name, and none of
    the seeds' own words."""
    from tilelang_golden.catalog.loading import load_families

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
