"""Sessions: static (compare snapshots), regen-golden (rewrite them), tests (the harness's own tests).

Sessions only install pinned dependencies and call pytest; the logic lives in scripts/harness.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["static", "tests"]

GOLDEN = ["-p", "harness.plugin", "scripts/golden_test.py"]


def install(session: nox.Session) -> None:
    session.install("-r", "requirements.txt")


@nox.session
def static(session: nox.Session) -> None:
    """Lower every variant for every target and compare with golden/ (never writes there)."""
    install(session)
    session.run("pytest", *GOLDEN, "-n", "auto", "--dist", "loadgroup", *session.posargs)


@nox.session(name="regen-golden")
def regen_golden(session: nox.Session) -> None:
    """Rewrite the selected snapshots (all by default; `-- -k EXPR` for some)."""
    install(session)
    session.run("pytest", *GOLDEN, "--regen", "-n", "auto", "--dist", "loadgroup", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The harness's own tests."""
    install(session)
    session.run("pytest", "tests", "-n", "auto", *session.posargs)
