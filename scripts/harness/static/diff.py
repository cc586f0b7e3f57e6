"""Readable differences between a snapshot and what the harness produced now."""

from __future__ import annotations

import difflib
from typing import Any

from harness.static.renaming import classify, comments
from harness.static.snapshot import CorruptSnapshot, parse_facts, strip_cuda_header

MAX_DIFF_LINES = 120


def regen_command(selector: str) -> str:
    return f'nox -s regen-golden -- -k "{selector}"'


def _changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[list[Any], str, str]]:
    """(path as keys and indices, before, after) per changed field, via deepdiff."""
    from deepdiff import DeepDiff

    diff = DeepDiff(old, new, verbose_level=2, view="tree")
    changes = []
    for change_type in sorted(diff):
        for change in diff[change_type]:
            before = "<absent>" if change_type.endswith("_added") else _short(change.t1)
            after = "<absent>" if change_type.endswith("_removed") else _short(change.t2)
            changes.append((change.path(output_format="list"), before, after))
    return changes


def field_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """One line per changed field: `path: old -> new`."""
    return [
        f"{'.'.join(str(p) for p in path) or '<root>'}: {before} -> {after}"
        for path, before, after in _changes(old, new)
    ]


def changed_fields(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Fact fields that differ, list indices and numeric keys dropped (`sync.cp_async_wait`, not
    `...wait.0`; `loops.unrolled`, not `loops.unrolled.4`), sorted; the case's own name and
    parameters left out (they differ between any two variants). Built from the paths, not from the
    printed lines, so a key holding `:` (a C++ name) stays whole."""
    fields = {".".join(str(p) for p in path if not isinstance(p, int)) for path, _, _ in _changes(old, new)}
    return sorted(f for f in fields if not f.startswith(("case.", "params.")))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."


def text_diff(
    old: str, new: str, path: str, context: int = 3, labels: tuple[str, str] = ("golden", "produced")
) -> list[str]:
    """Unified diff (limited context, capped length) of golden (or the first text) against produced text."""
    return _capped(
        list(
            difflib.unified_diff(
                old.splitlines(), new.splitlines(), f"{labels[0]}/{path}", f"{labels[1]}/{path}", n=context, lineterm=""
            )
        )
    )


def _capped(lines: list[str]) -> list[str]:
    if len(lines) > MAX_DIFF_LINES:
        hidden = len(lines) - MAX_DIFF_LINES
        lines = lines[:MAX_DIFF_LINES] + [f"... {hidden} more diff lines; the full file is in the pending folder"]
    return lines


def describe_mismatch(path: str, golden: str | None, produced: str) -> list[str]:
    """Problems with one file, as report lines; empty when the file matches byte for byte."""
    if golden == produced:
        return []
    if golden is None:
        return [f"golden/{path}: missing (no snapshot committed for this case)"]
    if path.endswith(".yaml"):
        try:
            old = parse_facts(golden, f"golden/{path}")
        except CorruptSnapshot as error:
            return [f"{error}"]
        import yaml

        changes = field_changes(old, yaml.safe_load(produced))
        if changes:
            return [f"golden/{path}: {len(changes)} field(s) changed"] + [f"  {line}" for line in changes]
    raw = [f"  {line}" for line in text_diff(golden, produced, path)]
    if path.endswith(".cu"):
        old_cuda, new_cuda = strip_cuda_header(golden), strip_cuda_header(produced)
        found = classify(old_cuda, new_cuda, path)
        if found.renamed_only and not found.renaming:  # the same code token for token
            what = "whitespace" if comments(old_cuda) == comments(new_cuda) else "comments"
            return [f"golden/{path}: {what} changed only (the code is the same token for token)"] + raw
        if found.renamed_only:
            renaming = ", ".join(f"{old} -> {new}" for old, new in found.renaming.items())
            return [f"golden/{path}: identifiers renamed only ({len(found.renaming)}: {renaming})"] + raw
        if found.canonical_diff:
            canonical = [f"  {line}" for line in _capped(found.canonical_diff)]
            return [f"golden/{path}: CUDA changed (first with local names canonicalized, then as is)", *canonical, *raw]
    return [f"golden/{path}: text differs"] + raw
