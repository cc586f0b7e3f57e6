"""Diffs of two versions of a file: changed fact fields (via deepdiff), and unified diffs of text.

The snapshot kinds (tilelang_golden.static.kinds) compare their files with these."""

from __future__ import annotations

import difflib
import os
from typing import Any

from tilelang_golden.static.snapshots.changes import FactChange

MAX_DIFF_LINES = 120
# A changed value is shown in at most this many characters.
SHORT = 100


def _changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[list[Any], str, str]]:
    """(path as keys and indices, before, after) per changed field, via deepdiff."""
    from deepdiff import DeepDiff

    diff = DeepDiff(old, new, verbose_level=2, view="tree")
    changes = []
    for change_type in sorted(diff):
        for change in diff[change_type]:
            if change_type.endswith("_added"):
                before, after = "<absent>", _short(change.t2)
            elif change_type.endswith("_removed"):
                before, after = _short(change.t1), "<absent>"
            else:
                before, after = shortened_apart(change.t1, change.t2)
            changes.append((change.path(output_format="list"), before, after))
    return changes


def _kernel_names(facts: dict[str, Any]) -> list[str]:
    kernels = facts.get("kernels")
    if not isinstance(kernels, list):
        return []
    return [str(k.get("name", f"kernel {i}")) if isinstance(k, dict) else f"kernel {i}" for i, k in enumerate(kernels)]


def fact_changes(old: dict[str, Any], new: dict[str, Any]) -> list[FactChange]:
    """One record per changed field. Per-kernel facts (`kernels.<i>.<path>`) lose their `kernels.<i>`
    prefix and are named by their kernel only where the module launches several."""
    names = _kernel_names(new) or _kernel_names(old)
    several = len(names) > 1
    found = []
    for path, before, after in _changes(old, new):
        kernel = ""
        if len(path) > 2 and path[0] == "kernels" and isinstance(path[1], int):
            kernel = (names[path[1]] if path[1] < len(names) else f"kernel {path[1]}") if several else ""
            path = path[2:]
        found.append(FactChange(tuple(path), before, after, kernel))
    return found


def changed_fields(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Fact fields that differ, list indices and numeric keys dropped (`sync.cp_async_wait`, not
    `...wait.0`; `loops.unrolled`, not `loops.unrolled.4`), sorted; the case's own name and
    parameters left out (they differ between any two variants). A kernel's field is named as it is
    within the kernel when both sides launch one kernel (`sync.cp_async_wait`), and under the kernel's
    name when either launches several (`kernels.main_kernel_1.sync.cp_async_wait`). Built from the
    paths, not from the printed lines, so a key holding `:` (a C++ name) stays whole."""
    kernels = [facts.get("kernels") if isinstance(facts.get("kernels"), list) else [] for facts in (old, new)]
    one_kernel = [len(side) for side in kernels] == [1, 1]
    fields = set()
    for path, _, _ in _changes(old, new):
        if path[:1] == ["kernels"] and len(path) > 1 and isinstance(path[1], int):
            sides = [side[path[1]] for side in reversed(kernels) if path[1] < len(side)]
            name = next((kernel["name"] for kernel in sides if isinstance(kernel, dict) and "name" in kernel), path[1])
            path = path[2:] if one_kernel else ["kernels", str(name), *path[2:]]
        fields.add(".".join(str(p) for p in path if not isinstance(p, int)))
    return sorted(f for f in fields if not f.startswith(("case.", "params.")))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHORT else text[: SHORT - 3] + "..."


def shortened_apart(before: Any, after: Any) -> tuple[str, str]:
    """Two values as `_short` gives them, but where both are cut: from the same offset, a little before their first
    difference, so that the two cut texts show what differs (two long warnings that differ in one word past their
    first 100 characters would otherwise read alike)."""
    old, new = repr(before), repr(after)
    if len(old) <= SHORT and len(new) <= SHORT:
        return old, new
    common = len(os.path.commonprefix([old, new]))
    start = max(0, common - SHORT // 3)
    return _window(old, start), _window(new, start)


def _window(text: str, start: int) -> str:
    """`SHORT` characters of `text` from `start`, with `...` where it was cut."""
    head = "..." if start else ""
    body = text[start : start + SHORT - len(head)]
    return head + body if start + len(body) >= len(text) else head + body[:-3] + "..."


def text_diff(old: str, new: str, path: str, prefixes: tuple[str, str], context: int = 3) -> list[str]:
    """Unified diff (limited context, capped length) of two texts of `path`, named by the folder prefixes of
    their sides (`golden/`, `produced/`)."""
    before, after = (f"{prefix}{path}" for prefix in prefixes)
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), before, after, n=context, lineterm="")
    return capped(list(lines))


def capped(lines: list[str]) -> list[str]:
    if len(lines) > MAX_DIFF_LINES:
        hidden = len(lines) - MAX_DIFF_LINES
        lines = lines[:MAX_DIFF_LINES] + [f"... {hidden} more diff lines; the full file is in the pending folder"]
    return lines
