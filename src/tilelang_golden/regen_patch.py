"""The regressions a regen's patch records, judged by the default branch's harness with the patch read as data.

    python -m tilelang_golden.regen_patch PATCH FOLDER [--accept-regression CLASS[,CLASS]=REASON]

regen.yml's `patch` job runs the default branch's copy of this module (its `src/` on PYTHONPATH, or the harness its
settings pin), inside a checkout of the dispatched commit, before `.github/regen-patch-check`: the regen job ran the
commit's code, which may have been tampered with (a venv, its harness), so what it wrote is judged here by rules that
none of that code decides. The patch is applied to a temporary index only, and it is refused (exit 1) where

- a changed snapshot of a case (`<family>/<variant>/<target>.yaml` or `.machine.yaml`) shows a regression of a
  built-in class (tilelang_golden.regressions, old facts against new) whose case, class and kernel no record of the
  family's REGRESSIONS.yaml that the patch adds or changes names;
- a record the patch adds or changes is acknowledged by no one who may: `regen option` needs the dispatch's
  `accept_regression` input to name its class with that very reason; `variant declaration` needs the family's file
  in the dispatched commit, which the maintainer reviewed before dispatching, to hold that class and reason as a
  literal `acknowledged_regressions={...}` (read with `ast`, never run);
- COSTS.yaml changes the seconds of a case it already had (a regen only adds and drops records), or a snapshot, ledger
  or costs file it writes cannot be read.

Not judged: a family's own regression classes (its code, which this harness does not run), the records a patch drops
(a regen prunes those that no longer explain the snapshots, also of variants gone while their files remain), the
manifest and the summaries (the pull request's static check compares them with what its code makes). Run it with
`python -P`: the working directory is the commit's checkout, none of which may be imported.

Exit status: 0 nothing to refuse, 1 refused (one line per finding, then the verdict), 2 a usage error. Standard
library, PyYAML and tilelang_golden.regressions only: the patch job installs nothing else.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib
import yaml

from tilelang_golden.regressions import FACTS, MACHINE, REGRESSION_CLASSES, find_regressions

# The harness's names (tests/workflows/test_regen_patch_check.py holds them to the writers'): not imported, because
# their modules pull in the whole static check.
LEDGER = "REGRESSIONS.yaml"
COSTS = "COSTS.yaml"
RECORD_KEYS = ("case", "class", "kernel", "change", "reason", "acknowledged_by", "tilelang")
BY_OPTION, BY_DECLARATION = "regen option", "variant declaration"
# Which facts file each kind of measure reads (tilelang_golden.static.snapshots.case_files).
READS = {".machine.yaml": MACHINE, ".yaml": FACTS}
DROPPED_ENVIRONMENT = ("GIT_INDEX_FILE", "GIT_DIFF_OPTS", "GIT_EXTERNAL_DIFF", "GIT_DIR", "GIT_WORK_TREE")
Key = tuple[str, str, str]  # a record's case, class and kernel


class Refused(Exception):
    """The patch may not be applied; the message says why."""


def show(text: str) -> str:
    """A name from the patch for a log line: as it is when printable, else quoted; never a line break in it."""
    return text if text.isprintable() and '"' not in text else json.dumps(text)


def git(*args: str, index: Path | None = None) -> bytes:
    env = {name: value for name, value in os.environ.items() if name not in DROPPED_ENVIRONMENT}
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    done = subprocess.run(["git", *args], env=env, capture_output=True)
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines() or ["(no message)"]
        raise Refused(f"git {args[0]}: {show(message[0])}")
    return done.stdout


def blobs(listing: bytes, folder: str, column: int) -> dict[str, str]:
    """path under `folder` -> object id, from `git ls-tree -r -z` (`MODE TYPE ID\tPATH`, column 2) or
    `git ls-files -s -z` (`MODE ID STAGE\tPATH`, column 1)."""
    found = {}
    for entry in filter(None, listing.split(b"\0")):
        meta, _, path = entry.partition(b"\t")
        name = path.decode("utf-8", "surrogateescape")
        if name.startswith(f"{folder}/"):
            found[name[len(folder) + 1 :]] = meta.split()[column].decode()
    return found


def changed_files(patch: Path, folder: str) -> dict[str, tuple[str | None, str | None]]:
    """Each file under `folder` the patch changes (relative to it) -> its text before and after (None: absent)."""
    with tempfile.TemporaryDirectory(prefix="regen-patch-") as scratch:
        index = Path(scratch) / "index"
        git("read-tree", "HEAD", index=index)
        git("apply", "--cached", "--whitespace=nowarn", str(patch), index=index)
        old = blobs(git("ls-tree", "-r", "-z", "HEAD", "--", folder), folder, 2)
        new = blobs(git("ls-files", "-s", "-z", "--", folder, index=index), folder, 1)

        def text(blob: str | None) -> str | None:
            return None if blob is None else git("cat-file", "blob", blob).decode("utf-8", "replace")

        paths = sorted(path for path in old.keys() | new.keys() if old.get(path) != new.get(path))
        return {path: (text(old.get(path)), text(new.get(path))) for path in paths}


def accepted_classes(value: str) -> dict[str, str]:
    """class -> reason from the dispatch's `accept_regression` input (`CLASS[,CLASS]=REASON`, empty: none), read as
    the regen reads `--accept-regression` (tilelang_golden.static.options)."""
    names, _, reason = value.partition("=")
    if not value.strip():
        return {}
    return {name.strip(): reason.strip() for name in names.split(",") if name.strip()}


def read_head(path: str) -> str | None:
    """A file of the dispatched commit, or None where it has none."""
    if not git("ls-tree", "--name-only", "HEAD", "--", path).strip():
        return None
    return git("cat-file", "blob", f"HEAD:{path}").decode("utf-8", "replace")


def family_files(family: str) -> list[str]:
    """The family's module in the dispatched commit: `<package>/<family>.py` of each package of its `families` setting
    (default `kernels`), at the root or below it (`src/acme/ops/<family>.py`)."""
    settings = read_head("pyproject.toml")
    try:
        section = tomllib.loads(settings or "").get("tool", {}).get("tilelang-golden", {})
    except tomllib.TOMLDecodeError:
        section = {}
    packages = section.get("families") if isinstance(section.get("families"), list) else ["kernels"]
    wanted = [f"{str(package).replace('.', '/')}/{family}.py" for package in packages]
    names = git("ls-tree", "-r", "-z", "--name-only", "HEAD").decode("utf-8", "surrogateescape").split("\0")
    return [name for name in names if any(name == w or name.endswith(f"/{w}") for w in wanted)]


def literal_acknowledgements(node: ast.expr) -> set[tuple[str, str]]:
    """(class, reason) of a literal `{class: reason}`; nothing where the expression is no literal."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return set()
    if not isinstance(value, dict):
        return set()
    return {(k, v.strip()) for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


@functools.cache
def declared_acknowledgements(family: str) -> frozenset[tuple[str, str]]:
    """Every (class, reason) that the family's file in the dispatched commit gives as `acknowledged_regressions=`, a
    literal dict or a module-level name bound to one. Parsed, never run: it is the commit's code."""
    pairs: set[tuple[str, str]] = set()
    for path in family_files(family):
        try:
            tree = ast.parse(read_head(path) or "")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        bound = {target.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                 for target in node.targets if isinstance(target, ast.Name)}  # fmt: skip
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "acknowledged_regressions":
                value = bound.get(node.value.id, node.value) if isinstance(node.value, ast.Name) else node.value
                pairs |= literal_acknowledgements(value)
    return frozenset(pairs)


def parse_records(text: str | None) -> dict[Key, Mapping[str, Any]]:
    """A ledger's records by case, class and kernel (none where there is no file); ValueError where it is no ledger."""
    try:
        records = yaml.safe_load(text) if text and text.strip() else []
    except yaml.YAMLError:
        records = None
    if not isinstance(records, list) or not all(isinstance(r, dict) and set(r) == set(RECORD_KEYS) for r in records):
        raise ValueError(f"not a ledger of acknowledged regressions (a list of records {list(RECORD_KEYS)})")
    return {(str(r["case"]), str(r["class"]), str(r["kernel"])): r for r in records}


@dataclass
class Judgement:
    """What the patch's regressions and records came to: the findings that refuse it, and what passed."""

    folder: str  # the snapshot folder, which the paths in the findings start with
    refusals: list[str] = field(default_factory=list)
    written: set[Key] = field(default_factory=set)  # the records the patch adds or changes, each acknowledged
    regressions: int = 0


def judge_record(family: str, record: Mapping[str, Any], accepted: Mapping[str, str], judgement: Judgement) -> None:
    """A record the patch adds or changes: acknowledged by the dispatch's input or the reviewed family's file."""
    case, name, kernel = str(record["case"]), str(record["class"]), str(record["kernel"])
    reason, by = str(record["reason"]).strip(), str(record["acknowledged_by"])
    where = f"{judgement.folder}/{family}/{LEDGER}: {show(case)} {show(name)} {show(kernel)}"
    if not case.startswith(f"{family}/"):
        problem = "a case of another family"
    elif by == BY_OPTION and name not in accepted:
        problem = f"'{BY_OPTION}', but the dispatch's accept_regression does not name {show(name)}"
    elif by == BY_OPTION and accepted[name] != reason:
        problem = f"'{BY_OPTION}' with a reason that is not the one the dispatch's accept_regression gives"
    elif by == BY_DECLARATION and (name, reason) not in declared_acknowledgements(family):
        problem = (
            f"'{BY_DECLARATION}', but the family's file in the dispatched commit declares no "
            f"acknowledged_regressions={{{name!r}: <this reason>}} as a literal"
        )
    elif by not in (BY_OPTION, BY_DECLARATION):
        problem = f"acknowledged by {show(by)}, which is neither '{BY_OPTION}' nor '{BY_DECLARATION}'"
    else:
        judgement.written.add((case, name, kernel))
        return
    judgement.refusals.append(f"refused record {where}: {problem}")


def judge_ledgers(changed: Mapping[str, tuple[str | None, str | None]], accepted: Mapping[str, str],
                  judgement: Judgement) -> None:  # fmt: skip
    """Every record that a changed `<family>/REGRESSIONS.yaml` adds or changes."""
    for path, (old, new) in changed.items():
        family, _, name = path.partition("/")
        if name != LEDGER:
            continue
        try:
            before, after = parse_records(old), parse_records(new)
        except ValueError as error:
            judgement.refusals.append(f"refused {judgement.folder}/{show(path)}: {error}")
            continue
        for key, record in after.items():
            if before.get(key) != record:
                judge_record(family, record, accepted, judgement)


def facts_document(text: str) -> dict[str, Any]:
    """A facts or machine facts file as the regressions' measures read it; ValueError where it is none."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        document = None
    if not isinstance(document, dict) or not isinstance(document.get("kernels"), list):
        raise ValueError("not a facts file (a mapping with a list of kernels)")
    if not all(isinstance(kernel, dict) and isinstance(kernel.get("name"), str) for kernel in document["kernels"]):
        raise ValueError("a kernel without its name")
    return document


def judge_snapshots(changed: Mapping[str, tuple[str | None, str | None]], judgement: Judgement) -> None:
    """Every regression of a built-in class from a case's old facts to its new ones needs a record the patch wrote."""
    for path, (old, new) in changed.items():
        suffix = next((suffix for suffix in READS if path.endswith(suffix)), None)
        if suffix is None or path.count("/") != 2 or old is None or new is None:
            continue  # a first snapshot has nothing to be worse than; a deleted one nothing to be worse
        case = path[: -len(suffix)]
        try:
            before = facts_document(old)
        except ValueError:
            continue  # the commit's own snapshot was unreadable: the regen rewrote it, nothing to compare with
        try:
            found = find_regressions(READS[suffix], before, facts_document(new), REGRESSION_CLASSES)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as error:
            judgement.refusals.append(f"refused {judgement.folder}/{show(path)}: cannot be read as facts ({error})")
            continue
        for regression in found:
            judgement.regressions += 1
            if (case, regression.name, regression.kernel) not in judgement.written:
                judgement.refusals.append(
                    f"refused {judgement.folder}/{show(path)}: a regression ({regression.name}: "
                    f"{show(regression.line())}) with no "
                    f"acknowledged record of {show(case)} {regression.name} {show(regression.kernel)} in "
                    f"{case.split('/')[0]}/{LEDGER}"
                )


def cost_records(text: str | None) -> dict[str, Any] | None:
    """COSTS.yaml's `seconds` (case -> seconds), None where it is not one."""
    try:
        document = yaml.safe_load(text or "")
    except yaml.YAMLError:
        return None
    seconds = document.get("seconds") if isinstance(document, dict) else None
    return seconds if isinstance(seconds, dict) else None


def judge_costs(changed: Mapping[str, tuple[str | None, str | None]], judgement: Judgement) -> None:
    """A regen adds the records of cases that have none and drops those of cases no family has; it never moves one
    (only `tilelang-golden costs --record`, a person's command, does)."""
    if COSTS not in changed:
        return
    old, new = changed[COSTS]
    before, after = cost_records(old) or {}, cost_records(new)
    if after is None:
        judgement.refusals.append(
            f"refused {judgement.folder}/{COSTS}: deleted, or not a mapping of cases to seconds under `seconds:`"
        )
        return
    moved = sorted(case for case in before.keys() & after.keys() if before[case] != after[case])
    if moved:
        shown = ", ".join(f"{show(str(case))} {before[case]} -> {after[case]}" for case in moved[:5])
        judgement.refusals.append(
            f"refused {judgement.folder}/{COSTS}: a regen never changes a case's recorded seconds: {shown}"
        )


def judge_patch(patch: Path, folder: str, accepted: Mapping[str, str]) -> Judgement:
    """The patch's regressions, ledger records and costs, judged; git applies it to a temporary index only."""
    # A regen that changed nothing makes an empty patch, which git refuses to apply ("no valid patches").
    changed = changed_files(patch, folder) if patch.stat().st_size else {}
    judgement = Judgement(show(folder))
    judge_ledgers(changed, accepted, judgement)
    judge_snapshots(changed, judgement)
    judge_costs(changed, judgement)
    return judgement


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilelang_golden.regen_patch", description=__doc__.split("\n")[0])
    parser.add_argument("patch", type=Path)
    parser.add_argument("folder", help="the snapshot folder, as the default branch sets it")
    parser.add_argument("--accept-regression", default="", metavar="CLASS[,CLASS]=REASON",
                        help="the dispatch's accept_regression input (empty: none)")  # fmt: skip
    args = parser.parse_args(argv)
    folder = args.folder.rstrip("/")
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if not args.patch.is_file() or not folder or top.returncode != 0:
        print("regen_patch: give an existing PATCH and FOLDER, inside a checkout of the dispatched commit",
              file=sys.stderr)  # fmt: skip
        return 2
    patch = args.patch.resolve()
    os.chdir(top.stdout.strip())  # the patch's paths are the repository's
    try:
        judgement = judge_patch(patch, folder, accepted_classes(args.accept_regression))
    except Refused as refused:
        print(f"refused: {refused}")
        return 1
    if judgement.refusals:
        print("\n".join(judgement.refusals))
        print(f"refused: {len(judgement.refusals)} finding(s) in what the regen wrote, first: {judgement.refusals[0]}")
        return 1
    print(
        f"regressions: {judgement.regressions} in the changed snapshots, each with an acknowledged record; "
        f"{len(judgement.written)} record(s) added or changed, each acknowledged by the dispatch or the family"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
