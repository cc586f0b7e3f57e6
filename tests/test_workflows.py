"""The GitHub workflows, checked offline: triggers, runners, pinning, permissions, and the nox
sessions they call. Nothing here can reach GitHub, so every property the workflows promise
(docs/ci.md) is asserted on their parsed YAML."""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = REPO / ".github" / "workflows"
GPU_LABELS = ["self-hosted", "linux", "x64", "gpu"]
GPU_LABEL = "gpu-ci"
FORK_GUARD = "github.event.pull_request.head.repo.full_name == github.repository"
# Contexts an outside contributor can set: they may only reach a shell through `env:`.
UNTRUSTED = re.compile(r"github\.event\.|inputs\.|github\.head_ref")
PINNED_USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<action>[\w.-]+/[\w./-]+)@(?P<ref>\S+)(?P<comment>\s*#.*)?$")


def load(path: Path) -> dict[str, Any]:
    workflow = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as the boolean True.
    if True in workflow:
        workflow["on"] = workflow.pop(True)
    return workflow


def workflow_files() -> list[Path]:
    return sorted(WORKFLOWS.glob("*.y*ml"))


def workflows() -> dict[str, dict[str, Any]]:
    return {path.name: load(path) for path in workflow_files()}


def triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    on = workflow["on"]
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    return {name: config or {} for name, config in on.items()}


def steps(workflow: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for job_name, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield job_name, step


def run_blocks(workflow: dict[str, Any]) -> list[str]:
    return [step["run"] for _, step in steps(workflow) if "run" in step]


def strings_with_paths(node: Any, path: tuple = ()) -> Iterator[tuple[tuple, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from strings_with_paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from strings_with_paths(value, (*path, index))
    elif isinstance(node, str):
        yield path, node


def nox_sessions_called(shell: str) -> list[str]:
    """Session names after `-s`/`--session(s)` of every `nox` command in a shell script."""
    lexer = shlex.shlex(shell, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    tokens = list(lexer)
    names = []
    for start, token in enumerate(tokens):
        if token != "nox":
            continue
        rest = tokens[start + 1 :]
        for index, arg in enumerate(rest):
            if arg == "--" or not re.fullmatch(r"[\w./=-]+", arg):
                break
            if arg in ("-s", "--session", "--sessions"):
                for name in rest[index + 1 :]:
                    if name.startswith("-") or not re.fullmatch(r"[\w.-]+", name):
                        break
                    names.append(name)
    return names


def noxfile_sessions() -> set[str]:
    """Every session noxfile.py declares: the function name, or its `name=`."""
    sessions = set()
    for node in ast.walk(ast.parse((REPO / "noxfile.py").read_text())):
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            target = call.func if call else decorator
            if ast.unparse(target) not in ("nox.session", "session"):
                continue
            names = [kw.value.value for kw in (call.keywords if call else []) if kw.arg == "name"]
            sessions.add(names[0] if names else node.name)
    return sessions


def test_the_three_workflows_exist_and_parse():
    names = set(workflows())
    assert {"static.yml", "regen.yml", "gpu.yml"} <= names, f"workflows found: {sorted(names)}"
    for name, workflow in workflows().items():
        assert workflow.get("on") and workflow.get("jobs"), f"{name}: no triggers or no jobs"


def test_triggers():
    found = workflows()
    static = triggers(found["static.yml"])
    assert set(static) == {"pull_request", "push"}
    assert static["push"]["branches"] == ["main"]
    regen = triggers(found["regen.yml"])
    assert set(regen) == {"workflow_dispatch"}
    filter_input = regen["workflow_dispatch"]["inputs"]["filter"]
    assert filter_input["required"] is False and filter_input["type"] == "string"
    gpu = triggers(found["gpu.yml"])
    assert set(gpu) == {"push", "workflow_dispatch", "pull_request"}
    assert gpu["push"]["branches"] == ["main"]
    assert "labeled" in gpu["pull_request"]["types"], "applying the label must start the GPU run"


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_no_privileged_pull_request_triggers(name):
    """pull_request_target and workflow_run run with the base repository's secrets and tokens."""
    assert not set(triggers(load(WORKFLOWS / name))) & {"pull_request_target", "workflow_run"}


def test_gpu_job_runs_only_on_labelled_branches_of_this_repository():
    jobs = workflows()["gpu.yml"]["jobs"]
    assert len(jobs) == 1
    job = next(iter(jobs.values()))
    assert job["runs-on"] == GPU_LABELS
    condition = " ".join(job["if"].split())
    # Other events pass; a pull request needs all three clauses.
    assert condition.startswith("github.event_name != 'pull_request' || (")
    assert FORK_GUARD in condition
    assert f"contains(github.event.pull_request.labels.*.name, '{GPU_LABEL}')" in condition
    assert f"github.event.label.name == '{GPU_LABEL}'" in condition, "adding another label must not rerun it"


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_self_hosted_runners_never_see_forks(name):
    workflow = load(WORKFLOWS / name)
    for job_name, job in workflow["jobs"].items():
        labels = job["runs-on"] if isinstance(job["runs-on"], list) else [job["runs-on"]]
        if "self-hosted" not in labels:
            assert all(str(label).startswith("ubuntu-") for label in labels), f"{name}:{job_name}: {labels}"
            continue
        assert labels == GPU_LABELS, f"{name}:{job_name}: self-hosted jobs use exactly {GPU_LABELS}"
        if "pull_request" in triggers(workflow):
            assert FORK_GUARD in " ".join(job.get("if", "").split()), f"{name}:{job_name}: no fork guard"


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_actions_pinned_by_commit_with_version_comment(path):
    lines = [line for line in path.read_text().splitlines() if re.match(r"^\s*(?:-\s+)?uses:", line)]
    assert lines, f"{path.name}: no action used"
    for line in lines:
        match = PINNED_USES.match(line)
        assert match, f"{path.name}: cannot read `{line.strip()}`"
        assert re.fullmatch(r"[0-9a-f]{40}", match["ref"]), f"{path.name}: not pinned to a commit: {line.strip()}"
        assert match["comment"] and re.fullmatch(r"\s*# v\d+(\.\d+)*", match["comment"]), (
            f"{path.name}: a pinned action needs its version as a comment (`# vX.Y.Z`): {line.strip()}"
        )


def test_one_commit_per_action_across_workflows():
    pins: dict[str, set[str]] = {}
    for path in workflow_files():
        for line in path.read_text().splitlines():
            match = PINNED_USES.match(line)
            if match:
                pins.setdefault(match["action"], set()).add(f"{match['ref']}{match['comment']}")
    assert pins and all(len(refs) == 1 for refs in pins.values()), pins


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_permissions_read_only(name):
    workflow = load(WORKFLOWS / name)
    assert "permissions" in workflow, f"{name}: top-level permissions missing (the default may be write-all)"
    scopes = [workflow["permissions"]] + [
        job["permissions"] for job in workflow["jobs"].values() if "permissions" in job
    ]
    for scope in scopes:
        assert isinstance(scope, dict), f"{name}: permissions must list scopes, got {scope!r}"
        assert set(scope.values()) <= {"read", "none"}, f"{name}: write permission {scope}"
    assert workflow["permissions"].get("contents") in ("read", "none")


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_checkout_drops_credentials(name):
    checkouts = [
        step for _, step in steps(load(WORKFLOWS / name)) if step.get("uses", "").startswith("actions/checkout@")
    ]
    assert checkouts, f"{name}: no checkout"
    for step in checkouts:
        assert step.get("with", {}).get("persist-credentials") is False, f"{name}: persist-credentials: false missing"


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_every_job_has_a_timeout(name):
    for job_name, job in load(WORKFLOWS / name)["jobs"].items():
        timeout = job.get("timeout-minutes")
        assert isinstance(timeout, int) and 0 < timeout <= 60, f"{name}:{job_name}: timeout-minutes {timeout!r}"


def test_concurrency_cancels_superseded_pull_request_runs_but_never_gpu_runs():
    found = workflows()
    static = found["static.yml"]["concurrency"]
    assert "github.event.pull_request.number" in static["group"]
    assert static["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}", "runs on main must finish"
    for name in ("static.yml", "regen.yml"):
        assert "group" in found[name].get("concurrency", {}), f"{name}: no concurrency group"


def test_every_push_to_main_gets_its_own_static_run():
    """One pending run per group: pushes sharing a group would cancel the pending middle one."""
    group = workflows()["static.yml"]["concurrency"]["group"]
    assert group.endswith("|| github.sha }}"), f"pushes must fall back to their commit, not the branch: {group}"
    assert "github.ref" not in group


def test_gpu_concurrency_is_on_the_job_so_skipped_events_cannot_cancel_a_gpu_run():
    gpu = workflows()["gpu.yml"]
    assert "concurrency" not in gpu, "a workflow-level group is joined before the job's if: is evaluated"
    (job,) = gpu["jobs"].values()
    assert job["concurrency"]["cancel-in-progress"] is False
    assert "group" in job["concurrency"]


def test_a_pull_request_opened_with_the_label_is_gpu_checked_once():
    """Opening a labelled pull request fires `opened` and `labeled`; only one may start the job."""
    types = triggers(workflows()["gpu.yml"])["pull_request"]["types"]
    assert "opened" not in types and {"labeled", "synchronize", "reopened"} <= set(types)


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_no_expression_inside_run(name):
    """`${{ }}` in a script is pasted in before the shell parses it; values go through env: instead."""
    for job_name, step in steps(load(WORKFLOWS / name)):
        assert "${{" not in step.get("run", ""), f"{name}:{job_name}: `${{{{ }}}}` inside run: {step['run']!r}"


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_untrusted_contexts_only_in_env_if_and_concurrency(name):
    for path, text in strings_with_paths(load(WORKFLOWS / name)):
        for expression in re.findall(r"\$\{\{(.*?)\}\}", text, flags=re.S):
            if not UNTRUSTED.search(expression):
                continue
            where = [str(part) for part in path]
            # env values reach a shell as data; `if:` and the concurrency group are evaluated by GitHub.
            safe = where[-2:-1] == ["env"] or where[-1] == "if" or where[:2] == ["concurrency", "group"]
            assert safe, f"{name}: {'.'.join(where)} expands {expression.strip()!r}"


def test_nox_sessions_called_exist_in_noxfile():
    declared = noxfile_sessions()
    assert {"static", "regen-golden", "tests"} <= declared, f"noxfile.py sessions: {sorted(declared)}"
    ci_run = nox_sessions_called((REPO / ".ci" / "run").read_text())
    per_workflow = {
        name: {session for block in run_blocks(workflow) for session in nox_sessions_called(block)}
        for name, workflow in workflows().items()
    }
    assert per_workflow["static.yml"] == {"static", "tests", "lint"}
    assert per_workflow["regen.yml"] == {"regen-golden"}
    assert per_workflow["gpu.yml"] == {"gpu"}
    assert set(ci_run) == {"static", "tests", "lint"}
    missing = sorted(set(ci_run).union(*per_workflow.values()) - declared)
    assert not missing, f"workflows or .ci/run call nox sessions that noxfile.py does not declare: {missing}"


def test_nox_command_parser():
    assert nox_sessions_called('nox -s static -- --shard "$SHARD" -k x') == ["static"]
    assert nox_sessions_called("set -e\nnox --no-venv --no-install -s gpu -- --out d") == ["gpu"]
    assert nox_sessions_called("nox -s static tests lint") == ["static", "tests", "lint"]
    assert nox_sessions_called('if [ -n "$F" ]; then nox -s regen-golden -- -k "$F"; fi') == ["regen-golden"]
    assert nox_sessions_called("echo nox # nox -s hidden") == []


NOX_LOCK_INSTALL = "python -m pip install --require-hashes -r requirements-nox.txt"
# The lock each CPU job's session installs (noxfile.py; tests/test_locks.py checks the sessions).
SESSION_LOCK = {"static": "requirements.txt", "tests": "requirements.txt", "lint": "requirements-lint.txt"}
MAIN_PUSH = ("github.event_name == 'push'", "github.ref == 'refs/heads/main'")


def test_nox_comes_from_its_hashed_lock_everywhere():
    """The workflows and .ci/run install nox by hash; README's set-up command pins the same nox."""
    assert (
        "python3 -m pip install --quiet --require-hashes -r requirements-nox.txt" in (REPO / ".ci" / "run").read_text()
    )
    locked = re.search(r"^nox==(\S+)", (REPO / "requirements-nox.txt").read_text(), re.M)
    readme = re.search(r"pip install nox==(\S+)", (REPO / "README.md").read_text())
    assert locked and readme and readme[1] == locked[1], "README's set-up command and requirements-nox.txt disagree"
    for name, workflow in workflows().items():
        if name == "gpu.yml":  # the runner's own Python brings nox (docs/ci.md)
            continue
        for job_name, job in workflow["jobs"].items():
            runs = _commands(job)
            first_nox = next(i for i, run in enumerate(runs) if nox_sessions_called(run))
            assert NOX_LOCK_INSTALL in runs[:first_nox], f"{name}:{job_name}: nox not installed from its lock"


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_workflows_install_only_hashed_locks_and_name_no_second_index(name):
    """torch's CPU index is the noxfile's, for torch alone: no job may widen pip's sources."""
    text = (WORKFLOWS / name).read_text()
    for setting in ("PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_FIND_LINKS", "index-url", "find-links"):
        assert setting not in text, f"{name}: {setting}"
    for run in run_blocks(load(WORKFLOWS / name)):
        for line in run.splitlines():
            if "pip install" in line:
                assert re.search(r"--require-hashes -r requirements[\w-]*\.txt$", line), f"{name}: {line.strip()}"


def _cache_steps(job: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [step for step in job["steps"] if step.get("uses", "").startswith(f"actions/cache/{kind}@")]


@pytest.mark.parametrize("name", [path.name for path in workflow_files()])
def test_no_cache_is_written_behind_the_workflows_back(name):
    """actions/cache (restore + save in its post step) and setup-python's `cache:` save on any event."""
    for job_name, step in steps(load(WORKFLOWS / name)):
        uses = step.get("uses", "")
        assert not re.match(r"actions/cache@", uses), f"{name}:{job_name}: use actions/cache/restore and /save"
        if uses.startswith("actions/setup-python@"):
            assert "cache" not in step.get("with", {}), (
                f"{name}:{job_name}: setup-python's cache saves on pull requests"
            )


def test_cpu_jobs_restore_their_venv_keyed_on_lock_and_python_before_installing():
    for job_name, job in _static_jobs().items():
        (session,) = {s for run in _commands(job) for s in nox_sessions_called(run)}
        (restore,) = _cache_steps(job, "restore")
        assert restore["with"]["path"] == f".nox/{session}", f"{job_name}: restores {restore['with']['path']}"
        key = restore["with"]["key"]
        for part in ("${{ runner.os }}", "${{ steps.python.outputs.python-version }}",
                     f"${{{{ hashFiles('{SESSION_LOCK[session]}') }}}}"):  # fmt: skip
            assert part in key, f"{job_name}: cache key {key} lacks {part}"
        setup = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/setup-python@"))
        assert setup.get("id") == "python"
        order = [step.get("run", step.get("uses", "")) for step in job["steps"]]
        installs = [i for i, step in enumerate(order) if step == f"nox --install-only -s {session}"]
        checks = [i for i, step in enumerate(order) if step.startswith(f"nox -s {session} --no-install")]
        assert installs and checks, f"{job_name}: install the venv, then run the session without reinstalling"
        assert job["steps"].index(restore) < installs[0] < checks[0]


def test_caches_are_written_only_by_pushes_to_main_never_by_pull_requests():
    saves = 0
    for name, workflow in workflows().items():
        for job_name, job in workflow["jobs"].items():
            for save in _cache_steps(job, "save"):
                saves += 1
                condition = " ".join(save["if"].split())
                assert all(clause in condition for clause in MAIN_PUSH) and "||" not in condition, (
                    f"{name}:{job_name}: a save step must require a push to main: {condition}"
                )
                (restore,) = _cache_steps(job, "restore")
                assert save["with"]["path"] == restore["with"]["path"]
                assert (
                    save["with"]["key"]
                    == "${{ steps.venv.outputs.cache-primary-key }}"
                    == ("${{ steps." + restore["id"] + ".outputs.cache-primary-key }}")
                )
                assert "steps.venv.outputs.cache-hit != 'true'" in condition, "an existing key is never rewritten"
                order = [step.get("run", "") for step in job["steps"]]
                assert job["steps"].index(save) < next(i for i, run in enumerate(order) if "--no-install" in run), (
                    "saved after the install, before the checks: a failing check still leaves the venv cached"
                )
    jobs = _static_jobs()
    golden_save = _cache_steps(jobs["golden"], "save")[0]["if"]
    assert "matrix.shard == 1" in golden_save, "one shard writes the shared key; the others would race it"
    assert not _cache_steps(jobs["orphans"], "save"), "the orphan job shares the shards' venv"
    assert saves == 3


def _static_jobs() -> dict[str, Any]:
    return workflows()["static.yml"]["jobs"]


def _commands(job: dict[str, Any]) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def test_static_shards_plus_orphan_job_cover_every_check_once(golden_session):
    jobs = _static_jobs()
    shards = jobs["golden"]["strategy"]["matrix"]["shard"]
    assert list(jobs["golden"]["strategy"]["matrix"]) == ["shard"], "strategy.job-total must equal the shard count"
    assert shards == list(range(1, len(shards) + 1)) and len(shards) >= 2
    assert jobs["golden"]["env"]["SHARD"] == "${{ matrix.shard }}/${{ strategy.job-total }}"
    assert jobs["golden"]["strategy"]["fail-fast"] is False, "every shard reports its failures"
    assert any('--shard "$SHARD"' in run for run in _commands(jobs["golden"]))
    assert any("-k no_orphans" in run and "--shard" not in run for run in _commands(jobs["orphans"]))

    def collected(*args: str) -> list[str]:
        result = golden_session("--collect-only", "-q", *args)
        return [line.split("::", 1)[1] for line in result.stdout.lines if "::" in line]

    everything = collected()
    selections = [collected("--shard", f"{i}/{len(shards)}") for i in shards] + [collected("-k", "no_orphans")]
    assert selections[-1] == ["test_no_orphans"]
    assert all(selections), "a shard with nothing to check fails (empty selection)"
    combined = [item for selection in selections for item in selection]
    assert sorted(combined) == sorted(everything) and len(everything) > len(shards)


@pytest.mark.parametrize("job_name", ["golden", "orphans"])
def test_static_failure_reports_through_the_harness(job_name):
    job = _static_jobs()[job_name]
    commands = _commands(job)
    junit = re.search(r"--junitxml=(\S+)", next(run for run in commands if "nox -s static" in run))
    assert junit, f"{job_name}: the static run writes no JUnit XML"
    summary = [step for step in job["steps"] if "scripts/ci_summary.py" in step.get("run", "")]
    assert len(summary) == 1 and summary[0]["if"] == "${{ !cancelled() }}"
    assert shlex.split(summary[0]["run"])[1:3] == ["scripts/ci_summary.py", junit[1]]
    assert (REPO / "scripts" / "ci_summary.py").is_file()
    upload = [step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert len(upload) == 1 and upload[0]["if"] == "${{ failure() }}"
    assert junit[1] in upload[0]["with"]["path"]
    # what the shards produced is uploaded; the orphan check produces nothing to upload
    assert ("build/golden-pending/" in upload[0]["with"]["path"]) == (job_name != "orphans")


def test_regen_forces_writes_under_ci_and_uploads_golden_and_patch():
    job = next(iter(workflows()["regen.yml"]["jobs"].values()))
    regen_step = next(step for step in job["steps"] if "regen-golden" in step.get("run", ""))
    assert regen_step["env"]["FILTER"] == "${{ inputs.filter }}"
    assert all("--force-regen-under-ci" in line for line in regen_step["run"].splitlines() if "nox " in line)
    assert '-k "$FILTER"' in regen_step["run"]
    upload = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact@"))
    paths = upload["with"]["path"].split()
    assert "golden/" in paths and any(path.endswith(".patch") for path in paths)
    assert any("git diff" in run and ".patch" in run for run in _commands(job))


def test_gpu_job_runs_the_session_in_the_runner_python_and_uploads_its_report():
    job = next(iter(workflows()["gpu.yml"]["jobs"].values()))
    runs = [run for run in _commands(job) if "nox" in run]
    assert len(runs) == 1 and runs[0].startswith("nox --no-venv --no-install -s gpu -- ")
    folder = job["env"]["GPU_REPORT_DIR"]
    import gpu_check  # the session's entry script: its parser must accept what the workflow passes

    options = shlex.split(runs[0].split(" -- ", 1)[1].replace("$GPU_REPORT_DIR", folder))
    assert gpu_check.parse_args(options).output == Path(folder)
    upload = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["path"] == "${{ env.GPU_REPORT_DIR }}" and folder.startswith("build/")
    assert upload["if"] == "${{ !cancelled() }}", "a failing GPU run's report is the one most needed"


def test_each_shard_titles_its_summary_and_the_orphan_job_promises_no_produced_files():
    jobs = workflows()["static.yml"]["jobs"]
    summaries = {name: next(s["run"] for s in job["steps"] if "ci_summary.py" in s.get("run", "")) for name, job in
                 jobs.items() if any("ci_summary.py" in s.get("run", "") for s in job["steps"])}  # fmt: skip
    assert '--title "Golden snapshots, shard $SHARD"' in summaries["golden"]
    assert "--no-produced-files" in summaries["orphans"] and "--artifact" not in summaries["orphans"]
    uploads = [s for s in jobs["orphans"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert all("golden-pending" not in str(s["with"]["path"]) for s in uploads)


def test_dependabot_updates_the_action_pins_and_the_python_pins():
    config = load(REPO / ".github" / "dependabot.yml")
    assert {u["package-ecosystem"] for u in config["updates"]} == {"github-actions", "pip"}
    (pip,) = [u for u in config["updates"] if u["package-ecosystem"] == "pip"]
    # Dependabot recompiles a pip-compile lock found beside its .in file, in the directory it scans
    assert pip["directory"] == "/" and list(REPO.glob("requirements*.in")) and list(REPO.glob("requirements*.txt"))


def test_the_runner_instructions_work_for_a_real_runner():
    """docs/ci.md: root for the service, nvcc for TileLang, the job's PATH, a Node 24 runner."""
    text = (REPO / "docs" / "ci.md").read_text()
    assert "sudo ./svc.sh install <runner-user>" in text and "(`./svc.sh install &&" not in text
    assert "CUDA_HOME" in text and "nvcc" in text, "a runner without a CUDA toolkit cannot compile kernels"
    assert ".path" in text and "config.sh" in text, "the runner's PATH is saved when config.sh runs"
    assert "2.327.1" in text, "the pinned actions run on Node 24"
    assert "**set** Settings" in text, "approval for all external contributors is not the default"
