"""The hashed locks and the sessions that install them (docs/ci.md, "Locked toolchain").

A lock is stale when its .in file (with the files it includes) asks for something the lock does
not pin, pins at another version, or no longer asks for what the lock still pins as a direct
requirement; `nox -s lock` regenerates it. The noxfile is imported with a stand-in `nox` module, so
its sessions run here against a recording session object, without building any venv.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tilelang_golden.static.produce import toolchain

REPO = Path(__file__).resolve().parents[2]  # tests/workflows/ is two folders down
HEADER_COMMAND = re.compile(r"^#\s+pip-compile (?P<args>.+)$", re.M)
PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)", re.M)


# --- reading .in files and locks --------------------------------------------------------------


def read_in(path: Path) -> tuple[list[Requirement], list[Path]]:
    """The requirements of an .in file and of the files it includes with `-r`; and those files."""
    requirements: list[Requirement] = []
    files = [path]
    for raw in path.read_text().splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            included, more = read_in(path.parent / line.split(maxsplit=1)[1])
            requirements += included
            files += more
        elif line.startswith("--find-links "):
            # pip reads it from the file in every pip-compile run; a lock is made anywhere, so a public page
            assert line.split()[1].startswith("https://"), f"{path.name}: not a public page: {line}"
        elif line.startswith("-"):
            raise AssertionError(f"{path.name}: only -r and --find-links belong in an .in file: {line}")
        else:
            requirements.append(Requirement(line))
    return requirements, files


def lock_pins(text: str) -> dict[str, dict[str, Any]]:
    """Every pinned package of a pip-compile lock: version, hashes and `# via` sources."""
    pins: dict[str, dict[str, Any]] = {}
    starts = list(PIN.finditer(text))
    for match, following in zip(starts, [*starts[1:], None], strict=True):
        block = text[match.start() : following.start() if following else len(text)]
        via = re.findall(r"#\s+(?:via\s+)?(?!via\s*$)(-r \S+|[A-Za-z0-9][\w.-]*)\s*$", block, re.M)
        pins[canonicalize_name(match["name"])] = {
            "version": match["version"],
            "hashes": re.findall(r"--hash=sha256:([0-9a-f]{64})", block),
            "via": via,
        }
    return pins


def stale_reasons(source: Path, lock: Path) -> list[str]:
    """Why `lock` no longer matches `source` (its .in file); empty when it matches."""
    requirements, inputs = read_in(source)
    text = lock.read_text()
    reasons = []
    header = HEADER_COMMAND.search(text)
    if not header:
        reasons.append(f"{lock.name}: no pip-compile header")
    else:
        args = header["args"].split()
        if args[-1] != source.name or f"--output-file={lock.name}" not in args or "--generate-hashes" not in args:
            reasons.append(f"{lock.name}: made by `pip-compile {header['args']}`, not from {source.name} with hashes")
    pins = lock_pins(text)
    for requirement in requirements:
        pin = pins.get(canonicalize_name(requirement.name))
        if pin is None:
            reasons.append(f"{requirement} is not pinned in {lock.name}")
        elif not requirement.specifier.contains(Version(pin["version"]), prereleases=True):
            reasons.append(f"{requirement} is pinned at {pin['version']} in {lock.name}")
    asked = {canonicalize_name(requirement.name) for requirement in requirements}
    known_inputs = {f"-r {path.name}" for path in inputs}
    for name, pin in pins.items():
        if not pin["hashes"]:
            reasons.append(f"{name} has no hash in {lock.name}")
        sources = [via for via in pin["via"] if via.startswith("-r ")]
        if any(via not in known_inputs for via in sources):
            reasons.append(f"{name} in {lock.name} comes from {sources}, not from {sorted(known_inputs)}")
        elif sources and sources == pin["via"] and name not in asked:
            reasons.append(f"{name} is pinned in {lock.name} for {sources}, which no longer asks for it")
    return reasons


# --- the noxfile, imported with a stand-in nox ------------------------------------------------


class CommandFailed(Exception):
    pass


class SessionError(Exception):
    pass


def load_noxfile(monkeypatch: pytest.MonkeyPatch, path: Path = REPO / "noxfile.py") -> types.ModuleType:
    """The noxfile at `path` as nox loads it (registered under its module name before it runs), with a stand-in nox
    whose `session` decorator records each session by name in `nox.sessions`."""
    fake = types.ModuleType("nox")
    fake.sessions = {}
    fake.options = types.SimpleNamespace()
    fake.Session = object
    fake.command = types.SimpleNamespace(CommandFailed=CommandFailed)

    def session(func: Any = None, name: str | None = None, **_: Any) -> Any:
        def register(f: Any) -> Any:
            fake.sessions[name or f.__name__] = f
            return f

        return register(func) if func is not None else register

    fake.session = session
    monkeypatch.setitem(sys.modules, "nox", fake)
    spec = importlib.util.spec_from_file_location("noxfile_under_test", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    monkeypatch.delitem(sys.modules, "golden_sessions", raising=False)
    spec.loader.exec_module(module)
    return module


def test_the_noxfile_runs_a_repositorys_own_noxfiles_after_its_sessions(monkeypatch, tmp_path):
    """A repository keeps its own sessions in noxfile_*.py beside the shipped noxfile.py, which stays as init wrote
    it; they import what they share with it from `golden_sessions`. This repository's own are noxfile_harness.py."""
    shutil.copy(REPO / "noxfile.py", tmp_path / "noxfile.py")
    (tmp_path / "noxfile_ours.py").write_text(
        "import nox\nfrom golden_sessions import CPU_LOCK\n\n\n@nox.session\ndef ours(session):\n"
        "    session.log(CPU_LOCK)\n"
    )
    load_noxfile(monkeypatch, tmp_path / "noxfile.py")
    sessions = sys.modules["nox"].sessions
    assert {"static", "regen-golden", "tests", "ours"} <= set(sessions) and "lint" not in sessions
    monkeypatch.undo()
    load_noxfile(monkeypatch)
    assert {"static", "tests", "lint", "wheel", "workflows"} <= set(sys.modules["nox"].sessions)


class RecordingSession:
    """Records what a session installs and runs; `failing` names an install that fails."""

    venv_backend = "venv"

    def __init__(self, posargs: list[str], tmp: Path, failing: str | None = None) -> None:
        self.posargs = posargs
        self.tmp = tmp
        self.failing = failing
        self.installs: list[tuple[str, ...]] = []
        self.runs: list[tuple[str, ...]] = []

    def create_tmp(self) -> str:
        self.tmp.mkdir(exist_ok=True)
        return str(self.tmp)

    def install(self, *args: str) -> None:
        self.installs.append(args)
        if self.failing and self.failing in args:
            raise CommandFailed(self.failing)

    def run(self, *args: str, **_: Any) -> None:
        self.runs.append(args)

    def error(self, message: str) -> None:
        raise SessionError(message)


@pytest.fixture
def noxfile(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    monkeypatch.chdir(REPO)
    return load_noxfile(monkeypatch)


# This repository's projects, `projects` of its [tool.tilelang-golden]: the harness, then its families.
PROJECT_INSTALLS = [("--no-deps", "--no-build-isolation", "-e", folder) for folder in (".", "kernels")]


def locked_installs(installs: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """A session's installs but the last ones, which must be this repository's projects (editable, nothing else)."""
    locked, projects = installs[: -len(PROJECT_INSTALLS)], installs[-len(PROJECT_INSTALLS) :]
    assert projects == PROJECT_INSTALLS, f"the projects are installed last, alone: {installs}"
    return locked


def lock_files_in(installs: list[tuple[str, ...]]) -> list[Path]:
    return [Path(args[args.index("-r") + 1]) for args in installs if "-r" in args]


# --- the locks ----------------------------------------------------------------------------------


def test_every_in_file_has_its_lock_and_nox_s_lock_makes_each(noxfile):
    inputs = {path.name for path in REPO.glob("requirements*.in")} - {"requirements-common.in"}
    made = {source: lock for lock, source in noxfile.LOCKS.items()}
    assert set(made) == inputs, "every .in but the shared one is compiled by `nox -s lock`"
    for source, lock in made.items():
        assert (REPO / lock).is_file(), f"{lock} (from {source}) is not committed"


LOCK_NAMES = ["requirements.txt", "requirements-gpu.txt", "requirements-lint.txt", "requirements-nox.txt",
              "requirements-workflows.txt"]  # fmt: skip
# Dependabot's pip-compile run rebuilds its flags from a lock's content, not from its header
# (dependabot-core, python/lib/dependabot/python/file_updater/pip_compile_file_updater.rb,
# `pip_compile_options_from_compiled_file`): these are all it can pass. Any other flag in a header
# (`--find-links`, `--no-emit-find-links`, ...) would be dropped from its run, and its lock would differ.
DEPENDABOT_KEEPS = {"--output-file", "--no-emit-index-url", "--generate-hashes", "--allow-unsafe", "--unsafe-package",
                    "--no-annotate", "--no-header", "--pre", "--strip-extras", "--resolver"}  # fmt: skip


def dependabot_flags(name: str, content: str) -> list[str]:
    """The flags Dependabot passes to pip-compile for lock `name`, read from its content as its updater reads them.

    Its command is then `pip-compile --build-isolation FLAGS -P <package>==<version> <the .in file>`."""
    header = "".join(line for line in content.splitlines(keepends=True) if line.startswith("#"))
    flags = [f"--output-file={name}"]
    flags += [] if "index-url http" in content else ["--no-emit-index-url"]
    flags += ["--generate-hashes"] if "--hash=sha" in content else []
    flags += ["--allow-unsafe"] if re.search(r"^(setuptools|distribute|pip)==", content, re.M) else []
    flags += [
        f"--unsafe-package={n}" for n in dict.fromkeys(re.findall(r"--unsafe-package(?:=|\s+)([^\s\\]+)", header))
    ]
    flags += [] if "# via " in content else ["--no-annotate"]
    flags += [] if "autogenerated by pip-c" in content else ["--no-header"]
    flags += ["--pre"] if "--pre" in content else []
    flags += ["--strip-extras"] if "--strip-extras" in content else []
    flags += [f"--resolver={m[1]}" for m in [re.search(r"(?<=--resolver=)(\w+)", content)] if m]
    return flags


@pytest.mark.parametrize("lock", LOCK_NAMES)
def test_lock_is_current_with_its_in_file(noxfile, lock):
    source = noxfile.LOCKS[lock]
    assert stale_reasons(REPO / source, REPO / lock) == [], f"run `nox -s lock` ({lock} is stale)"
    header = HEADER_COMMAND.search((REPO / lock).read_text())["args"].split()
    for option in ("--generate-hashes", "--allow-unsafe", "--no-emit-index-url"):
        assert option in header, f"{lock}: made without {option}"


@pytest.mark.parametrize("lock", LOCK_NAMES)
def test_dependabot_recompiles_each_lock_with_the_flags_its_header_records(lock):
    """The lock's header holds `nox -s lock`'s flags; Dependabot rebuilds its own from the content, so
    the two runs agree only when they are the same flags (any other option lives in the .in file)."""
    content = (REPO / lock).read_text()
    *flags, source = HEADER_COMMAND.search(content)["args"].split()
    assert source.endswith(".in")
    assert {flag.split("=")[0] for flag in flags} <= DEPENDABOT_KEEPS, f"{lock}: Dependabot drops some of {flags}"
    rebuilt = dependabot_flags(lock, content)
    assert set(rebuilt) <= set(flags), f"{lock}: Dependabot would add {set(rebuilt) - set(flags)}"
    # Where no unsafe package is pinned, --allow-unsafe changes nothing but the header, which Dependabot keeps.
    assert set(flags) - set(rebuilt) <= {"--allow-unsafe"}, f"{lock}: Dependabot would drop {set(flags) - set(rebuilt)}"


def test_the_dependabot_flags_follow_the_content():
    """The rebuild reads what its updater reads: a lock without hashes or unsafe pins gets fewer flags."""
    content = (REPO / "requirements.txt").read_text()
    assert "--generate-hashes" in dependabot_flags("requirements.txt", content)
    bare = re.sub(r"^setuptools==.*$", "", re.sub(r"--hash=sha256:\w+", "", content), flags=re.M)
    assert {"--generate-hashes", "--allow-unsafe"}.isdisjoint(dependabot_flags("requirements.txt", bare))
    assert "--no-annotate" in dependabot_flags("x.txt", bare.replace("# via ", "# from "))


def test_a_stale_lock_is_caught(tmp_path):
    """Copies of the committed files, made stale on purpose, one way at a time."""
    for name in ("requirements.in", "requirements-common.in", "requirements.txt"):
        shutil.copy(REPO / name, tmp_path / name)
    source, lock, common = (
        tmp_path / "requirements.in",
        tmp_path / "requirements.txt",
        tmp_path / "requirements-common.in",
    )
    assert stale_reasons(source, lock) == []

    original = common.read_text()
    common.write_text(original.replace("tilelang==0.1.15", "tilelang==0.1.14"))
    assert stale_reasons(source, lock) == ["tilelang==0.1.14 is pinned at 0.1.15 in requirements.txt"]

    common.write_text(original + "rich==14.0.0\n")
    assert stale_reasons(source, lock) == ["rich==14.0.0 is not pinned in requirements.txt"]

    common.write_text(original.replace("deepdiff==9.1.0\n", ""))
    assert stale_reasons(source, lock) == [
        "deepdiff is pinned in requirements.txt for ['-r requirements-common.in'], which no longer asks for it"
    ]

    common.write_text(original)
    text = lock.read_text()
    lock.write_text(re.sub(r"(pyyaml==6\.0\.3) \\\n(\s+--hash=\S+ \\\n)*\s+--hash=\S+\n", r"\1\n", text))
    assert stale_reasons(source, lock) == ["pyyaml has no hash in requirements.txt"]

    lock.write_text(text.replace("--output-file=requirements.txt", "--output-file=other.txt"))
    assert len(stale_reasons(source, lock)) == 1 and "not from requirements.in" in stale_reasons(source, lock)[0]


def test_cpu_lock_holds_torchs_cpu_build_and_of_cuda_only_the_compilers():
    """NVIDIA's compilers (the machine facts) are pinned in requirements-common.in; no CUDA library of torch's."""
    pins = lock_pins((REPO / "requirements.txt").read_text())
    assert pins["torch"]["version"].endswith("+cpu") and len(pins["torch"]["hashes"]) >= 1
    compilers = set(re.findall(r"^(nvidia-[\w-]+)==", (REPO / "requirements-common.in").read_text(), re.M))
    assert set(toolchain.PACKAGES) <= compilers
    cuda = sorted(
        name
        for name in pins
        if name.startswith(("nvidia-", "triton", "cuda-")) and name != "nvidia-ml-py" and name not in compilers
    )
    assert not cuda, f"the CPU lock pulls CUDA packages: {cuda}"


def test_gpu_lock_holds_pypis_cuda_torch_with_its_triton():
    pins = lock_pins((REPO / "requirements-gpu.txt").read_text())
    assert "+" not in pins["torch"]["version"], "the GPU lock takes PyPI's (CUDA) torch"
    assert "triton" in pins, "the timer (triton.testing.do_bench) comes with PyPI's CUDA torch"
    cpu = lock_pins((REPO / "requirements.txt").read_text())
    assert pins["torch"]["version"] == cpu["torch"]["version"].split("+")[0], "one torch release on CPU and GPU"
    shared = {"tilelang", "apache-tvm-ffi", "z3-solver", "numpy", "ml-dtypes"}
    assert {name: pins[name]["version"] for name in shared} == {name: cpu[name]["version"] for name in shared}


def test_gpu_lock_holds_pypis_torch_files_not_the_cpu_build():
    """PyPI's torch of a release is other files than the CPU index's `+cpu` build of it: a hash of the one
    in the other's lock fails `pip install --require-hashes` on the machine that installs it."""
    gpu = set(lock_pins((REPO / "requirements-gpu.txt").read_text())["torch"]["hashes"])
    cpu = set(lock_pins((REPO / "requirements.txt").read_text())["torch"]["hashes"])
    assert gpu and cpu and not gpu & cpu, f"the GPU lock holds the CPU build's hash: {sorted(gpu & cpu)}"


def test_locks_name_no_local_source(noxfile):
    """No machine's folder, file URL or mirror reaches a committed lock; the CPU lock names torch's page."""
    for lock in REPO.glob("requirements*.txt"):
        options = [line for line in lock.read_text().splitlines() if line.startswith("-")]
        expected = [f"--find-links {noxfile.TORCH_CPU_PAGE}"] if lock.name == noxfile.CPU_LOCK else []
        assert options == expected, f"{lock.name}: {options}"
        assert "file://" not in lock.read_text()


class CompilingSession(RecordingSession):
    """Writes each lock as pip-compile would emit its sources: the .in's page, then PIP_FIND_LINKS."""

    def run(self, *args: str, **kwargs: Any) -> None:
        super().run(*args, **kwargs)
        self.envs = [*getattr(self, "envs", []), kwargs["env"]]
        output, source = Path(args[args.index("--output-file") + 1]), Path(args[args.index("--output-file") + 2])
        pages = re.findall(r"^--find-links \S+$", source.read_text(), re.M)
        extra = [f"--find-links {kwargs['env']['PIP_FIND_LINKS']}"] if kwargs["env"].get("PIP_FIND_LINKS") else []
        output.write_text("".join(f"{line}\n" for line in [*pages, *extra, "pkg==1"]))


def test_nox_s_lock_sees_pypi_only_whatever_pip_is_configured_with(noxfile, tmp_path, monkeypatch):
    """No pip.conf and no PIP_* of the caller: a configured wheel folder once gave the GPU lock the CPU
    build's hash. Hashes come from this run's sources, never reused from the lock being replaced."""
    for name in [*noxfile.LOCKS, *noxfile.LOCKS.values(), "requirements-common.in"]:
        shutil.copy(REPO / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    for name, value in {
        "PIP_FIND_LINKS": "/wheels",
        "PIP_EXTRA_INDEX_URL": "file:///mirror",
        "PIP_CONSTRAINT": "c",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(noxfile.TORCH_CPU_WHEELS, raising=False)
    session = CompilingSession([], tmp_path / "tmp")
    noxfile.lock(session)
    assert [run[run.index("--output-file") + 1] for run in session.runs] == list(noxfile.LOCKS)
    for run, env in zip(session.runs, session.envs, strict=True):
        assert "--no-reuse-hashes" in run
        assert env["PIP_CONFIG_FILE"] == os.devnull and env["PIP_INDEX_URL"] == "https://pypi.org/simple"
        assert env["PIP_FIND_LINKS"] is None and env["PIP_EXTRA_INDEX_URL"] is None and env["PIP_CONSTRAINT"] is None
    assert (tmp_path / "requirements.txt").read_text().startswith(f"--find-links {noxfile.TORCH_CPU_PAGE}\n")


def test_a_stand_in_for_torchs_page_serves_the_cpu_lock_only_and_leaves_no_trace(noxfile, tmp_path, monkeypatch):
    for name in [*noxfile.LOCKS, *noxfile.LOCKS.values(), "requirements-common.in"]:
        shutil.copy(REPO / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(noxfile.TORCH_CPU_WHEELS, "/wheels/torch-only")
    session = CompilingSession([], tmp_path / "tmp")
    noxfile.lock(session)
    folders = {
        run[run.index("--output-file") + 1]: env["PIP_FIND_LINKS"]
        for run, env in zip(session.runs, session.envs, strict=True)
    }
    assert folders == {lock: "/wheels/torch-only" if lock == noxfile.CPU_LOCK else None for lock in noxfile.LOCKS}
    assert (tmp_path / "requirements.txt").read_text() == f"--find-links {noxfile.TORCH_CPU_PAGE}\npkg==1\n"


# --- the sessions install from the locks --------------------------------------------------------


def test_cpu_install_takes_torch_alone_from_the_cpu_index_then_the_lock_by_hash(noxfile, tmp_path):
    session = RecordingSession([], tmp_path)
    noxfile.static(session)
    torch_step, lock_step = locked_installs(session.installs)
    assert torch_step[:4] == ("--require-hashes", "--no-deps", "--index-url", "https://download.pytorch.org/whl/cpu")
    (torch_lock,) = lock_files_in([torch_step])
    assert list(lock_pins(torch_lock.read_text())) == ["torch"], "only torch comes from the PyTorch index"
    assert torch_lock.read_text() in (REPO / "requirements.txt").read_text(), "torch's entry, hashes included"
    assert lock_step[:2] == ("--require-hashes", "-r") and len(lock_step) == 3, "the lock's entries, by hash"
    assert "--index-url" not in lock_step and "--extra-index-url" not in lock_step


def test_regen_golden_runs_in_the_static_sessions_venv_brought_up_to_date_first(noxfile, tmp_path):
    """One venv for the two: they must lower with the same packages, and a second venv costs minutes to build."""
    session = RecordingSession(["-k", "sm_90"], tmp_path)
    noxfile.regen_golden(session)
    assert not session.installs
    update, regen = session.runs
    assert update[1:] == ("-m", "nox", "--install-only", "-s", "static")
    assert Path(regen[0]) == Path(".nox") / "static" / "bin" / "python"
    assert regen[1:4] == ("-m", "tilelang_golden", "regen") and regen[-2:] == ("-k", "sm_90")


@pytest.mark.parametrize("name", ["static", "tests", "gpu", "lint", "workflows"])
def test_every_session_installs_only_hashed_locks(noxfile, tmp_path, name):
    session = RecordingSession([], tmp_path)
    sys.modules["nox"].sessions[name](session)
    assert session.installs, f"{name} installs nothing"
    installs = session.installs if name in ("lint", "workflows") else locked_installs(session.installs)
    for args in installs:
        assert "--require-hashes" in args and "-r" in args, f"{name}: {args}"
    committed = {path.name for path in lock_files_in(installs) if path.parent == Path(".")}
    assert committed <= set(noxfile.LOCKS)


PINNED_HARNESS = "tilelang-golden @ git+https://github.com/ORG/tilelang-golden@4f1c2e9a0b7d3c5e8f6a1b2c3d4e5f60718293a4"


def adopting_repository(folder: Path, harness: str) -> Path:
    """A repository's root with the harness setting and this repository's locks (init writes their inputs)."""
    folder.mkdir()
    settings = f'[tool.tilelang-golden]\nharness = "{harness}"\n'
    (folder / "pyproject.toml").write_text(f'[project]\nname = "acme"\n\n{settings}')
    for lock in ("requirements.txt", "requirements-gpu.txt"):
        shutil.copy(REPO / lock, folder / lock)
    return folder


@pytest.mark.parametrize("name", ["static", "gpu"])
def test_the_harness_is_built_by_the_setuptools_its_lock_installed_by_hash(noxfile, tmp_path, monkeypatch, name):
    """A git URL is built: in an isolated build, pip would fetch an unpinned setuptools from PyPI for it."""
    monkeypatch.chdir(adopting_repository(tmp_path / "acme", PINNED_HARNESS))
    session = RecordingSession([], tmp_path / "tmp")
    sys.modules["nox"].sessions[name](session)
    *locked, harness, project = session.installs
    assert harness == ("--no-deps", "--no-build-isolation", PINNED_HARNESS)
    assert project == PROJECT_INSTALLS[0], "an adopting repository's project: the root alone (projects' default)"
    assert all("--require-hashes" in args for args in locked)
    installed_before = "".join(path.read_text() for path in lock_files_in(locked))
    assert "setuptools" in lock_pins(installed_before), f"{name}: nothing installed setuptools before the builds"


def test_an_unpinned_harness_setting_stops_the_session_before_it_installs_the_harness(noxfile, tmp_path, monkeypatch):
    monkeypatch.chdir(adopting_repository(tmp_path / "acme", "tilelang-golden==0.1.0"))
    session = RecordingSession([], tmp_path / "tmp")
    with pytest.raises(SessionError) as refused:
        noxfile.static(session)
    assert str(refused.value).startswith(
        "pyproject.toml [tool.tilelang-golden] harness: 'tilelang-golden==0.1.0' does not pin the harness: pip would "
        "take it from a package index"
    )
    assert not [args for args in session.installs if "tilelang-golden==0.1.0" in args]


def test_the_cpu_installs_read_the_locks_entries_without_its_options(noxfile, tmp_path):
    """The CPU lock's --find-links line is for pip-compile; an install that read it would retry PyTorch's page
    for every package where that page is out of reach."""
    session = RecordingSession([], tmp_path)
    noxfile.static(session)
    installed = [path.read_text() for path in lock_files_in(locked_installs(session.installs))]
    assert not [line for text in installed for line in text.splitlines() if line.startswith("--")]
    assert set(lock_pins("".join(installed))) == set(lock_pins((REPO / "requirements.txt").read_text()))


def test_upgrade_preview_passes_options_after_the_version_to_the_script(noxfile, tmp_path):
    session = RecordingSession(["0.1.13", "--gpu"], tmp_path)
    noxfile.upgrade_preview(session)
    assert session.runs == [
        ("python", "-m", "tilelang_golden", "upgrade-preview", "--output", "build/upgrade-preview/0.1.13", "--gpu")
    ]
    session = RecordingSession(["0.1.14"], tmp_path)
    noxfile.upgrade_preview(session)
    assert session.runs == [
        ("python", "-m", "tilelang_golden", "upgrade-preview", "--output", "build/upgrade-preview/0.1.14")
    ]


def test_upgrade_preview_installs_the_lock_without_tilelang_then_the_requested_tilelang(noxfile, tmp_path):
    session = RecordingSession(["0.1.14"], tmp_path)
    noxfile.upgrade_preview(session)
    *installs, requested = session.installs
    locked = locked_installs(installs)
    assert requested == ("tilelang==0.1.14",), "the requested version has no hash: installed on its own"
    assert all("--require-hashes" in args for args in locked)
    rest = lock_pins(lock_files_in(locked)[-1].read_text())
    assert "tilelang" not in rest
    assert set(rest) == set(lock_pins((REPO / "requirements.txt").read_text())) - {"tilelang"}


@pytest.mark.parametrize("posargs", [[], ["--gpu"], ["--gpu", "0.1.13"]])
def test_upgrade_preview_needs_the_version_first(noxfile, tmp_path, posargs):
    with pytest.raises(SessionError, match="name the TileLang version to preview first"):
        noxfile.upgrade_preview(RecordingSession(posargs, tmp_path))


def test_upgrade_preview_says_when_the_version_does_not_install(noxfile, tmp_path):
    session = RecordingSession(["9.9.9"], tmp_path, failing="tilelang==9.9.9")
    with pytest.raises(SessionError, match="TileLang 9.9.9 could not be installed"):
        noxfile.upgrade_preview(session)
    assert session.runs == []


# --- the tests session ----------------------------------------------------------------------------


def test_the_tests_session_runs_the_paths_given_and_only_those(noxfile, tmp_path):
    import tomllib

    one_file = RecordingSession(["tests/static/produce/test_facts.py", "-k", "layouts"], tmp_path)
    noxfile.tests(one_file)
    (run,) = one_file.runs
    assert run[:3] == ("python", "-m", "pytest") and "tests" not in run
    assert run[-3:] == ("tests/static/produce/test_facts.py", "-k", "layouts")
    everything = RecordingSession([], tmp_path)
    noxfile.tests(everything)
    assert not [a for a in everything.runs[0][3:] if not a.startswith("-") and a != "auto"]
    # with no path, pytest runs its configured testpaths: the whole suite
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["testpaths"] == [
        "tests"
    ]
