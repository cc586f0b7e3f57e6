"""The harness's own sessions: lint, wheel, and workflows (the GitHub workflows run by act). noxfile.py holds the
sessions every repository using the harness has (static, regen-golden, tests, gpu, upgrade-preview, lock), as
`tilelang-golden init` writes them there, and loads this file after them, as it loads an adopting repository's own
noxfile_*.py.
"""

from __future__ import annotations

from pathlib import Path

import nox
from golden_sessions import CPU_LOCK, lock_entries  # the shared noxfile, as it names itself for its noxfile_*.py

LINT_LOCK = "requirements-lint.txt"
WORKFLOWS_LOCK = "requirements-workflows.txt"

DEPENDABOT = ".github/dependabot.yml"
# The GPU check's image, and the runner's, which only names the upstream image for Dependabot
# (tests/workflows/test_runners.py holds it to one pinned FROM).
DOCKERFILES = ["deploy/arc/image/Dockerfile", "deploy/arc/runner/Dockerfile"]


@nox.session
def lint(session: nox.Session) -> None:
    """ruff on the Python; the workflows and Dependabot's file against their schemas and zizmor's audits; the
    Dockerfiles under deploy/ with hadolint (all offline)."""
    session.install("--require-hashes", "-r", LINT_LOCK)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    workflows = sorted(str(path) for path in Path(".github/workflows").glob("*.y*ml"))
    if not workflows:
        session.error("no workflow under .github/workflows/: nothing to lint")
    session.run("python", "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", *workflows)
    session.run("python", "-m", "check_jsonschema", "--builtin-schema", "vendor.dependabot", DEPENDABOT)
    # Medium severity and above fail; --strict-collection makes an unparsable workflow fail too. Dependabot's
    # file too: its audits ask for a cooldown and forbid code execution during updates.
    session.run("zizmor", "--offline", "--strict-collection", "--min-severity", "medium", *workflows, DEPENDABOT)
    session.run("hadolint", *DOCKERFILES)


@nox.session
def wheel(session: nox.Session) -> None:
    """The harness's wheel under dist/ (what `pip install` of this repository's git URL builds), built by the
    setuptools of the CPU lock, by hash, in place of an isolated build's unpinned one."""
    lock = Path(session.create_tmp()) / "setuptools.txt"
    lock.write_text(lock_entries(Path(CPU_LOCK).read_text())["setuptools"])
    session.install("--require-hashes", "-r", str(lock))
    session.run("python", "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", "dist", ".")


@nox.session
def workflows(session: nox.Session) -> None:
    """The workflows under .github/ executed by act, offline, on a reduced copy of this repository, scenario by
    scenario (ci/README.md); `-- -k NAME` runs some. The copy's jobs reuse the static, tests, lint and wheel venvs."""
    session.install("--require-hashes", "-r", WORKFLOWS_LOCK)
    # The venvs the copy's jobs restore from the stand-in cache, made or brought up to date here.
    session.run("python", "-m", "nox", "--install-only", "-s", "static", "tests", "lint", "wheel")
    # A file per worker, its scenarios in order (each file's World is its worker's own; ci/conftest.py).
    session.run("python", "-m", "pytest", "ci", "-n", "auto", "--dist=loadfile", "-p", "no:cacheprovider",
                *session.posargs)  # fmt: skip
