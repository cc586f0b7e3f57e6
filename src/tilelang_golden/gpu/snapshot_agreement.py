"""Whether the kernels the GPU check compiled are those the static snapshots describe: the launches' dynamic shared
memory against the facts, the CUDA source against the snapshot's, and each kernel's registers, local and static shared
memory (read from the CUDA driver) against the machine facts, naming both compilers where they differ.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tilelang_golden.catalog.cases import Case
from tilelang_golden.gpu.kernel_session import CompiledWithSource, raised
from tilelang_golden.gpu.report.results import SnapshotCheck, VariantFailure
from tilelang_golden.gpu.run.compile import DRIVER_ATTRIBUTES, CompiledCase
from tilelang_golden.static.snapshots.case_files import facts_file, machine_file, source_file
from tilelang_golden.static.snapshots.regen import regen_command
from tilelang_golden.static.snapshots.snapshot import (
    CorruptSnapshot,
    SnapshotStore,
    parse_facts,
    parse_machine_facts,
    strip_cuda_header,
)


def agree_with_snapshots(
    compiled: Sequence[CompiledCase],
    built: Mapping[str, CompiledWithSource],
    store: SnapshotStore,
    snapshotted: Callable[[Case], bool],
) -> dict[str, SnapshotCheck | VariantFailure]:
    """Each compiled kernel against its static snapshot; a test-only family's has none to agree with."""
    answers: dict[str, SnapshotCheck | VariantFailure] = {}
    for c in compiled:
        key = c.case.key
        if not snapshotted(c.case):
            answers[key] = SnapshotCheck("none: a test-only family, never snapshotted")
            continue
        try:
            answers[key] = snapshot_agreement(c, built[key].source, store)
        except Exception as error:
            answers[key] = raised("snapshot", c.case, error)
    return answers


def snapshot_agreement(compiled: CompiledCase, source: str | None, store: SnapshotStore) -> SnapshotCheck:
    """The compiled kernel (its CUDA `source`) against its static snapshot for its target (nothing to compare when
    it did not compile)."""
    case = compiled.case
    facts_path = facts_file(case)
    shown = (store.root / facts_path).as_posix()
    if compiled.error:
        return SnapshotCheck(shown)
    regen = regen_command(case.id)
    text = store.read(facts_path)
    if text is None:
        missing = f"{shown}: no static snapshot for this variant and target; run `{regen}` and commit it"
        return SnapshotCheck(shown, failures=(missing,))
    try:
        kernels = parse_facts(text, shown)["kernels"]
    except CorruptSnapshot as error:
        return SnapshotCheck(shown, failures=(str(error),))
    snapshot = {kernel["name"]: kernel["dynamic_shared_memory_bytes"] for kernel in kernels}
    failures = ()
    if compiled.launches != snapshot:
        failures = (
            f"{shown}: the snapshot's kernels launch with dynamic shared memory {snapshot} (bytes), but those "
            f"compiled here launch with {compiled.launches}; run `nox -s static` to see what changed, then `{regen}`",
        )
    cuda = store.read(source_file(case))
    matches = None if cuda is None or source is None else source == strip_cuda_header(cuda)
    machine = compare_machine_facts(compiled, store)
    return SnapshotCheck(shown, max(snapshot.values()), matches, failures, *machine)


def compare_machine_facts(compiled: CompiledCase, store: SnapshotStore) -> tuple[bool | None, tuple[str, ...], str]:
    """(whether the driver's registers, local and static shared memory of each kernel equal the machine facts', each
    difference as `snapshot -> here`, both compilers in words); (None, (), "") where there is nothing to compare."""
    path = machine_file(compiled.case)
    text = None if path is None or not compiled.kernel_resources else store.read(path)
    if text is None:
        return None, (), ""
    snapshot = parse_machine_facts(text, (store.root / path).as_posix())
    toolchain = snapshot["toolchain"]
    compilers = f"the snapshot's {toolchain['arch']} by nvcc {toolchain['cuda']}, here {runner_compiler()}"
    differences = tuple(
        f"{compiled.case.id} {kernel['name']}: {field} {kernel[field]} -> {found[field]}"
        for kernel in snapshot["kernels"]
        for found in [compiled.kernel_resources.get(kernel["name"], {})]
        for field in DRIVER_ATTRIBUTES
        if field in found and found[field] != kernel[field]
    )
    return not differences, differences, compilers


@functools.cache
def runner_compiler() -> str:
    """The compiler TileLang's JIT used here, as `nvcc --version` names it: `nvcc 13.0.88`."""
    nvcc = shutil.which("nvcc") or str(Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc")
    try:
        version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "TileLang's JIT, nvcc of unknown version"
    found = re.search(r"release [\d.]+, V([\d.]+)", version)
    return f"TileLang's JIT, nvcc {found[1] if found else 'of unknown version'}"
