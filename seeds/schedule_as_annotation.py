"""Seed 03: one dataflow, four schedules; a schedule is an annotation, not a rewrite.

The four `gemm_relu_schedules` kernels (kernels/gemm_relu_schedules.py) compute C = relu(A @ B)
and differ from `v0_baseline` only in one schedule annotation each. With a GPU this compiles
all four and checks each against torch.relu(A @ B); with --static-only it needs no GPU and
shows what each annotation changes: in the source, in the installed TileLang's API, and in
the kernel source emitted for every target the family declares (tilelang_golden/targets.py: CUDA for
sm_*, HIP for gfx*).
"""

from __future__ import annotations

import argparse
import enum
import importlib
import inspect
import itertools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilelang_golden.static.session import LoweringSession

try:
    from tilelang_golden.gpu.gate.numerics_gate import MIN_SEEDS  # standard library only until it runs
    from tilelang_golden.static.produce.lowering import tilelang_unavailable
    from tilelang_golden.targets import TARGETS
except ModuleNotFoundError as missing:  # a Python without this project (or without anything installed)
    print(f"cannot import the harness ({missing}): pip install --no-deps -e . -e kernels", file=sys.stderr)
    raise SystemExit(3) from None  # EXIT_CANNOT_RUN

EXIT_FAILED = 1
EXIT_CANNOT_RUN = 3

EPILOG = """\
exit status:
  0 everything checked holds; 1 an API is missing, a variant's dataflow differs from v0, or
  (GPU mode) a variant fails to compile or its output mismatches; 2 bad arguments; 3 TileLang
  (or, without --static-only, a CUDA GPU) is missing or a kernel does not lower
"""


@dataclass(frozen=True)
class Api:
    """An API the variants use, where the installed TileLang should have it, and what of it they use."""

    name: str  # as the kernels write it
    module: str
    attribute: str
    uses: tuple[str, ...]  # parameters of a callable, members of an enum
    used_by: str


API_CHECKLIST = (
    Api(
        "T.Pipelined",
        "tilelang.language",
        "Pipelined",
        ("num_stages", "stage", "order"),
        "v0, v1, v2 (num_stages); v3 (stage, order)",
    ),
    Api("T.gemm", "tilelang.language", "gemm", ("policy",), "v1"),
    Api("T.GemmWarpPolicy", "tilelang.language", "GemmWarpPolicy", ("FullRow",), "v1"),
    Api("T.annotate_layout", "tilelang.language", "annotate_layout", ("layout_map",), "v2"),
    Api("tilelang.layout.make_swizzled_layout", "tilelang.layout", "make_swizzled_layout", ("buffer",), "v2"),
)


@dataclass(frozen=True)
class ApiCheck:
    api: Api
    found: str | None  # where it is defined and its signature (or members); None when absent
    missing: tuple[str, ...]  # the API itself, or the parameters/members the variants use that it lacks

    @property
    def present(self) -> bool:
        return not self.missing


def check_api(api: Api) -> ApiCheck:
    """Look the API up in the installed TileLang; read its signature with inspect."""
    try:
        target = getattr(importlib.import_module(api.module), api.attribute)
    except (ImportError, AttributeError):
        return ApiCheck(api, None, (f"{api.module}.{api.attribute}",))
    where = f"{getattr(target, '__module__', api.module)}.{getattr(target, '__qualname__', api.attribute)}"
    if isinstance(target, type) and issubclass(target, enum.Enum):
        members = list(target.__members__)
        return ApiCheck(api, f"{where}: enum {{{', '.join(members)}}}", tuple(m for m in api.uses if m not in members))
    parameters = inspect.signature(target).parameters
    signature = f"{where}{inspect.signature(target)}"
    return ApiCheck(api, signature, tuple(f"parameter {p!r}" for p in api.uses if p not in parameters))


def render_api_checklist(checks: Sequence[ApiCheck]) -> list[str]:
    lines = ["API checklist (installed TileLang, signatures from inspect.signature):"]
    for check in checks:
        status = "found  " if check.present else "MISSING"
        lines.append(f"{status} {check.api.name}  uses {', '.join(check.api.uses)}  (used by {check.api.used_by})")
        if check.found:
            lines.append(f"        {check.found}")
        if check.missing:
            lines.append(f"        lacks: {', '.join(check.missing)}")
    return lines


# -- the seed's table, from the kernels' source ---------------------------------------------------


def schedule_table() -> list[str]:
    """Variant, schedule dimension, source lines that differ from the baseline (and what the seed's
    table says), and the differing lines themselves."""
    from kernels import gemm_relu_schedules
    from tilelang_golden.analysis import changed_source, source_lines_changed

    base_build = gemm_relu_schedules.SCHEDULES[gemm_relu_schedules.BASELINE][0]
    header = ("variant", "dimension", "lines vs v0 (seed)", "what changed")
    rows = []
    for name, (build, dimension, seed_lines) in gemm_relu_schedules.SCHEDULES.items():
        changed = changed_source(base_build, build) or ["-"]
        counted = source_lines_changed(base_build, build)
        mark = "" if counted == seed_lines else "  <- differs from the seed"
        rows.append((name, dimension or "-", f"{counted} ({seed_lines}){mark}", changed))
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(3)]
    lines = [f"Seed 03 table, computed from kernels/gemm_relu_schedules.py against {gemm_relu_schedules.BASELINE}:"]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header[:3], widths, strict=True)) + "  " + header[3])
    for name, dimension, counted, changed in rows:
        cells = "  ".join(c.ljust(w) for c, w in zip((name, dimension, counted), widths, strict=True))
        lines.append(f"{cells}  {changed[0]}")
        lines += [" " * len(cells) + f"  {more}" for more in changed[1:]]
    return lines


# -- beyond the seed: what each annotation does to the CUDA -----------------------------------------


def source_language(target: str) -> str:
    """What a target's kernel source is written in, as the headings name it: CUDA or HIP."""
    return TARGETS[target].language


def render_effects(effects: Sequence[Any]) -> list[str]:
    """Per target: kernel source lines (CUDA or HIP) each variant changes against the baseline, identical
    ones marked; a target where a side is declared not to lower says so instead."""
    baseline = effects[0].compared_with
    lines = []
    for target in effects[0].targets:
        lines.append(
            f"{target}: {source_language(target)} lines changed against {baseline} "
            "(normalized text, lines added + removed)"
        )
        for effect in effects:
            if target in effect.not_lowering:
                lines.append(f"  {effect.variant:<20} {'-':>4}  not compared: {effect.not_lowering[target]}")
                continue
            changed = effect.cuda_lines_changed[target]
            if changed == 0:
                verdict = f"IDENTICAL to {baseline}: this annotation has no effect on {target}"
            else:
                fields = ", ".join(effect.facts_changed[target]) or "none"
                verdict = f"facts that differ: {fields}"
            lines.append(f"  {effect.variant:<20} {changed:>4}  {verdict}")
    flows = ", ".join(f"{e.variant} {'yes' if e.same_dataflow else 'NO'}" for e in effects)
    lines.append(f"same dataflow as {baseline}: {flows}")
    return lines


# The swizzle criterion seed 03 quotes from TileLang's examples (their own `make_swizzle_layout`
# helper, not the library's `make_swizzled_layout`): a tile swizzles only when its last
# dimension holds 64 bytes, otherwise the helper falls back to the identity layout.
SWIZZLE_CRITERION_BITS = 512


@dataclass(frozen=True)
class ExplicitLayout:
    """A shared buffer given a layout by `T.annotate_layout`, and what that layout does to it."""

    buffer: str
    shape: list[int]
    dtype: str
    last_dim_bytes: int
    meets_swizzle_criterion: bool  # shape[-1] * dtype bits == SWIZZLE_CRITERION_BITS
    elements_moved: int  # elements the layout stores away from their row-major offset
    elements: int


def explicit_layouts(prim_func: Any) -> list[ExplicitLayout]:
    """Every buffer a kernel annotates with a layout, the layout evaluated on its whole index space."""
    from tvm import DataType, arith, tirx

    from tilelang_golden.analysis import ir_nodes

    blocks = [node for node in ir_nodes(prim_func.body) if isinstance(node, tirx.SBlock)]
    buffers = [b for block in blocks for b in block.alloc_buffers]
    analyzer = arith.Analyzer()
    found = []
    for block in blocks:
        for var, layout in (block.annotations.get("layout_map") or {}).items():
            buffer = next(b for b in buffers if b.data.same_as(var))
            shape = [int(d) for d in buffer.shape]
            out_shape = [int(d) for d in layout.get_output_shape()]
            moved = 0
            for index in itertools.product(*(range(d) for d in shape)):
                mapped = layout.map_forward_index([tirx.IntImm("int32", i) for i in index])
                offset = 0
                for value, extent in zip((int(analyzer.simplify(e)) for e in mapped), out_shape, strict=True):
                    offset = offset * extent + value
                moved += offset != _row_major(index, shape)
            bits = DataType(str(buffer.dtype)).bits
            found.append(
                ExplicitLayout(
                    buffer=str(buffer.name),
                    shape=shape,
                    dtype=str(buffer.dtype),
                    last_dim_bytes=shape[-1] * bits // 8,
                    meets_swizzle_criterion=shape[-1] * bits == SWIZZLE_CRITERION_BITS,
                    elements_moved=moved,
                    elements=math.prod(shape),
                )
            )
    return found


def _row_major(index: tuple[int, ...], shape: list[int]) -> int:
    offset = 0
    for i, extent in zip(index, shape, strict=True):
        offset = offset * extent + i
    return offset


def render_swizzle(layouts: Sequence[Any]) -> list[str]:
    """The seed's swizzle criterion for every buffer v2 annotates, and what the layout really does."""
    lines = [
        f"Swizzle criterion the seed quotes (shape[-1] * dtype bits == {SWIZZLE_CRITERION_BITS}, "
        f"a {SWIZZLE_CRITERION_BITS // 8}-byte last dimension), for the buffers v2_swizzled_layout annotates:"
    ]
    for layout in layouts:
        shape = "x".join(map(str, layout.shape))
        effect = "the identity" if layout.elements_moved == 0 else "not the identity"
        lines.append(
            f"  {layout.buffer} {layout.dtype} {shape}: last dimension {layout.last_dim_bytes} bytes, "
            f"criterion {'met' if layout.meets_swizzle_criterion else 'NOT met'}; make_swizzled_layout "
            f"moves {layout.elements_moved} of {layout.elements} elements ({effect})"
        )
    disagree = [x.buffer for x in layouts if x.meets_swizzle_criterion != (x.elements_moved > 0)]
    if disagree:
        lines.append(
            f"  the criterion mispredicts tilelang.layout.make_swizzled_layout for {', '.join(disagree)}: "
            "it is the rule of the examples' own make_swizzle_layout helper, not of this function"
        )
    return lines


# -- running --------------------------------------------------------------------------------------


def static_report(lowerings: LoweringSession) -> int:
    """Table, API checklist, lowering for every target of the family (through `lowerings`), swizzle check; the
    exit status."""
    print("\n".join(schedule_table()))
    print()
    checks = [check_api(api) for api in API_CHECKLIST]
    print("\n".join(render_api_checklist(checks)))
    missing = [c.api.name for c in checks if not c.present]
    if missing:
        print(f"\nmissing from the installed TileLang: {', '.join(missing)}; the variants using them cannot be built")
        return EXIT_FAILED

    from tilelang_golden.static.produce.lowering import LoweringError
    from tilelang_golden.static.variant_effects import variant_effects

    family = seed_schedules()
    try:
        effects = variant_effects(family, lowerings.produce, lowerings.build)  # on every target the family declares
    except LoweringError as error:
        print(error, file=sys.stderr)
        return EXIT_CANNOT_RUN
    print()
    print("\n".join(render_effects(effects)))
    print()
    v2 = family.variant("v2_swizzled_layout")
    print("\n".join(render_swizzle(explicit_layouts(v2.kernel(**family.params(v2))))))
    different = [e.variant for e in effects if not e.same_dataflow]
    if different:
        print(f"\nFAIL: {', '.join(different)} no longer share the baseline's dataflow")
        return EXIT_FAILED
    return 0


def seed_schedules() -> Any:
    """The family with the seed's four schedules only (it also holds variants beyond the seed)."""
    import dataclasses

    from kernels.gemm_relu_schedules import FAMILY, SCHEDULES

    return dataclasses.replace(FAMILY, variants=[v for v in FAMILY.variants if v.name in SCHEDULES])


def gpu_report(seeds: Sequence[int] | None) -> int:
    """Compile the four variants for this GPU and check them against torch.relu(A @ B)."""
    from tilelang_golden.catalog.cases import family_cases
    from tilelang_golden.gpu.measure import numerics
    from tilelang_golden.gpu.pairs import numerics_case
    from tilelang_golden.gpu.run.compile import compile_cases
    from tilelang_golden.gpu.run.device import NoCudaDevice, UnknownTarget, require_cuda

    family = seed_schedules()
    try:
        device = require_cuda()
    except (NoCudaDevice, UnknownTarget) as error:
        print(f"{error}\n(--static-only runs everything that needs no GPU)", file=sys.stderr)
        return EXIT_CANNOT_RUN
    seeds = list(seeds) if seeds else numerics.fresh_seeds()
    shape = "x".join(str(family.shape[k]) for k in "MNK")
    print(f"{device.name} ({device.target}); C = relu(A @ B), fp16 {shape}, seeds {seeds}")
    compiled = compile_cases(family_cases(family, (device.target,)))
    runs = [numerics_case(c, c.case.variant.name) for c in compiled if c.kernel is not None]
    results = numerics.check_numerics(runs, seeds) if runs else {}
    failed = False
    for c in compiled:
        name = c.case.variant.name
        if c.kernel is None:
            print(f"FAIL  {name:<20} did not compile: {c.error}")
            failed = True
            continue
        result = results[name]
        worst = max(s.max_abs_error for s in result.seeds)
        verdict = "PASS" if result.passed else "FAIL"
        failed |= not result.passed
        detail = "" if result.passed else "  " + "; ".join(result.failures())
        tolerance = f"rtol={family.tolerance.rtol:g}, atol={family.tolerance.atol:g}"
        print(f"{verdict}  {name:<20} max abs error {worst:.4g} against torch.relu(A @ B) ({tolerance}){detail}")
    return EXIT_FAILED if failed else 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--static-only",
        action="store_true",
        help="no GPU: print the table of the four variants, the API checklist, what each annotation "
        "changes in the kernel source (CUDA or HIP) for every target, and the swizzle criterion check",
    )
    parser.add_argument(
        "--seeds",
        nargs="+",
        type=int,
        metavar="SEED",
        help="GPU mode: input seeds to replay (at least 3 distinct; default: fresh ones, printed)",
    )
    args = parser.parse_args(argv)
    if args.seeds is not None and len(set(args.seeds)) < MIN_SEEDS:
        parser.error(f"--seeds needs at least {MIN_SEEDS} distinct seeds")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    problem = tilelang_unavailable()
    if problem:
        print(problem, file=sys.stderr)
        return EXIT_CANNOT_RUN
    if args.static_only:
        from tilelang_golden.static.session import LoweringSession

        return static_report(LoweringSession())
    return gpu_report(args.seeds)


if __name__ == "__main__":
    sys.exit(main())
