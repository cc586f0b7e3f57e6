"""What listing the machine code costs: nvdisasm as it reads a cubin (`nvdisasm -c`, one run per cubin) against the
static check's way (`machine_code.disassemble`: the code sections of every cubin, one run of its raw-instruction
mode), side by side in one run, per target.

    .nox/static/bin/python -m benchmarks.disassembly [--rounds N] [--cubins K] [--family NAME]

Each target's cubin is a case of the family (default: the first the catalog lists; its last variant that lowers
there), compiled as the static check compiles it; K copies of it stand for the K units a session lists at once. The
two ways alternate, round by round, so a busy machine slows both alike; the table gives their median seconds and the
ratio, and says whether both list the same instructions.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)", re.M)


def cubin_of(case, folder: Path) -> Path:
    """The case's first CUDA module compiled as the static check compiles it."""
    from tilelang_golden.static.produce.machine_code import modules, nvcc_command
    from tilelang_golden.static.produce.toolchain import find_toolchain
    from tilelang_golden.static.session import LoweringSession

    module = modules(LoweringSession().lower(case))[0]
    (folder / "kernel.cu").write_text(module.cuda)
    command = [*nvcc_command(find_toolchain(), module.arch, module.options), "-o", "kernel.cubin", "kernel.cu"]
    subprocess.run(command, cwd=folder, check=True, capture_output=True)
    return folder / "kernel.cubin"


def main() -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m benchmarks.{Path(__file__).stem}",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cubins", type=int, default=3, help="cubins listed at once (K)")
    parser.add_argument("--family", help="the family whose kernels are listed (default: the first)")
    args = parser.parse_args()

    from tilelang_golden.catalog.cases import family_cases
    from tilelang_golden.catalog.loading import load_families
    from tilelang_golden.static.produce.machine_code import disassemble
    from tilelang_golden.static.produce.toolchain import find_toolchain
    from tilelang_golden.targets import TARGETS

    families = load_families().families
    family = next(f for f in families if f.name == args.family) if args.family else families[0]
    nvdisasm = str(find_toolchain().nvdisasm)
    print(f"| target | arch | `nvdisasm -c`, {args.cubins} runs s | one raw run s | ratio | same instructions |")
    print("| --- |" + " --- |" * 5)
    for target in family.target_names:
        if TARGETS[target].backend != "cuda":
            continue
        lowering = [c for c in family_cases(family, [target]) if c.does_not_lower is None]
        if not lowering:
            continue
        case = lowering[-1]
        with tempfile.TemporaryDirectory() as folder:
            cubin = cubin_of(case, Path(folder))
            cubins = [cubin.read_bytes()] * args.cubins
            arch = TARGETS[target].compile_arch
            each, once = [], []
            for _ in range(args.rounds):
                start = time.perf_counter()
                listed = [subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True)]
                listed += [subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True) for _ in cubins[1:]]
                each.append(time.perf_counter() - start)
                start = time.perf_counter()
                raw = disassemble(case, arch, cubins)
                once.append(time.perf_counter() - start)
            same = all(
                INSTRUCTION.findall(listing) == INSTRUCTION.findall(listed[0].stdout)
                for found in raw
                for listing in found.values()
            )
            a, b = statistics.median(each), statistics.median(once)
            print(f"| {target} | {arch} | {a:.3f} | {b:.3f} | {b / a:.2f} | {'yes' if same else 'NO'} |")
    print(f"\nmedians of {args.rounds} rounds; {family.name}'s last variant that lowers on each target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
