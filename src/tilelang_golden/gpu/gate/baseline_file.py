"""Timing baselines: one committed file per GPU model under golden/timing/, read, written and keyed.

A baseline holds each variant's ratio to its reference (reference ms / variant ms, so higher
is faster) and the problem shape it was measured at (`shape_name`), keyed by the GPU name and the CUDA, torch and
TileLang versions. Ratios, not milliseconds, because cuBLAS in the same process absorbs most of
what a shared GPU's clocks and neighbours do to both. What a run's ratios are held to against
it is tilelang_golden.gpu.gate.gate's to decide.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tilelang_golden.environment import running_under_ci
from tilelang_golden.files import atomic_write

TIMING_DIR = Path("golden") / "timing"
BASELINE_FORMAT = 1
RECORD_COMMAND = "nox -s gpu -- --record-baseline"
SHAPES_KEY = "problems"  # the file's key for the shapes, as every committed baseline spells it
HEADER = (
    "# Timing baseline for one GPU model: each variant's ratio to its reference (reference ms / variant ms).\n"
    f"# Written by `{RECORD_COMMAND}` on that GPU; never edit by hand.\n"
)


class CorruptBaseline(ValueError):
    """A baseline file that cannot be read; the message names it and what to do."""


class BaselineRefused(RuntimeError):
    """Recording a baseline is not allowed in this run."""


@dataclass(frozen=True)
class Baseline:
    key: dict[str, str]
    ratios: dict[str, float]
    shapes: dict[str, str] = field(default_factory=dict)  # variant -> the problem shape its ratio was measured at


def baseline_path(gpu_name: str, root: Path = TIMING_DIR) -> Path:
    """`NVIDIA H200` -> golden/timing/nvidia-h200.yaml."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")
    return root / f"{slug}.yaml"


def baseline_key(gpu_name: str, versions: Mapping[str, str]) -> dict[str, str]:
    """What a ratio depends on besides the kernel: the GPU and the software (CUDA's version, or HIP's on a ROCm
    build). Problem shapes belong to the families and are in the static snapshots, which a GPU run checks its
    kernels against."""
    runtime = "hip" if "hip" in versions else "cuda"
    return {"gpu": str(gpu_name), **{name: str(versions[name]) for name in (runtime, "torch", "tilelang")}}


def key_differences(baseline: Baseline, key: Mapping[str, str]) -> list[str]:
    """`name: baseline 'x', now 'y'` for every part of `key` the baseline was recorded under otherwise."""
    return [
        f"{name}: baseline {baseline.key.get(name)!r}, now {value!r}"
        for name, value in key.items()
        if baseline.key.get(name) != value
    ]


def read_baseline(path: Path) -> Baseline | None:
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise CorruptBaseline(f"{path}: not valid YAML ({error}); record it again with `{RECORD_COMMAND}`") from None
    if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT:
        raise CorruptBaseline(f"{path}: expected a mapping with format: {BASELINE_FORMAT}; record it again")
    key, ratios = data.get("key"), data.get("ratios")
    if not isinstance(key, dict) or not isinstance(ratios, dict):
        raise CorruptBaseline(f"{path}: expected mappings under 'key' and 'ratios'; record it again")
    bad = [name for name, value in ratios.items() if not isinstance(value, (int, float)) or value <= 0]
    if bad:
        raise CorruptBaseline(f"{path}: ratios must be positive numbers, not for {bad}; record it again")
    shapes = data.get(SHAPES_KEY) or {}
    if not isinstance(shapes, dict):
        raise CorruptBaseline(f"{path}: expected a mapping under '{SHAPES_KEY}'; record it again")
    return Baseline(
        {str(k): str(v) for k, v in key.items()},
        {str(k): float(v) for k, v in ratios.items()},
        {str(k): str(v) for k, v in shapes.items()},
    )


def render_baseline(
    key: Mapping[str, str], ratios: Mapping[str, float], shapes: Mapping[str, str], timer: Mapping[str, Any]
) -> str:
    data = {
        "format": BASELINE_FORMAT,
        "key": {str(k): str(v) for k, v in key.items()},
        "timer": {str(k): v for k, v in timer.items()},
        "ratios": {str(name): round(float(ratios[name]), 4) for name in sorted(ratios)},
        SHAPES_KEY: {str(name): str(shapes[name]) for name in sorted(ratios)},
    }
    return HEADER + yaml.safe_dump(data, sort_keys=False, width=120)


def check_may_record(force: bool, environ: Mapping[str, str] = os.environ) -> None:
    """Recording is a person's decision after looking at the numbers, not something CI does by itself."""
    if running_under_ci(environ) and not force:
        raise BaselineRefused(
            f"refusing to record a timing baseline while CI={environ.get('CI')!r}: a baseline is recorded by a "
            f"person on the GPU it describes (`{RECORD_COMMAND}`), then reviewed and committed. Pass "
            "--force-record-under-ci if this job exists to produce one as an artifact."
        )


def write_baseline(path: Path, text: str, force: bool, environ: Mapping[str, str] = os.environ) -> None:
    check_may_record(force, environ)
    atomic_write(path, text)
