"""Sessions: static (compare snapshots), regen-golden (rewrite them), tests (the harness's own tests).

Sessions only install pinned dependencies and call pytest; the logic lives in scripts/harness.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["static", "tests"]

GOLDEN = ["-p", "harness.static.plugin", "scripts/golden_test.py"]


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


@nox.session(name="upgrade-preview")
def upgrade_preview(session: nox.Session) -> None:
    """What TileLang VERSION would change: `nox -s upgrade-preview -- VERSION` (a report, never writes golden/)."""
    if len(session.posargs) != 1:
        session.error("name the TileLang version to preview: nox -s upgrade-preview -- 0.1.14")
    version = session.posargs[0]
    install(session)
    try:  # only TileLang (and what it strictly requires) replaced
        session.install(f"tilelang=={version}")
    except nox.command.CommandFailed:
        session.error(f"TileLang {version} could not be installed here (no such version, or no wheel for this Python)")
    session.run("python", "scripts/upgrade_preview.py", "--output", f"build/upgrade-preview/{version}")


@nox.session
def tests(session: nox.Session) -> None:
    """The harness's own tests."""
    session.install("-r", "requirements-gpu.txt")  # the pins plus matplotlib: the GPU report's plot is tested too
    session.run("pytest", "tests", "-n", "auto", *session.posargs)


@nox.session
def gpu(session: nox.Session) -> None:
    """Numeric and timing checks of every variant on the CUDA GPU at hand (docs/gpu.md); not run by CI.

    `nox --no-venv --no-install -s gpu` runs it in the calling Python, for a runner that already
    has CUDA PyTorch; options after `--` go to scripts/gpu_check.py.
    """
    import sys

    if session.venv_backend == "none":
        python = sys.executable  # the runner's own Python and packages
    else:
        session.install("-r", "requirements-gpu.txt")
        python = "python"
    session.run(python, "scripts/gpu_check.py", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff on the Python; every workflow against GitHub's schema and zizmor's audits (all offline)."""
    from pathlib import Path

    session.install("-r", "requirements-lint.txt")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    workflows = sorted(str(path) for path in Path(".github/workflows").glob("*.y*ml"))
    if not workflows:
        session.error("no workflow under .github/workflows/: nothing to lint")
    session.run("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *workflows)
    session.run("check-jsonschema", "--builtin-schema", "vendor.dependabot", ".github/dependabot.yml")
    # Medium severity and above fail; --strict-collection makes an unparsable workflow fail too.
    session.run("zizmor", "--offline", "--strict-collection", "--min-severity", "medium", *workflows)
