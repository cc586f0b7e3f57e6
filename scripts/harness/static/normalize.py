"""Make emitted CUDA identical on every machine: one ordered list of rewrite rules."""

from __future__ import annotations

import re

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


def normalize_cuda(text: str, keep_line_directives: bool = False) -> str:
    """LF endings, no `#line` (unless asked for), no absolute paths, exactly one final newline."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if not keep_line_directives:
        lines = [line for line in lines if not _LINE_DIRECTIVE.match(line)]
    for _what, pattern, replacement in REWRITES:
        lines = [pattern.sub(replacement, line) for line in lines]
    return "\n".join(lines).rstrip("\n") + "\n"
