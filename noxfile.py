"""The nox sessions of the TileLang golden-file check: static (compare snapshots), regen-golden (rewrite them),
tests (the repository's tests), gpu, history (main's GPU runs over time), upgrade-preview, and lock (regenerate the
hashed locks).

`tilelang-golden init` writes this file as a repository's noxfile.py, and the harness's own repository runs it as its
own; a repository's own sessions go in noxfile_*.py beside it (loaded at the end). Sessions only install locked
dependencies (every file by its hash), then the harness and the repository's own projects, and call the harness; the
logic lives in the harness. Python tools run as `python -m TOOL`, never through their console scripts, whose first
line names the venv's absolute path: a venv restored from a cache at another path still works. The harness's
docs/ci.md says which lock serves which session and why torch's CPU build is installed on its own.
"""

import importlib.util
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

import nox
import tomllib

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["static", "tests"]

STATIC_VENV = Path(".nox") / "static"  # nox's folder for the static session, which regen-golden runs in too

CPU_LOCK = "requirements.txt"
GPU_LOCK = "requirements-gpu.txt"
# torch's CPU build is served by PyTorch's own index only. The sessions take torch, and nothing
# else, from there; every other package comes from PyPI. pip has no per-package index, hence two steps.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# For pip-compile: the index's page of torch alone, so no other package can resolve from it. It is
# named inside requirements.in, where every pip-compile run reads it, Dependabot's included.
TORCH_CPU_PAGE = f"{TORCH_CPU_INDEX}/torch/"
PYPI = "https://pypi.org/simple"
PIP_TOOLS = "pip-tools==7.6.2"
# lock -> its input: every requirements*.in at the root that names its lock on a `# Lock: FILE` line (one that only
# collects pins for others to include has none). Each lock's options are pip-compile's flags below (its header
# records them) and the options inside its input; Dependabot rebuilds the flags from the lock's content, not from
# its header, so no lock may need a flag outside that list.
LOCK_LINE = re.compile(r"^# Lock: (\S+)", re.M)


def locks(root: Path = Path()) -> dict[str, str]:
    """Each lock file by the .in file it is made from (`# Lock: requirements.txt` in requirements.in)."""
    found = {}
    for source in sorted(root.glob("requirements*.in")):
        named = LOCK_LINE.search(source.read_text())
        if named:
            found[named[1]] = source.name
    return found


LOCKS = locks()
PIP_COMPILE = [
    "pip-compile",
    "--quiet",
    "--generate-hashes",
    "--allow-unsafe",  # setuptools is a dependency of torch; hash-checking mode needs it locked too
    "--strip-extras",
    "--no-emit-index-url",  # the installs name their index; a mirror of the machine that ran it stays out
    # Hashes from the sources of this run only, never carried over from the lock being replaced (pip-tools
    # reuses them by default, which kept a hash of another file; left out of the header by pip-compile).
    "--no-reuse-hashes",
]
# Where PyTorch's page is out of reach, a folder holding its `+cpu` wheel may stand in for it (the lock
# then carries that file's hash only); the folder is struck from the lock, which names the page alone.
TORCH_CPU_WHEELS = "TORCH_CPU_WHEELS"


def lock_entries(text: str) -> dict[str, str]:
    """A pip-compile lock's entries by normalized name: each one's lines (pin, hashes, `# via`)."""
    entries: dict[str, str] = {}
    name = None
    for line in text.splitlines(keepends=True):
        if line[:1].isspace() and name:
            entries[name] += line
            continue
        pin = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==", line)
        name = re.sub(r"[-_.]+", "-", pin[1]).lower() if pin else None
        if name:
            entries[name] = line
    return entries


# NVIDIA's compilers the machine facts are made with, one CUDA release (requirements-common.in): what a CUDA preview
# replaces.
CUDA_COMPILERS = ("nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-runtime", "nvidia-cuda-nvdisasm")


def install(session: nox.Session, *, without: tuple[str, ...] = ()) -> None:
    """The CPU lock, every file by its hash: torch from PyTorch's CPU index, then the rest from PyPI.

    `without` leaves packages of the lock out (upgrade-preview installs its own TileLang).
    """
    entries = lock_entries(Path(CPU_LOCK).read_text())
    tmp = Path(session.create_tmp())
    torch_lock = tmp / "torch-cpu.txt"
    torch_lock.write_text(entries["torch"])
    # --no-deps: only torch comes from that index; its dependencies are in the lock, from PyPI.
    session.install("--require-hashes", "--no-deps", "--index-url", TORCH_CPU_INDEX, "-r", str(torch_lock))
    # The lock's entries alone: its `--find-links` line names PyTorch's page for pip-compile, and torch
    # is installed by now; where that page is out of reach, pip would retry it for every package.
    lock = tmp / "cpu-lock.txt"
    lock.write_text("".join(entry for name, entry in entries.items() if name not in without))
    # torch is installed by now, so this step takes nothing from PyPI under torch's name.
    session.install("--require-hashes", "-r", str(lock))
    install_project(session)


def setting(key: str, default: object = None) -> object:
    """One key of `[tool.tilelang-golden]` in pyproject.toml, read here, not by the harness's settings reader, because
    nox's own Python has nox alone (the harness checks the keys when it runs)."""
    path = Path("pyproject.toml")
    document = tomllib.loads(path.read_text()) if path.is_file() else {}
    return document.get("tool", {}).get("tilelang-golden", {}).get(key, default)


def harness_requirement() -> str | None:
    """Where the harness comes from (a pip requirement pinned by content). None: this repository is the harness's own
    project."""
    return setting("harness")


def unpinned_harness(requirement: str) -> str | None:
    """Why the pip requirement `requirement` does not fix which harness is installed, and what to name instead; None
    where it does: a git URL at a full 40-hex commit, or an archive's URL with its SHA-256 (`#sha256=`), which pip
    checks. `tilelang-golden init` applies this same function (from this file's source) to what it writes."""
    # Imports inside: init runs this function alone, without the rest of this file (which needs nox).
    import re
    from urllib.parse import urlsplit

    named = re.fullmatch(r"\s*[A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]]*\])?\s*@\s*(\S+)(?:\s+;.*)?\s*", requirement)
    url = urlsplit(named[1]) if named else None
    if url is None:
        why = "pip would take it from a package index, where nobody has registered tilelang-golden and anyone could"
    elif "+" in url.scheme:  # git+https://...@REV
        revision = url.path.rpartition("@")[2] if "@" in url.path else ""
        if re.fullmatch(r"[0-9a-fA-F]{40}", revision):
            return None
        why = "a VCS URL not at a full 40-hex commit installs whatever its branch or tag points at when it runs"
    elif re.fullmatch(r"sha256=[0-9a-f]{64}", url.fragment):
        return None
    elif url.fragment:
        why = (
            f"its fragment #{url.fragment} is not exactly one sha256= of 64 lowercase hex digits (pip checks only a "
            "fragment's first hash: #md5=...&sha256=... installs on the md5)"
        )
    else:
        folder = url.scheme == "file" and not re.search(r"\.(whl|tar\.gz|zip)$", url.path)
        why = (
            "a local folder (or an editable install) is neither reachable from CI nor fixed"
            if folder
            else "an archive's URL without #sha256= installs whatever that URL serves when it runs"
        )
    return (
        f"{requirement!r} does not pin the harness: {why}. Name it by content: a git URL at a full 40-hex commit "
        "(tilelang-golden @ git+https://github.com/ORG/tilelang-golden@<40-hex commit>) or a wheel's URL with its "
        "hash (tilelang-golden @ https://HOST/tilelang_golden-VERSION-py3-none-any.whl#sha256=<its SHA-256>)"
    )


def install_project(session: nox.Session) -> None:
    """The harness, then this repository's projects (`projects`, default the root: where its packages of families
    live), editable, with nothing else: their dependencies are the lock's. All are built without build isolation, by
    the setuptools the lock installed by hash: an isolated build would take an unpinned setuptools from PyPI (a git
    URL is built; a wheel is not)."""
    harness = harness_requirement()
    if harness:
        unpinned = unpinned_harness(harness)
        if unpinned:
            session.error(f"pyproject.toml [tool.tilelang-golden] harness: {unpinned}")
        session.install("--no-deps", "--no-build-isolation", harness)
    for folder in setting("projects", ["."]):
        session.install("--no-deps", "--no-build-isolation", "-e", folder)


@nox.session
def static(session: nox.Session) -> None:
    """Lower every variant for every target and compare with the snapshots (never writes there)."""
    install(session)
    session.run(
        "python", "-m", "tilelang_golden", "static", *session.posargs
    )  # `tilelang-golden static` (tilelang_golden.cli)


@nox.session(name="regen-golden", venv_backend="none")
def regen_golden(session: nox.Session) -> None:
    """Rewrite the selected snapshots (all by default; `-- -k EXPR` for some), in the static session's venv: the
    two must lower with the same packages, and a second venv would cost minutes to build."""
    session.run(sys.executable, "-m", "nox", "--install-only", "-s", "static")
    python = STATIC_VENV / "bin" / "python"
    session.run(str(python), "-m", "tilelang_golden", "regen", *session.posargs)


@nox.session(venv_backend="none")
def history(session: nox.Session) -> None:
    """The performance history of main's GPU runs (docs/history.md), in the static session's venv (the CPU lock has
    ruptures and matplotlib): `nox -s history` renders the history branch's records as a site in build/history-page;
    `-- record ...` or `-- page ...` passes options to `tilelang-golden history`."""
    session.run(sys.executable, "-m", "nox", "--install-only", "-s", "static")
    options = session.posargs or ["page", "--history", "origin/gpu-history", "--output", "build/history-page"]
    session.run(str(STATIC_VENV / "bin" / "python"), "-m", "tilelang_golden", "history", *options)


@nox.session(name="upgrade-preview")
def upgrade_preview(session: nox.Session) -> None:
    """What TileLang VERSION would change: `nox -s upgrade-preview -- VERSION [OPTIONS]`; what NVIDIA's compilers of
    CUDA release VERSION would change in the machine facts: `-- --cuda VERSION` (a report either way).

    It never writes the snapshots or the locks. OPTIONS go to `tilelang-golden upgrade-preview`, e.g. `-- 0.1.13
    --gpu`.
    """
    cuda = session.posargs[:1] == ["--cuda"]
    arguments = session.posargs[1:] if cuda else session.posargs
    if not arguments or arguments[0].startswith("-"):
        session.error(
            "name the TileLang version to preview first, then any options of `tilelang-golden upgrade-preview`: "
            "nox -s upgrade-preview -- 0.1.14 [--gpu]; or a CUDA release: nox -s upgrade-preview -- --cuda 13.5.37"
        )
    version, *options = arguments
    if cuda:
        # The lock without the compilers, then those of the release from PyPI (no hash in the lock for them); CCCL's
        # headers stay the lock's, since its wheels are versioned apart from the compilers'.
        install(session, without=CUDA_COMPILERS)
        try:
            session.install(*(f"{name}=={version}" for name in CUDA_COMPILERS))
        except nox.command.CommandFailed:
            session.error(f"CUDA {version}'s compilers could not be installed here ({', '.join(CUDA_COMPILERS)})")
        output = f"build/upgrade-preview/cuda-{version}"
        session.run("python", "-m", "tilelang_golden", "upgrade-preview", "--cuda", "--output", output, *options)
        return
    # The lock without TileLang (by hash), then only TileLang (and what it strictly requires) from PyPI:
    # the requested version has no hash in the lock, so it is installed outside hash-checking mode.
    install(session, without=("tilelang",))
    try:
        session.install(f"tilelang=={version}")
    except nox.command.CommandFailed:
        session.error(f"TileLang {version} could not be installed here (no such version, or no wheel for this Python)")
    output = f"build/upgrade-preview/{version}"
    session.run("python", "-m", "tilelang_golden", "upgrade-preview", "--output", output, *options)


@nox.session
def tests(session: nox.Session) -> None:
    """The repository's tests: all of them, or the paths given (`nox -s tests -- tests/history`)."""
    install(session)  # the CPU lock has matplotlib and NVML too: the GPU report's plot is tested here
    # No path here: pytest runs its configured testpaths (tests/) unless the options name paths. Work stealing: a
    # worker that runs out takes the other's queued tests, so a long test near the end does not leave a core idle
    # (docs/measurements.md: 458 s -> 409 s of pytest on 2 cores; a third worker was slower, 467 s).
    session.run("python", "-m", "pytest", "-n", "auto", "--dist=worksteal", *session.posargs)


@nox.session
def gpu(session: nox.Session) -> None:
    """Numeric and timing checks of every variant on the CUDA GPU at hand (docs/gpu.md); not run by CI.

    `nox --no-venv --no-install -s gpu` runs it in the calling Python, for a runner that already
    has CUDA PyTorch and this project (`pip install --no-deps -e .`); options after `--` go to
    `tilelang-golden gpu` (tilelang_golden/gpu/command.py).
    """
    if session.venv_backend == "none":
        python = sys.executable  # the runner's own Python and packages
    else:
        session.install("--require-hashes", "-r", GPU_LOCK)  # PyPI's CUDA torch and its triton
        install_project(session)
        python = "python"
    session.run(python, "-m", "tilelang_golden", "gpu", *session.posargs)


def lock_env(environ: Mapping[str, str], find_links: str | None = None) -> dict[str, str | None]:
    """pip's environment for pip-compile: no configuration file and no PIP_* setting of the caller, PyPI only.

    So the locks come out the same on any machine: a wheel folder or a mirror configured for pip would
    otherwise offer its own files (a local `torch-2.13.0+cpu` satisfies `torch==2.13.0`).
    `find_links` adds one folder (PIP_FIND_LINKS), for the stand-in above.
    """
    env: dict[str, str | None] = dict.fromkeys(name for name in environ if name.startswith("PIP_"))
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=PYPI, PIP_FIND_LINKS=find_links)
    return env


@nox.session(python="3.11", default=False)
def lock(session: nox.Session) -> None:
    """Regenerate every hashed lock from its .in file with pip-compile, for CPython 3.11 (CI's Python).

    Options after `--` go to every pip-compile run, e.g. `-- --upgrade-package numpy` (the pins in
    the .in files are kept; only what they leave open moves). TORCH_CPU_WHEELS=DIR: the stand-in above.
    """
    session.install(PIP_TOOLS)
    stand_in = os.environ.get(TORCH_CPU_WHEELS)
    for output, source in LOCKS.items():
        find_links = stand_in if stand_in and TORCH_CPU_PAGE in Path(source).read_text() else None
        session.run(
            *PIP_COMPILE, "--output-file", output, source, *session.posargs, env=lock_env(os.environ, find_links)
        )
        if find_links:
            lock = Path(output)
            lock.write_text(lock.read_text().replace(f"--find-links {find_links}\n", ""))


# A repository's own sessions live beside this file, in noxfile_*.py, so that this file stays as `tilelang-golden init`
# wrote it and a harness upgrade replaces it whole. Each is run after the shared sessions are defined, and imports
# what it shares with them from `golden_sessions`, this module (nox does not put this folder on the module path).
sys.modules["golden_sessions"] = sys.modules[__name__]
for own in sorted(Path(__file__).parent.glob("noxfile_*.py")):
    spec = importlib.util.spec_from_file_location(own.stem, own)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
