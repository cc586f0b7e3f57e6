"""The docs stay true: the snapshot format's generated part matches the code, every relative link
resolves, every file and module the code's docstrings and comments name exists, and the README stays a user guide."""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO
from script_runner import run_script

from tilelang_golden.static.snapshots.snapshot import (
    FACTS_SCHEMA,
    KERNEL_SCHEMA,
    MACHINE_KERNEL_SCHEMA,
    MACHINE_SCHEMA,
    OPTIONAL_KERNEL_FACTS,
)

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README_MOST_LINES = 320
# [text](target), not inside code: a target with no scheme is a path relative to the file.
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
FENCED = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"^```.*?^```|`[^`\n]*`", re.S | re.M)


def test_the_snapshot_format_doc_is_what_the_code_renders():
    doc = importlib.import_module("tools.snapshot_format_doc")
    text = doc.DOC.read_text()
    assert doc.render(text) == text, f"docs/snapshot-format.md is out of date: run `{doc.COMMAND}`"
    assert run_script(doc.main, "--check")[0] == 0


def test_the_check_fails_on_a_stale_doc_and_names_the_command(tmp_path, monkeypatch):
    doc = importlib.import_module("tools.snapshot_format_doc")
    stale = tmp_path / "snapshot-format.md"
    stale.write_text(doc.DOC.read_text().replace("| `kernels` | `list` |", "| `kernels` | `dict` |"))
    monkeypatch.setattr(doc, "DOC", stale)
    status, _, err = run_script(doc.main, "--check")
    assert status == 1 and doc.COMMAND in err
    assert run_script(doc.main)[0] == 0 and run_script(doc.main, "--check")[0] == 0


def test_a_doc_without_its_markers_is_refused_naming_the_file():
    doc = importlib.import_module("tools.snapshot_format_doc")
    with pytest.raises(ValueError, match="x.md: expected one line"):
        doc.render("# no markers\n", Path("x.md"))


def test_every_fact_key_is_described_by_hand():
    doc = importlib.import_module("tools.snapshot_format_doc")
    prose = doc.DOC.read_text().split(doc.BEGIN)[0]
    keys = FACTS_SCHEMA | KERNEL_SCHEMA | OPTIONAL_KERNEL_FACTS | MACHINE_SCHEMA | MACHINE_KERNEL_SCHEMA
    undescribed = [key for key in keys if f"`{key}`" not in prose]
    assert not undescribed, f"docs/snapshot-format.md: describe {undescribed} above the generated part"


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors for a Markdown file's headings."""
    headings = re.findall(r"^#+ (.+)$", FENCED.sub("", path.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(CODE.sub("", path.read_text())):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(target)
    return broken


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(path):
    assert not broken_links(path), f"{path.relative_to(REPO)}: links to nothing: {broken_links(path)}"


def test_the_link_check_finds_a_broken_link_and_a_broken_anchor(tmp_path):
    text = "# A `code` title?\n\n[x](missing.md) [y](a.md#a-code-title) [z](#nowhere) `[c](no.md)`\n```\n# no\n```\n"
    (tmp_path / "a.md").write_text(text)
    assert broken_links(tmp_path / "a.md") == ["missing.md", "#nowhere"]
    assert _anchors(tmp_path / "a.md") == {"a-code-title"}


def test_the_readme_is_a_user_guide_of_bounded_length():
    lines = len((REPO / "README.md").read_text().splitlines())
    assert lines <= README_MOST_LINES, f"README.md has {lines} lines: move detail to docs/"


# What the code's prose names: a file or folder of this repository by its path from the root, or a harness module
# (and a name defined at its top) by its dotted name. `tests/golden` is an adopting repository's folder in examples.
NAMED_FOLDERS = (
    "tests",
    "docs",
    "benchmarks",
    "scripts",
    "seeds",
    "tools",
    "ci",
    "deploy",
    ".github",
    "src/tilelang_golden",
)
NAMED_PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(map(re.escape, NAMED_FOLDERS))})/[\w./-]*\w)(?![\w<*{{-])")
NAMED_MODULE = re.compile(r"(?<![\w.])tilelang_golden((?:\.\w+)+)")
EXAMPLE_PATHS = ("tests/golden",)
CODE_WITH_PROSE = ["src/tilelang_golden", "benchmarks", "seeds", "tests", "ci", "kernels"]


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python file."""
    source = path.read_text()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield node.body[0].lineno, doc


def defines(module: Path, name: str) -> bool:
    """Whether a module defines or imports `name` at its top."""
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return True
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
        if isinstance(node, ast.Import | ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def module_exists(root: Path, parts: list[str]) -> bool:
    """`tilelang_golden.<parts>`: folders, then a module, then a name defined at its top (or in a package's face)."""
    folder = root / "src" / "tilelang_golden"
    for index, part in enumerate(parts):
        if (folder / part).is_dir():
            folder = folder / part
        elif (folder / f"{part}.py").is_file():
            rest = parts[index + 1 :]
            return not rest or defines(folder / f"{part}.py", rest[0])
        else:
            return (folder / "__init__.py").is_file() and defines(folder / "__init__.py", part)
    return True


def stale_names(root: Path, files: list[Path]) -> list[str]:
    """Each path or module a comment or docstring of `files` names and `root` does not have, as `file:line: name`."""
    found = []
    for path in files:
        for line, text in prose(path):
            missing = [m[1] for m in NAMED_PATH.finditer(text) if not m[1].startswith(EXAMPLE_PATHS)]
            missing = [name for name in missing if not (root / name).exists()]
            missing += [
                f"tilelang_golden{m[1]}"
                for m in NAMED_MODULE.finditer(text)
                if not module_exists(root, m[1][1:].split("."))
            ]
            found += [f"{path.relative_to(root)}:{line}: {name}" for name in missing]
    return found


def test_every_file_and_module_the_code_names_exists():
    """A docstring or comment that names a script, a doc, a test or a module that was renamed or deleted is wrong."""
    files = [
        p for folder in CODE_WITH_PROSE for p in sorted((REPO / folder).rglob("*.py")) if "init_files" not in p.parts
    ]
    stale = stale_names(REPO, [*files, REPO / "noxfile.py", REPO / "noxfile_harness.py"])
    assert not stale, "named in the code's prose, but not in the repository:\n" + "\n".join(stale)


def test_a_renamed_script_named_in_a_docstring_is_found(tmp_path):
    (tmp_path / "src" / "tilelang_golden").mkdir(parents=True)
    (tmp_path / "src" / "tilelang_golden" / "gate.py").write_text("LEVEL = 1\n")
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "timing.py").write_text("")
    module = tmp_path / "src" / "tilelang_golden" / "twin.py"
    module.write_text(
        '"""Measured by benchmarks/timing.py, not scripts/bench_timing.py; judged at tilelang_golden.gate.LEVEL."""\n'
        "# tilelang_golden.gate.GONE and tilelang_golden.timing_gate, which were renamed\n"
    )
    assert stale_names(tmp_path, [module]) == [
        "src/tilelang_golden/twin.py:2: tilelang_golden.gate.GONE",
        "src/tilelang_golden/twin.py:2: tilelang_golden.timing_gate",
        "src/tilelang_golden/twin.py:1: scripts/bench_timing.py",
    ]
