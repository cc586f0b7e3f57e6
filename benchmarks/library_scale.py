"""How the static check's cost grows with the library: this repository's families at 1x, and with synthetic copies at
3x and 10x the cases, each run cold in one process, per case.

    .nox/static/bin/python -m benchmarks.library_scale [--copies 1 3 10] [-- -k sm_90]

A copy `<family>_s<k>` is the family with its first problem dimension multiplied by k (other shapes, so no lowering
is shared), written as a module of a scratch package that imports the original; copies whose kernels do not build
at that shape are left out and named. Nothing is committed: each run writes to a scratch snapshot folder (empty, so
every case is new), pending folder and lowering cache. Pytest options after `--` go to every run (`-k sm_90`: one
target, for the 10x run on a small machine).

Each run is `tilelang-golden static -n 0` in a process of its own, timed inside: collection, TileLang's lowering
(`tilelang.lower`), tracing a kernel into its PrimFunc (TileLang's front end, through `build_kernel`), NVIDIA's
compilers (nvcc and nvdisasm, `machine_code._run`), and the rest: the harness's own (keys, facts, normalization,
comparison, results, the declaration and family checks, pytest's items). Per case: those seconds, the process's
peak memory, and the bytes of RESULTS.jsonl, the pending folder and the lowering cache; then the verdict's job
summary for every case new.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COPY = '''"""{name}: kernels.{family} with {dimension} x {factor} (benchmarks.library_scale)."""

import dataclasses

from kernels.{family} import FAMILY as ORIGINAL

FAMILY = dataclasses.replace(
    ORIGINAL, name="{name}", shape={{**ORIGINAL.shape, "{dimension}": ORIGINAL.shape["{dimension}"] * {factor}}}
)
'''


def write_copies(package: Path, copies: int) -> list[str]:
    """Modules `<family>_s<k>` for k in 2..copies of every family whose kernels build at the larger shape; the
    families left out."""
    from tilelang_golden.catalog.build import build_kernel
    from tilelang_golden.catalog.loading import load_families

    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    left_out = []
    for family in load_families().families:
        dimension = next(iter(family.shape))
        for factor in range(2, copies + 1):
            name = f"{family.name}_s{factor}"
            (package / f"{name}.py").write_text(
                COPY.format(name=name, family=family.name, dimension=dimension, factor=factor)
            )
        if copies > 1:  # loaded from its file: this process's import path is left as it is
            import importlib.util

            spec = importlib.util.spec_from_file_location(f"{family.name}_s2", package / f"{family.name}_s2.py")
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
                for variant in module.FAMILY.variants:
                    build_kernel(module.FAMILY, variant)
            except Exception:  # a kernel written for its own shape: the copies of this family are left out
                for factor in range(2, copies + 1):
                    (package / f"{family.name}_s{factor}.py").unlink()
                left_out.append(family.name)
    return left_out


def run(copies: int, scratch: Path, options: list[str]) -> dict[str, float]:
    """One cold static run over the families and their copies, timed inside this process."""
    import pytest
    import tilelang

    from tilelang_golden.static import session
    from tilelang_golden.static.command import GOLDEN
    from tilelang_golden.static.produce import machine_code
    from tilelang_golden.static.report.job_summary import render_job_summary, static_report
    from tilelang_golden.static.snapshots.results import read_results

    spent = {"tracing": 0.0, "lowering": 0.0, "compilers": 0.0}

    def timing(function, key):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - start

        return timed

    session.build_kernel = timing(session.build_kernel, "tracing")
    tilelang.lower = timing(tilelang.lower, "lowering")
    machine_code._run = timing(machine_code._run, "compilers")
    packages = ["kernels"]
    if copies > 1:
        packages.append("copies")
    pending, cache = scratch / "pending", scratch / "cache"

    class Collection:
        seconds = 0.0

        def pytest_collection(self, session):
            self.started = time.perf_counter()

        def pytest_collection_finish(self, session):
            Collection.seconds = time.perf_counter() - self.started

    start = time.perf_counter()
    arguments = [*GOLDEN, "-n", "0", "-q", "-p", "no:cacheprovider", "--families", *packages]
    arguments += [f"--golden-dir={scratch / 'golden'}", f"--pending-dir={pending}", f"--lowering-cache={cache}"]
    pytest.main([*arguments, *options], plugins=[Collection()])
    wall = time.perf_counter() - start
    results = read_results(pending)
    cases = sum(1 for r in results if r.case)
    summary = render_job_summary(static_report(results), "Golden snapshots", "golden-pending")

    def size(path: Path) -> int:
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size

    return {
        "cases": cases,
        "wall_s": wall,
        "collection_s": Collection.seconds,
        "tracing_s": spent["tracing"],
        "lowering_s": spent["lowering"],
        "compilers_s": spent["compilers"],
        "harness_s": wall - Collection.seconds - sum(spent.values()),
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "results_bytes": size(pending / "RESULTS.jsonl"),
        "pending_bytes": size(pending),
        "cache_bytes": size(cache),
        "summary_bytes": len(summary.encode()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m benchmarks.{Path(__file__).stem}",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 3, 10], help="library sizes, in copies")
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)  # one size, in a process of its own
    parser.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("options", nargs="*", help="pytest options for every run, after `--`")
    args = parser.parse_args()
    if args.run is not None:
        print(json.dumps(run(args.run, args.scratch, args.options)))
        return 0
    rows = []
    for copies in args.copies:
        with tempfile.TemporaryDirectory() as folder:
            scratch = Path(folder)
            left_out = write_copies(scratch / "copies", copies)
            environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(scratch), str(REPO), str(REPO / "src")]))
            environment.pop("CI", None)
            command = [sys.executable, "-m", "benchmarks.library_scale", "--run", str(copies), "--scratch", folder]
            done = subprocess.run(
                [*command, "--", *args.options], cwd=REPO, env=environment, capture_output=True, text=True
            )
            if done.returncode != 0 or not done.stdout.strip():
                print(f"{copies}x failed:\n{done.stderr[-3000:]}", file=sys.stderr)
                return 1
            rows.append((copies, left_out, json.loads(done.stdout.strip().splitlines()[-1])))
    print(
        "| library | cases | collection ms | tracing s | lowering s | compilers s | harness s | harness / lowering |"
        " peak MiB | RESULTS KiB | pending KiB | cache KiB | summary KiB |"
    )
    print("| --- |" + " --- |" * 12)
    for copies, _, row in rows:
        n = row["cases"]
        print(
            f"| {copies}x | {n} | {1e3 * row['collection_s'] / n:.1f} | {row['tracing_s'] / n:.2f} | "
            f"{row['lowering_s'] / n:.2f} | "
            f"{row['compilers_s'] / n:.2f} | {row['harness_s'] / n:.2f} | {row['harness_s'] / row['lowering_s']:.0%} | "
            f"{row['peak_mib']:.0f} | {row['results_bytes'] / n / 1024:.2f} | {row['pending_bytes'] / n / 1024:.1f} | "
            f"{row['cache_bytes'] / n / 1024:.1f} | {row['summary_bytes'] / 1024:.0f} |"
        )
    print(
        "\nper case, except peak memory (the process) and the summary (the run's); "
        + "; ".join(f"{c}x left out {', '.join(out)}" for c, out, _ in rows if out)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
