"""Running this repository's workflows with act, offline, and reading what happened.

`World` is a reduced copy of the repository (one small family, its snapshots, one test file) with git history
as GitHub would check it out, and the stand-ins' state folder (ci/stand_in.py): the cache, the artifacts, the
fake GitHub of `ci/bin/gh`. `World.run` runs one workflow for one event with act in its host mode, every
pinned action replaced by its stand-in under ci/actions/, and returns act's JSON log as a `Run`.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stand_in import link_or_copy

CI = Path(__file__).resolve().parent
REPO = CI.parent
WORKFLOWS = REPO / ".github" / "workflows"
STAND_INS = CI / "actions"
# The small family the copy keeps: two variants that lower in about a second on every target.
FAMILY = "inplace_update"
# GitHub's names in the copy: the repository, its owner's fork, the runner labels act runs on this machine.
REPOSITORY = "acme/kernels"
FORK = "someone/kernels"
RUNNER_LABELS = ["ubuntu-24.04", "gpu-h200"]
# What act 0.2.89 cannot read, taken out of the copy's workflows (docs/ci.md, "Run by act"): its schema does not
# know `concurrency.queue` and refuses the whole workflow. tests/workflows/test_workflows.py pins the line as before.
ACT_CANNOT_READ = {".github/workflows/gpu.yml": "      queue: max\n"}
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<repo>[\w.-]+/[\w.-]+)(?:/[\w./-]+)?@(?P<ref>[0-9a-f]{40})", re.M)
# The session's own variables, which a command run as on a developer's machine drops (ci/test_adoption.py).
NOT_A_RUNNERS = re.compile(r"^(VIRTUAL_ENV|NOX_.*|PYTEST_.*|PYTHONPATH|GITHUB_.*|RUNNER_.*|ACT.*)$")
# The only variables of the caller's environment that act and its host-mode jobs get: what a runner has (PATH,
# HOME, the locale, the shell) and pip's configuration, which points this machine's installs at its offline index.
# Nothing else: a caller's token or cloud credentials must not reach a job's steps.
RUNNER_VARIABLES = re.compile(r"^(PATH|HOME|USER|LOGNAME|SHELL|TERM|TMPDIR|LANG|LANGUAGE|LC_[A-Z]+|PIP_[A-Z_]+)$")
# pip's index settings may carry a login (https://USER:TOKEN@host/...): such a value stays with the caller.
USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s]*@")


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "ci", "GIT_AUTHOR_EMAIL": "ci@example.com",
           "GIT_COMMITTER_NAME": "ci", "GIT_COMMITTER_EMAIL": "ci@example.com"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def runner_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """act's environment, which its host-mode jobs inherit: RUNNER_VARIABLES of `environ` whose values hold no URL
    with a login, with the gh stand-in first on PATH and this session's venv off it (a job has its Python from
    setup-python, as on GitHub)."""
    kept = {name: value for name, value in environ.items()
            if RUNNER_VARIABLES.match(name) and not USERINFO.search(value)}  # fmt: skip
    path = [entry for entry in kept["PATH"].split(os.pathsep) if Path(entry) != Path(sys.prefix) / "bin"]
    kept["PATH"] = os.pathsep.join([str(CI / "bin"), *path])
    return kept


def stand_in_repositories() -> list[str]:
    """`--local-repository` arguments: every action the workflows pin, by commit, replaced by its stand-in."""
    pinned = {(m["repo"], m["ref"]) for path in WORKFLOWS.glob("*.y*ml") for m in USES.finditer(path.read_text())}
    arguments = []
    for repo, ref in sorted(pinned):
        stand_in = STAND_INS / repo.split("/", 1)[1]
        if not stand_in.is_dir():
            raise FileNotFoundError(f"{repo}@{ref} is used by a workflow but has no stand-in under {stand_in}")
        arguments += ["--local-repository", f"{repo}@{ref}={stand_in}"]
    return arguments


def hash_files(*paths: Path) -> str:
    """GitHub's hashFiles(): the SHA-256 of the files' SHA-256 digests, in order."""
    outer = hashlib.sha256()
    for path in paths:
        outer.update(hashlib.sha256(path.read_bytes()).digest())
    return outer.hexdigest()


def reduce_copy(source: Path, target: Path) -> None:
    """The repository's files as git sees them (committed or not, never ignored ones), less every family but one,
    its snapshots only, and one test file of the harness's: the workflows' jobs then take seconds."""
    listed = git(source, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for name in filter(None, listed):
        if (source / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target / name)
    for module in (target / "kernels").glob("*.py"):
        if module.name not in ("__init__.py", f"{FAMILY}.py"):
            module.unlink()
    for entry in (target / "golden").iterdir():
        if entry.name not in ("MANIFEST.yaml", "COSTS.yaml", "timing", FAMILY):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    # The family's costs alone (one `  family/variant/target: seconds` line each): a regen drops the records of cases
    # no family has, which would put the costs file in every regen's patch.
    costs = target / "golden" / "COSTS.yaml"
    if costs.is_file():
        lines = costs.read_text().splitlines(keepends=True)
        kept = [line for line in lines if not line.startswith("  ") or line.startswith(f"  {FAMILY}/")]
        costs.write_text("".join(kept))
    for name, line in ACT_CANNOT_READ.items():
        text = (target / name).read_text()
        assert line in text, f"{name} no longer has {line!r}: update ACT_CANNOT_READ"
        (target / name).write_text(text.replace(line, ""))
    # The command lines that import a family by name (the seeds' modules) go with their families.
    for script in (target / "seeds").glob("*.py"):
        if re.search(rf"\bkernels\.(?!{FAMILY}\b)\w+", script.read_text()):
            script.unlink()
    shutil.rmtree(target / "tests")
    (target / "tests").mkdir()
    shutil.copy2(source / "tests" / "static" / "snapshots" / "test_normalize.py", target / "tests")


def job_name(entry: dict[str, Any]) -> str:
    """A job's name as GitHub shows it: act writes `workflow/name`, padded, and `-<index>` after a matrix job's."""
    name = entry["job"].split("/", 1)[1].rstrip()
    return re.sub(r"-\d+$", "", name) if entry.get("matrix") else name


@dataclass
class Run:
    """What act said of one workflow run: its exit status and its JSON log."""

    returncode: int
    log: list[dict[str, Any]]

    def jobs(self) -> dict[str, str]:
        """Each job's result by its name as GitHub shows it (`golden snapshots (shard 1)`). act gives every entry of
        a matrix the result of the whole matrix; an entry failed where one of its own steps failed."""
        results = {job_name(entry): entry["jobResult"] for entry in self.log if "jobResult" in entry}
        failed = {job_name(entry) for entry in self.log if entry.get("stepResult") == "failure"}
        return {name: "failure" if name in failed else result for name, result in results.items()}

    def summary(self, job: str) -> str:
        """The job summary the job's steps wrote (every step's, in order)."""
        return "".join(e["content"] for e in self.log if e.get("command") == "summary" and job_name(e) == job)

    def commands(self, job: str, command: str) -> list[dict[str, Any]]:
        """Workflow commands (`::error file=...::`) the job printed."""
        return [e for e in self.log if e.get("command") == command and job_name(e) == job]

    def output(self, job: str) -> str:
        """Everything the job's steps printed."""
        return "".join(e.get("msg", "") for e in self.log if "job" in e and job_name(e) == job)


# The lock each seeded session's venv is keyed on (noxfile.py's sessions; tests/workflows/test_workflows.py holds
# the jobs').
SESSION_LOCKS = {"lint": "requirements-lint.txt"}


def reduced_copy(target: Path) -> None:
    reduce_copy(REPO, target)


class World:
    """A repository on GitHub, as seen by act: its git history, the stand-ins' state. By default the reduced copy of
    this one; `fill` makes another (an adopting repository, ci/test_adoption.py)."""

    def __init__(self, root: Path, python: Path, fill: Callable[[Path], None] = reduced_copy) -> None:
        self.root = root
        self.repo = root / "repo"
        self.state = root / "state"
        self.python = python
        self.runs = 0
        self.main_push: int | None = None  # the run of the push to main whose caches pull requests read
        for folder in (self.repo, self.state / "cache", self.state / "artifacts"):
            folder.mkdir(parents=True)
        fill(self.repo)
        git(self.repo, "init", "--quiet", "--initial-branch", "main")
        git(self.repo, "add", "--all")
        git(self.repo, "commit", "--quiet", "-m", "main")
        git(self.repo, "remote", "add", "origin", f"https://github.com/{REPOSITORY}.git")
        git(self.repo, "update-ref", "refs/remotes/origin/main", "HEAD")
        self.github({"pulls": {}, "branches": {"main": self.sha("main")}, "comments": [], "statuses": []})

    def sha(self, ref: str = "HEAD") -> str:
        return git(self.repo, "rev-parse", ref)

    def github(self, value: dict[str, Any] | None = None) -> dict[str, Any]:
        """The fake GitHub's state (pull requests, branches, comments, statuses); written when given."""
        path = self.state / "github.json"
        if value is not None:
            path.write_text(json.dumps(value, indent=1))
        return json.loads(path.read_text())

    def calls(self, run: int | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """The stand-ins' records (cache saves, uploads, gh calls), of one run or all."""
        path = self.state / "calls.jsonl"
        entries = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return [e for e in entries if (run is None or e["run"] == str(run)) and (kind is None or e["kind"] == kind)]

    def artifact(self, run: int, name: str) -> Path:
        return self.state / "artifacts" / str(run) / name

    def seed_venvs(self, sessions: Iterable[str]) -> None:
        """Main's cache as a push to main leaves it: each session's venv under the key the workflow computes.
        They are this checkout's own venvs (made by `nox --install-only` before the scenarios), linked, not built
        again: a venv runs from any path here because the sessions call tools as `python -m`."""
        version = platform.python_version()
        for session in sessions:
            lock = SESSION_LOCKS.get(session, "requirements.txt")
            key = f"nox-{session}-Linux-py{version}-{hash_files(self.repo / lock)}"
            shutil.copytree(REPO / ".nox" / session, self.state / "cache" / key / ".nox" / session,
                            copy_function=link_or_copy, symlinks=True)  # fmt: skip

    def pull_request(self, number: int, change: Mapping[str, tuple[str, str]] | None = None) -> str:
        """A pull request from a fork: its head commit (the files' `old -> new` replacements, or none), and the
        merge commit GitHub checks out for it as HEAD (first parent: main). Returns the head's SHA."""
        git(self.repo, "checkout", "--quiet", "-B", f"pr-{number}", "main")
        for name, (old, new) in (change or {}).items():
            path = self.repo / name
            text = path.read_text()
            assert text.count(old) == 1, f"{name}: {old!r} is not there exactly once"
            path.write_text(text.replace(old, new))
        git(self.repo, "commit", "--quiet", "--allow-empty", "--all", "-m", f"pull request {number}")
        return self.merge(number)

    def merge(self, number: int) -> str:
        """The merge commit GitHub checks out for pull request `number` at its branch's head (first parent: main);
        returns the head's SHA."""
        git(self.repo, "checkout", "--quiet", f"pr-{number}")
        head = self.sha()
        git(self.repo, "checkout", "--quiet", "--detach", "main")
        git(self.repo, "merge", "--quiet", "--no-ff", "-m", f"Merge {head} into main", head)
        state = self.github()
        state["pulls"][str(number)] = {"number": number, "head": {"sha": head, "repo": {"full_name": FORK}}}
        self.github(state)
        return head

    def on_main(self) -> None:
        self.checkout("main")

    def branch(self, name: str) -> None:
        """A branch of the repository at HEAD (`gpu-dispatch`, kept at main's head)."""
        git(self.repo, "branch", "--force", name)

    def checkout(self, ref: str) -> None:
        git(self.repo, "checkout", "--quiet", ref)

    def run(self, workflow: str, event: str, payload: Mapping[str, Any], *, job: str | None = None,
            env: Mapping[str, str] | None = None,
            variables: Mapping[str, str] | None = None) -> tuple[int, Run]:  # fmt: skip
        """One run of `workflow` for `event` with act; returns its run id (GITHUB_RUN_ID) and what act said.
        `variables`: the repository's configuration variables (`vars.NAME`)."""
        self.runs += 1
        run_id = self.runs
        event_file = self.root / f"event-{run_id}.json"
        event_file.write_text(json.dumps(payload))
        given = {"STAND_IN": str(CI / "stand_in.py"), "STAND_IN_STATE": str(self.state),
                 "STAND_IN_PYTHON": str(self.python), "STAND_IN_REPOSITORY": str(self.repo),
                 "GITHUB_RUN_ID": str(run_id), **(env or {})}  # fmt: skip
        command = [str(Path(sys.prefix) / "bin" / "act"), event, "--eventpath", str(event_file),
                   "--workflows", str(self.repo / ".github" / "workflows" / workflow), "--json",
                   "--no-cache-server", "--concurrent-jobs", "1", "--action-offline-mode",
                   "--action-cache-path", str(self.root / "act"), *stand_in_repositories(),
                   "--secret", "GITHUB_TOKEN=stand-in-token"]  # fmt: skip  # github.token, which gh requires
        command += [argument for label in RUNNER_LABELS for argument in ("-P", f"{label}=-self-hosted")]
        command += [argument for name, value in given.items() for argument in ("--env", f"{name}={value}")]
        command += [argument for name, value in (variables or {}).items() for argument in ("--var", f"{name}={value}")]
        command += ["--job", job] if job else []
        process = subprocess.run(command, cwd=self.repo, env=runner_environment(os.environ), capture_output=True,
                                 text=True, timeout=600)  # fmt: skip
        log = [json.loads(line) for line in process.stdout.splitlines() if line.startswith("{")]
        (self.root / f"run-{run_id}.jsonl").write_text(process.stdout + process.stderr)
        return run_id, Run(process.returncode, log)
