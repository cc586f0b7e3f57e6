"""What a TileLang upgrade would change, case by case, before the pin moves (`nox -s upgrade-preview`).

    tilelang-golden upgrade-preview --output build/upgrade-preview/0.1.14 [--gpu [--against PYTHON]]
    tilelang-golden upgrade-preview --output build/upgrade-preview/cuda-13.5.37 --cuda

Run in an environment where only TileLang differs from the pins, or with --cuda only NVIDIA's compilers (the
machine facts' nvcc, ptxas and nvdisasm); writes report.md, report.json and the produced snapshots under --output,
never in the snapshot folder. Options it does not know go to the static session it runs (`-n 4`, `--shard 1/2`,
`-k EXPR`). With --gpu, on a GPU machine, it
also times every variant under both TileLangs, this Python's and the pinned one of `--against`
(a Python command of an environment with the pins, default `python3`), alternating the two, and
writes gpu.md and gpu.json (docs/gpu.md). Exit 0 when the preview ran (it is a report), 2 when it
could not run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from tilelang_golden.config import ConfigError, read_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, required=True, help="folder for the report and the produced files")
    parser.add_argument("--golden-dir", type=Path, help="default: the repository's settings ([tool.tilelang-golden])")
    parser.add_argument(
        "--cuda", action="store_true", help="preview the installed CUDA compilers against the snapshots' release"
    )
    parser.add_argument("--gpu", action="store_true", help="also compare speed and numerics on the GPU at hand")
    parser.add_argument("--against", default="python3", help="Python command of the pinned environment (--gpu)")
    parser.add_argument("--blocks", type=int, default=4, help="timing blocks per environment, alternating (--gpu)")
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds per block (--gpu)")
    # What the command does not know goes to the static session it runs: `-n 4`, `--shard 1/2`, `-k EXPR`.
    options, session_options = parser.parse_known_args(argv)
    try:
        settings = read_config()
    except ConfigError as error:
        parser.error(str(error))
    options.golden_dir = options.golden_dir or settings.golden
    if options.gpu and options.cuda:
        parser.error("--gpu times another TileLang; a CUDA preview compares the machine facts only")
    if options.gpu and (options.blocks < 2 or options.rounds < 2):
        parser.error("--blocks and --rounds must be at least 2: their spread is the measured noise")

    from tilelang_golden.static.produce.lowering import tilelang_unavailable

    problem = tilelang_unavailable()
    if problem:
        print(f"upgrade preview: {problem}", file=sys.stderr)
        return 2
    from tilelang_golden.catalog.loading import load_families, on_targets
    from tilelang_golden.static.snapshots.snapshot import SnapshotStore, installed_tilelang_version
    from tilelang_golden.upgrade.preview import TILELANG, PreviewError, run_preview

    manifest = SnapshotStore(options.golden_dir).read_manifest() or {}
    snapshot_folder = SnapshotStore(options.golden_dir).prefix
    families = on_targets(load_families(*settings.families, snapshot_folder=snapshot_folder), settings.targets)
    for broken in families.broken:
        print(f"upgrade preview: family not previewed: {broken.error}", file=sys.stderr)
    if options.cuda:
        from tilelang_golden.static.produce.toolchain import find_toolchain
        from tilelang_golden.upgrade.preview import CUDA, snapshot_cuda_release

        versions = (find_toolchain().release, snapshot_cuda_release(SnapshotStore(options.golden_dir)), CUDA)
    else:
        versions = (installed_tilelang_version(), str(manifest.get("tilelang", "?")), TILELANG)
    try:
        preview = run_preview(
            families, *versions[:2], options.golden_dir, options.output, versions[2], session(session_options)
        )
    except PreviewError as error:
        print(f"upgrade preview: {error}", file=sys.stderr)
        return 2
    print((options.output / "report.md").read_text())
    print(f"wrote {options.output}/report.md, report.json and golden/ ({len(preview.rows)} cases)")
    if options.gpu:
        return gpu_preview(options, pinned=str(manifest.get("tilelang", "?")))
    return 0


def session(options: list[str]) -> Callable[[list[str]], int]:
    """The static session with the preview's arguments, then the options the command passes on."""
    from tilelang_golden.static.command import static_session

    return lambda arguments: static_session([*arguments, *options])


def gpu_preview(options: argparse.Namespace, pinned: str) -> int:
    """Both TileLangs on the GPU at hand, alternating; 2 when either environment cannot run."""
    import shlex

    from tilelang_golden.gpu.measure.numerics import fresh_seeds
    from tilelang_golden.gpu.run.device import gpu_unavailable
    from tilelang_golden.upgrade.speed import ProcessWorker, WorkerFailed, compare_speed, write_speed_report

    problem = gpu_unavailable()
    if problem:
        print(f"upgrade preview --gpu: {problem}", file=sys.stderr)
        return 2
    seeds = ["--seeds", *map(str, fresh_seeds())]  # the same inputs in both environments
    # Each side's kernels are checked against the snapshots of its own TileLang: the repository's for the
    # pinned one, those the preview just produced for the candidate.
    workers = [
        ProcessWorker("pinned", options.against, ["--golden-dir", str(options.golden_dir), *seeds]),
        ProcessWorker(
            "candidate", shlex.join([sys.executable]), ["--golden-dir", str(options.output / "golden"), *seeds]
        ),
    ]
    try:
        found = workers[0].hello["tilelang"]
        if found != pinned:
            print(
                f"upgrade preview --gpu: `{options.against}` has TileLang {found}, but {options.golden_dir}/ is pinned "
                f"to {pinned}; pass --against the Python of an environment installed from the pins",
                file=sys.stderr,
            )
            return 2
        workers[1].hello  # noqa: B018 -- wait for its GPU check before timing starts
        comparison = compare_speed(*workers, options.blocks, options.rounds, fresh_seeds(1)[0], print)
    except WorkerFailed as error:
        print(f"upgrade preview --gpu: {error}", file=sys.stderr)
        return 2
    finally:
        for worker in workers:
            worker.close()
    for path in write_speed_report(comparison, options.output):
        print(f"wrote {path}")
    print((options.output / "gpu.md").read_text())
    return 0
