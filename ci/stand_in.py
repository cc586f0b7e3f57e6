"""What the pinned actions do for a job, done on this machine: the stand-ins' one implementation.

Each `ci/actions/*/action.yml` calls one subcommand with its inputs in the environment (`INPUT_<NAME>`, as
GitHub hands inputs to an action). Everything they keep lies under $STAND_IN_STATE, which `ci/act.py`
makes for a series of runs:

    cache/<key>/<path>          what actions/cache/save stored under a key (restored by copying it back)
    artifacts/<run>/<name>/     what actions/upload-artifact uploaded in run <run> ($GITHUB_RUN_ID)
    calls.jsonl                 one line per cache save, artifact upload and `gh` call, for the scenarios

Standard library only: it runs on whatever Python a job has at that step.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys
from pathlib import Path


def state() -> Path:
    return Path(os.environ["STAND_IN_STATE"])


def record(kind: str, **fields: object) -> None:
    """One line of calls.jsonl: which run and job did what."""
    entry = {"kind": kind, "run": os.environ.get("GITHUB_RUN_ID"), "job": os.environ.get("GITHUB_JOB"), **fields}
    with (state() / "calls.jsonl").open("a") as calls:
        calls.write(json.dumps(entry) + "\n")


def inputs(name: str) -> str:
    return os.environ.get(f"INPUT_{name.upper()}", "").strip()


def lines(name: str) -> list[str]:
    return [line.strip() for line in inputs(name).splitlines() if line.strip()]


def output(name: str, value: str) -> None:
    with open(os.environ["GITHUB_OUTPUT"], "a") as out:
        out.write(f"{name}={value}\n")


def copy_tree(source: Path, destination: Path) -> None:
    """A copy whose files share their content with the source (hard links): a venv of a gigabyte costs nothing.
    Safe here because pip, nox and Python replace files rather than write into them."""
    if source.is_dir():
        shutil.copytree(source, destination, copy_function=link_or_copy, symlinks=True, dirs_exist_ok=True)
    else:
        destination.parent.mkdir(parents=True, exist_ok=True)
        link_or_copy(source, destination)


def link_or_copy(source: str | Path, destination: str | Path) -> None:
    try:
        os.link(source, destination)
    except OSError:  # another file system
        shutil.copy2(source, destination)


def cache_restore() -> int:
    """actions/cache/restore: the exact key, else the newest entry whose key starts with a restore key."""
    store = state() / "cache"
    key = inputs("key")
    found = key if (store / key).is_dir() else None
    for prefix in [] if found else lines("restore-keys"):
        candidates = [entry for entry in store.glob("*") if entry.name.startswith(prefix)]
        if candidates:
            found = max(candidates, key=lambda entry: entry.stat().st_mtime).name
            break
    output("cache-primary-key", key)
    output("cache-hit", str(found == key).lower())
    output("cache-matched-key", found or "")
    if found is None:
        print(f"Cache not found for input keys: {', '.join([key, *lines('restore-keys')])}")
        return 0
    for path in lines("path"):
        if (store / found / path).exists():
            copy_tree(store / found / path, Path(path))
    print(f"Cache restored from key: {found}")
    return 0


def cache_save() -> int:
    """actions/cache/save: a key is written once; saving it again is a warning, as on GitHub."""
    entry = state() / "cache" / inputs("key")
    if entry.exists():
        print(f"::warning::Failed to save: Unable to reserve cache with key {entry.name}: it exists.")
        return 0
    paths = [path for path in lines("path") if Path(path).exists()]
    if not paths:
        print("::warning::Path Validation Error: no path given to cache exists; nothing is saved.")
        return 0
    for path in paths:
        copy_tree(Path(path), entry / path)
    record("cache-save", key=entry.name, paths=paths)
    print(f"Cache saved with key: {entry.name}")
    return 0


def search_root(pattern: str) -> Path:
    """The part of a path pattern before its first wildcard: where upload-artifact searches."""
    parts = Path(pattern).parts
    plain = parts[: next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))]
    return Path(*plain) if plain else Path(".")


def upload_artifact() -> int:
    """actions/upload-artifact: the files the paths match, relative to the least common ancestor of the search
    paths (a single file: its folder), as the action stores them."""
    name, patterns = inputs("name") or "artifact", lines("path")
    files = sorted({Path(f) for p in patterns for f in glob.glob(p, recursive=True) if Path(f).is_file()} |
                   {f for p in patterns if Path(p).is_dir() for f in Path(p).rglob("*") if f.is_file()})  # fmt: skip
    if not files:
        message = f"No files were found with the provided path: {' '.join(patterns)}. No artifacts will be uploaded."
        behaviour = inputs("if-no-files-found") or "warn"
        if behaviour == "error":
            print(f"::error::{message}")
            return 1
        print(f"::warning::{message}" if behaviour == "warn" else message)
        return 0
    roots = [search_root(p).resolve() for p in patterns]
    roots = [root.parent if root.is_file() else root for root in roots]
    root = Path(os.path.commonpath(roots))
    destination = state() / "artifacts" / os.environ["GITHUB_RUN_ID"] / name
    if destination.exists():
        if inputs("overwrite") != "true":
            print(f"::error::Failed to CreateArtifact: an artifact with the name {name} already exists")
            return 1
        shutil.rmtree(destination)
    for file in files:
        target = destination / file.resolve().relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)
    record("upload-artifact", name=name, files=sorted(str(f.resolve().relative_to(root)) for f in files))
    print(f"Artifact {name} uploaded: {len(files)} files")
    return 0


def download_artifact() -> int:
    """actions/download-artifact of this run: by name into `path`, or every artifact whose name matches `pattern`
    into `path`/<name> (none matching is no error, as on GitHub)."""
    run = state() / "artifacts" / os.environ["GITHUB_RUN_ID"]
    destination = Path(inputs("path") or ".")
    if inputs("pattern") and not inputs("name"):
        for artifact in sorted(run.glob(inputs("pattern"))):
            shutil.copytree(artifact, destination / artifact.name, dirs_exist_ok=True)
        return 0
    artifact = run / inputs("name")
    if not inputs("name") or not artifact.is_dir():
        print(f"::error::Unable to download artifact(s): Artifact not found for name: {inputs('name')}")
        return 1
    shutil.copytree(artifact, destination, dirs_exist_ok=True)
    return 0


def deploy_pages() -> int:
    """actions/deploy-pages: the run's `github-pages` artifact (upload-pages-artifact's tar) recorded as deployed."""
    site = state() / "artifacts" / os.environ["GITHUB_RUN_ID"] / "github-pages"
    if not site.is_dir():
        print("::error::No artifact named github-pages: upload one with actions/upload-pages-artifact first")
        return 1
    record("deploy-pages", files=sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file()))
    owner, name = os.environ["GITHUB_REPOSITORY"].split("/")
    output("page_url", f"https://{owner}.github.io/{name}/")
    return 0


COMMANDS = {
    "cache-restore": cache_restore,
    "cache-save": cache_save,
    "upload-artifact": upload_artifact,
    "download-artifact": download_artifact,
    "deploy-pages": deploy_pages,
}

if __name__ == "__main__":
    sys.exit(COMMANDS[sys.argv[1]]())
