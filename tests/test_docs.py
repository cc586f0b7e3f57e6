"""The docs stay true: the snapshot format's generated part matches the code, every relative link
resolves, and the README stays a user guide."""

from __future__ import annotations

import importlib
import re
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
