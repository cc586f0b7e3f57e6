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
compilers apart (nvcc, and nvdisasm with its calls, `machine_code._run`), and the rest: the harness's own (keys, facts,
normalization, comparison, results, the declaration and family checks, pytest's items). Per case: those seconds,
the same steps for this repository's cases alone (the copies' kernels are larger; this says whether a case costs more
in a larger library), the process's peak memory and what it still holds at the end, and the bytes of RESULTS.jsonl,
the pending folder and the lowering cache; then the verdict's job summary for every case new.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_COPY = re.compile(r".+_s\d+")  # a copy's family name: `<family>_s<k>`
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


def held_mib() -> float:
    """What the process still holds once the run is over: its resident memory after a garbage collection and after
    the C allocator gave back its free pages (the peak keeps pages freed long before)."""
    import ctypes
    import gc

    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run(copies: int, scratch: Path, options: list[str]) -> dict[str, float]:
    """One cold static run over the families and their copies, timed inside this process."""
    import pytest
    import tilelang

    from tilelang_golden.static import session
    from tilelang_golden.static.command import GOLDEN
    from tilelang_golden.static.produce import machine_code
    from tilelang_golden.static.report.job_summary import render_job_summary, static_report
    from tilelang_golden.static.snapshots.results import read_results

    spent: Counter[str] = Counter()  # seconds per step, every case
    originals: Counter[str] = Counter()  # seconds per step, this repository's cases alone
    calls: Counter[str] = Counter()
    copy = {"now": False}  # whether the step running is a copy's

    def timing(function, step, names_case: bool = False):
        def timed(*args, **kwargs):
            if names_case:  # a Case or a Family: whose step it is
                copy["now"] = _COPY.fullmatch(getattr(args[0], "family", args[0]).name) is not None
            name = step(args) if callable(step) else step
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds = time.perf_counter() - start
                spent[name] += seconds
                calls[name] += 1
                if not copy["now"]:
                    originals[name] += seconds

        return timed

    session.build_kernel = timing(session.build_kernel, "tracing", names_case=True)
    session.lower = timing(session.lower, "harness lowering", names_case=True)  # TileLang's inside it, timed apart
    tilelang.lower = timing(tilelang.lower, "lowering")
    machine_code._run = timing(machine_code._run, lambda args: args[2], names_case=True)  # nvcc, nvdisasm
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
    own = sum(1 for r in results if r.case and not _COPY.fullmatch(r.case[0]))
    summary = render_job_summary(static_report(results), "Golden snapshots", "golden-pending")

    def size(path: Path) -> int:
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size

    tools = ("tracing", "lowering", "nvcc", "nvdisasm")
    return {
        "cases": cases,
        "own_cases": own,
        "wall_s": wall,
        "collection_s": Collection.seconds,
        **{f"{step}_s": spent[step] for step in tools},
        **{f"own_{step}_s": originals[step] for step in tools},
        "nvdisasm_calls": calls["nvdisasm"],
        "harness_s": wall - Collection.seconds - sum(spent[step] for step in tools),
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "held_mib": held_mib(),
        "results_bytes": size(pending / "RESULTS.jsonl"),
        "pending_bytes": size(pending),
        "cache_bytes": size(cache),
        "summary_bytes": len(summary.encode()),
    }


def print_table(columns: list[str], cells: list[list], sizes: list[tuple]) -> None:
    """A markdown table, a row per library size (its first column), then a blank line."""
    print("| library | " + " | ".join(columns) + " |")
    print("| --- |" + " --- |" * len(columns))
    for (copies, *_), row in zip(sizes, cells, strict=True):
        print(f"| {copies}x | " + " | ".join(str(cell) for cell in row) + " |")
    print()


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
    every = [(copies, row, row["cases"]) for copies, _, row in rows]
    print_table(
        [
            "cases",
            "collection ms",
            "tracing s",
            "lowering s",
            "nvcc s",
            "nvdisasm s (calls)",
            "harness s",
            "harness / lowering",
        ],
        [
            [
                n,
                f"{1e3 * r['collection_s'] / n:.1f}",
                f"{r['tracing_s'] / n:.2f}",
                f"{r['lowering_s'] / n:.2f}",
                f"{r['nvcc_s'] / n:.2f}",
                f"{r['nvdisasm_s'] / n:.2f} ({r['nvdisasm_calls'] / n:.2f})",
                f"{r['harness_s'] / n:.2f}",
                f"{r['harness_s'] / r['lowering_s']:.0%}",
            ]
            for _, r, n in every
        ],
        every,
    )
    own = [(copies, row, row["own_cases"]) for copies, _, row in rows]
    print_table(
        ["this repository's cases", "their lowering s", "their nvcc s", "their nvdisasm s"],
        [[n, *(f"{r[f'own_{step}_s'] / n:.2f}" for step in ("lowering", "nvcc", "nvdisasm"))] for _, r, n in own],
        own,
    )
    print_table(
        ["peak MiB", "held at the end MiB", "RESULTS KiB", "pending KiB", "cache KiB", "summary KiB"],
        [
            [
                f"{r['peak_mib']:.0f}",
                f"{r['held_mib']:.0f}",
                f"{r['results_bytes'] / n / 1024:.2f}",
                f"{r['pending_bytes'] / n / 1024:.1f}",
                f"{r['cache_bytes'] / n / 1024:.1f}",
                f"{r['summary_bytes'] / 1024:.0f}",
            ]
            for _, r, n in every
        ],
        every,
    )
    left_out = [f"{c}x left out {', '.join(out)}" for c, out, _ in rows if out]
    print("; ".join(["per case, except peak memory (the process) and the summary (the run's)", *left_out]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
