"""A verdict in Markdown: the CI job summary, the pull request comment and the upgrade preview's report read it so,
every change in a fenced block that nothing inside can close, the long parts folded."""

from __future__ import annotations

import re

from tilelang_golden.static.report.verdict import Entry, Verdict

# Markdown (the CI job summary, the pull request comment, the upgrade preview's report).
# The lines a reader sees before opening any folded block, at most; past them, further entries are folded.
MARKDOWN_UNFOLDED_LINES = 150
# The overview names this many entries; a facts diff shows this many lines before folding the rest.
OVERVIEW_ENTRIES = 8
MARKDOWN_FACT_LINES = 20


def code_block(text: str, language: str = "text") -> str:
    """A fenced block that no backtick run inside `text` can close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def folded(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def unfolded_lines(markdown: str) -> int:
    """Lines a reader sees with every `<details>` block closed (its summary line counts)."""
    seen, depth = 0, 0
    for line in markdown.splitlines():
        if depth == 0:
            seen += 1
        depth += line.count("<details>") - line.count("</details>")
    return seen


def overview_lines(verdict: Verdict) -> list[str]:
    """What changed and how to accept it, in a few lines: the top of a summary."""
    accept = f" To accept every one, after reading it: `{verdict.accept_all}`." if verdict.accept_all else ""
    lines = [f"**{verdict.heading}.**{accept}", ""]
    for index, entry in enumerate(verdict.entries[:OVERVIEW_ENTRIES], 1):
        lines.append(f"{index}. **{entry.title}**: {entry.headline}")
    hidden = len(verdict.entries) - OVERVIEW_ENTRIES
    if hidden > 0:
        lines.append(f"{hidden} more below.")
    return lines


def entry_markdown(index: int, entry: Entry) -> str:
    """One entry: where, the headline, the facts diff, the source hunks folded, the command."""
    parts = [f"### {index}. {entry.title}", "", f"{entry.headline}."]
    for section in entry.sections:
        if section.folded:
            language = "diff" if any(line.startswith("@@") for line in section.lines) else "text"
            body = code_block("\n".join(section.lines), language)
            if section.full:
                body += f"\n\nThe full diff: `{section.full}` (in the artifact)."
            parts += ["", folded(section.label, body)]
            continue
        shown, rest = section.lines[:MARKDOWN_FACT_LINES], section.lines[MARKDOWN_FACT_LINES:]
        parts += ["", f"{section.label[:1].upper()}{section.label[1:]}:", "", code_block("\n".join(shown))]
        if rest:
            parts += ["", folded(f"{len(rest)} more lines", code_block("\n".join(rest)))]
    if entry.accept:
        parts += ["", f"To accept: `{entry.accept}`"]
    return "\n".join(parts) + "\n"


def entries_markdown(
    verdict: Verdict, budget: int = MARKDOWN_UNFOLDED_LINES, limit: int | None = None, elsewhere: str = ""
) -> str:
    """Every entry; those past `budget` unfolded lines inside one folded block. With `limit`, the entries that fit in
    that many bytes, then a line naming the others and where they are (`elsewhere`)."""
    shown: list[str] = []
    rest: list[str] = []
    size, fitting = 0, len(verdict.entries)
    for index, entry in enumerate(verdict.entries, 1):
        text = entry_markdown(index, entry)
        size += len(text.encode()) + 1
        if limit is not None and size > limit:
            fitting = index - 1
            break
        if not rest and unfolded_lines("\n".join([*shown, text])) + 1 <= budget:  # + the folded block's line
            shown.append(text)
        else:
            rest.append(text)
    if rest:
        shown.append(folded(f"{len(rest)} more changes", "\n".join(rest)))
    left_out = verdict.entries[fitting:]
    if left_out:
        named = ", ".join(entry.title for entry in left_out[:3]) + (", ..." if len(left_out) > 3 else "")
        shown.append(f"{len(left_out)} more changes did not fit here ({named}); {elsewhere}.")
    return "\n".join(shown)
