"""Make emitted CUDA identical on every machine and every lowering: one ordered list of rewrite rules,
then names that TileLang assigns in an order that varies between lowerings made canonical.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_LINE_DIRECTIVE = re.compile(r"^[ \t]*#line\b")

# (what it removes, pattern, replacement), applied in order to every line. Absolute paths
# reach the text through #line directives and file-name strings.
REWRITES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("paths into site-packages", re.compile(r"[^\s\"'<>()]*[/\\](?:site|dist)-packages[/\\]"), "<site-packages>/"),
    (
        "other absolute paths",
        re.compile(r"(?<![\w<>./])/(?:root|home|tmp|usr|opt|work|Users|private|var)/[^\s\"'<>:()]*"),
        "<path>",
    ),
    ("trailing whitespace", re.compile(r"[ \t]+$"), ""),
)


# An object's address or a hex id in an error message: it differs from one run to the next.
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
# Lines of an error message kept in its snapshot: TileLang's message opens with what failed; the rest is
# usually a traceback through machine paths and C++ frames that change with every build.
ERROR_LINES = 3


def normalize_error(text: str) -> str:
    """The first ERROR_LINES non-empty lines of an error message, with CUDA's path rules applied and hex
    addresses replaced, so the text is the same on every machine and run."""
    lines = [line for line in normalize_cuda(text).splitlines() if line.strip()][:ERROR_LINES]
    return "\n".join(_HEX.sub("0x<hex>", line) for line in lines) + "\n"


# A line that opens a message of TVM's C++ log: `[12:34:56] <file:line>: Warning: ...` (the file is empty in
# release builds); a Python one, as tilelang_golden.static.produce.lowering writes it: `Warning: ...`.
_LOG_LINE = re.compile(r"^(?:\[\d\d:\d\d:\d\d\] \S* ?)?(?P<message>(?:Warning|Error|Critical): .*)$")
# Where TileLang says a message comes from (`--> /path/file.py:160:1`): the file's name is kept, its folder is
# machine-specific and its line moves with any edit above it.
_SOURCE_LOCATION = re.compile(r"(?P<arrow>-->\s*)\S*?(?P<name>[^/\\\s]+?)(?::\d+)+\s*$")


# Messages about the machine, not the kernel: TVM asks the ROCm install (absent on a CUDA-only machine) for
# its version while lowering for a HIP target.
MACHINE_WARNINGS = ("Warning: Unable to detect ROCm version",)


def normalize_warnings(text: str) -> list[str]:
    """What a lowering printed as a sorted list of distinct messages, each with its continuation lines, without
    timestamps, folders, line numbers or addresses, or messages about the machine (MACHINE_WARNINGS), so the
    list is the same on every machine and run."""
    located = "\n".join(_SOURCE_LOCATION.sub(r"\g<arrow>\g<name>", line) for line in text.splitlines())
    messages: list[list[str]] = []
    for line in normalize_cuda(located).splitlines():
        if not line.strip():
            continue
        opened = _LOG_LINE.match(line)
        if opened or not messages:
            messages.append([opened["message"] if opened else line])
            continue
        messages[-1].append(line)
    kept = ["\n".join(lines) for lines in messages if not lines[0].startswith(MACHINE_WARNINGS)]
    return sorted({_HEX.sub("0x<hex>", message) for message in kept})


# A shared buffer placed in the merged dynamic shared memory: `void* name = ((void*)((char*)base + offset));`
_SHARED_ALIAS = re.compile(r"^\s*void\* (?P<name>\w+) = \(\(void\*\)\(\(char\*\)\w+ \+ (?P<offset>.+)\)\);$")
_NUMBERED = re.compile(r"^(?P<stem>\w+?)(?:_(?P<number>\d+))?$")


def normalize_cuda(text: str, keep_line_directives: bool = False) -> str:
    """LF endings, no `#line` (unless asked for), no absolute paths, canonical shared-buffer numbering,
    exactly one final newline."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if not keep_line_directives:
        lines = [line for line in lines if not _LINE_DIRECTIVE.match(line)]
    for _what, pattern, replacement in REWRITES:
        lines = [pattern.sub(replacement, line) for line in lines]
    lines = canonical_shared_numbering(lines)
    return "\n".join(lines).rstrip("\n") + "\n"


def normalized_source(kernels: Sequence[tuple[str, str]]) -> str:
    """The kernel source as snapshotted from (name, emitted source) of each kernel a variant launches: normalized;
    a chain's kernels in launch order, each under a line naming it."""
    if len(kernels) == 1:
        return normalize_cuda(kernels[0][1])
    return "\n".join(
        f"// launch {index} of {len(kernels)}: {name}\n{normalize_cuda(source)}"
        for index, (name, source) in enumerate(kernels, 1)
    )


def canonical_shared_numbering(lines: list[str]) -> list[str]:
    """Number same-named shared buffers by their first use, and declare them in that order.

    TileLang 0.1.15 gives every reduction's scratch buffer the name `workspace`; the merged
    shared-memory pass declares buffers sorted by (offset, name), so two at one offset tie and
    come out in the order of a hash map keyed by object addresses, and the code generator
    numbers them `workspace`, `workspace_1` in that order: the same kernel swaps the two names
    from one lowering to the next (docs/nondeterminism.md). Renumbering them in the order the
    kernel body first uses them, and sorting tied declarations by the new names, makes the text
    depend on the kernel alone. Buffers with a unique name are left as they are.

    The memory planner breaks the same tie, so with more scratch buffers than fit one offset (flash
    attention on gfx950: five at one offset, one at the next) which of them gets the lone offset
    changes too. So the offsets of a same-named group are written as a set: ascending, in the order
    of the canonical names. A change to the set (a buffer moved, added, grown) still shows.
    """
    declared = {i: m for i, line in enumerate(lines) if (m := _SHARED_ALIAS.match(line))}
    by_stem: dict[str, list[str]] = {}
    for match in declared.values():
        numbered = _NUMBERED.match(match["name"])
        by_stem.setdefault(numbered["stem"], []).append(match["name"])
    groups = {stem: names for stem, names in by_stem.items() if len(names) > 1}
    if not groups:
        return lines
    body = [line for i, line in enumerate(lines) if i not in declared]
    renames: dict[str, str] = {}
    for names in groups.values():
        by_number = sorted(names, key=_number)
        renames.update(zip(sorted(names, key=lambda n: (_first_use(n, body), _number(n))), by_number, strict=True))
    renames = {old: new for old, new in renames.items() if old != new}
    if renames:
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, renames)) + r")\b")
        lines = [pattern.sub(lambda m: renames[m[1]], line) for line in lines]
    lines = _offsets_as_a_set(lines, [i for i in sorted(declared) if _stem(declared[i]["name"]) in groups])
    return _sort_tied_declarations(lines, sorted(declared))


def _stem(name: str) -> str:
    return _NUMBERED.match(name)["stem"]


def _offsets_as_a_set(lines: list[str], positions: list[int]) -> list[str]:
    """Within each same-named group (declared at `positions`), the n-th smallest offset to the n-th name,
    declared in that order at the group's places."""
    lines = list(lines)
    by_stem: dict[str, list[tuple[int, re.Match[str]]]] = {}
    for position in positions:
        match = _SHARED_ALIAS.match(lines[position])
        by_stem.setdefault(_stem(match["name"]), []).append((position, match))
    for members in by_stem.values():
        offsets = sorted((match["offset"] for _, match in members), key=_offset_order)
        named = sorted((match for _, match in members), key=lambda match: _number(match["name"]))
        for position, match, offset in zip(sorted(p for p, _ in members), named, offsets, strict=True):
            line = match.string
            lines[position] = line[: match.start("offset")] + offset + line[match.end("offset") :]
    return lines


def _offset_order(offset: str) -> tuple[int, int | str]:
    """Numeric offsets by value, before any written as an expression (by text)."""
    return (0, int(offset)) if offset.isdigit() else (1, offset)


def _number(name: str) -> int:
    return int(_NUMBERED.match(name)["number"] or 0)


def _first_use(name: str, body: list[str]) -> int:
    pattern = re.compile(rf"\b{re.escape(name)}\b")
    return next((i for i, line in enumerate(body) if pattern.search(line)), len(body))


def _sort_tied_declarations(lines: list[str], positions: list[int]) -> list[str]:
    """Within each run of consecutive declarations, those at one offset sorted by (stem, number),
    as TileLang sorts them by name; declarations at different offsets keep their order."""
    lines = list(lines)
    runs: list[list[int]] = []
    for position in positions:
        if runs and runs[-1][-1] == position - 1:
            runs[-1].append(position)
        else:
            runs.append([position])
    for run in runs:
        matches = [_SHARED_ALIAS.match(lines[i]) for i in run]
        first_at = {}
        for index, match in enumerate(matches):
            first_at.setdefault(match["offset"], index)

        def key(index: int, matches=matches, first_at=first_at) -> tuple[int, str, int]:
            name = matches[index]["name"]
            return first_at[matches[index]["offset"]], _stem(name), _number(name)

        ordered = [lines[run[i]] for i in sorted(range(len(run)), key=key)]
        for position, line in zip(run, ordered, strict=True):
            lines[position] = line
    return lines
