"""GitHub Actions' workflow commands and job summary, the one place either half writes them.

A workflow command is a line `::error title=...::message` the runner turns into an annotation; its message
and properties are escaped as GitHub's toolkit escapes them, so a newline or a `%` in a finding cannot end
the command early or be read as an escape. GitHub shows at most MAX_ANNOTATIONS of each kind per step: the
rest are counted in one notice per kind. The job summary is Markdown appended to $GITHUB_STEP_SUMMARY.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

MAX_ANNOTATIONS = 10
STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


def escape_data(text: str) -> str:
    """Workflow-command message escaping (GitHub's toolkit: %, CR, LF)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Workflow-command property escaping: the message rules plus `:` and `,`."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: str, **properties: str) -> str:
    """One workflow command (`::error title=...::message`), its properties and message escaped."""
    listed = ",".join(f"{name}={escape_property(value)}" for name, value in properties.items())
    return f"::{command}{' ' + listed if listed else ''}::{escape_data(message)}"


def capped(commands: Sequence[str], noun: str, limit: int = MAX_ANNOTATIONS) -> list[str]:
    """At most `limit` commands of each kind (GitHub shows 10 per step); a notice per kind counts the rest."""
    kept: list[str] = []
    shown: dict[str, int] = {}
    hidden: dict[str, int] = {}
    for line in commands:
        kind = re.match(r"::(\w+)", line)[1]
        if shown.get(kind, 0) < limit:
            kept.append(line)
            shown[kind] = shown.get(kind, 0) + 1
        else:
            hidden[kind] = hidden.get(kind, 0) + 1
    return kept + [
        workflow_command(
            "notice",
            f"{count} more {noun} not annotated (GitHub shows {limit} {kind}s per step); see the job summary",
            title=f"more {kind}s",
        )
        for kind, count in hidden.items()
    ]


def on_actions(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this runs in a GitHub Actions job, whose runner reads workflow commands from the log."""
    return environ.get("GITHUB_ACTIONS") == "true"


def append_step_summary(markdown: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Append to the job summary; False (nothing written) outside a job that has one."""
    path = environ.get(STEP_SUMMARY)
    if not path:
        return False
    with open(path, "a", encoding="utf-8") as summary:
        summary.write(markdown)
    return True
