"""A family's sweep as a picture: latency (left) and shared memory (right) along its axis, a line per series."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tilelang_golden.gpu.measure.sweep import SweepCurve


def plot_sweeps(sweeps: Sequence[SweepCurve], limit_bytes: int, gpu_name: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display on runners
    import matplotlib.pyplot as plt

    family, axis = sweeps[0].family, sweeps[0].axis
    figure, (latency, memory) = plt.subplots(1, 2, figsize=(11, 4.2))
    values = sorted({p.value for s in sweeps for p in s.points})
    for index, sweep in enumerate(sweeps):
        color = f"C{index}"
        timed = sweep.timed
        latency.plot([p.value for p in timed], [p.median_ms for p in timed], "o-", color=color, label=sweep.series)
        knee = next((p for p in timed if p.value == sweep.knee), None)
        if knee is not None and sweep.plateau:
            latency.plot([knee.value], [knee.median_ms], "o", markersize=14, fillstyle="none", color=color)
        points = sorted((p for p in sweep.points if p.shared_memory_bytes is not None), key=lambda p: p.value)
        memory.plot(
            [p.value for p in points],
            [p.shared_memory_bytes / 1024 for p in points],
            "-",
            color=color,
            label=sweep.series,
        )
        for fits, marker in ((True, "o"), (False, "x")):
            chosen = [p for p in points if p.fits == fits]
            memory.plot(
                [p.value for p in chosen],
                [p.shared_memory_bytes / 1024 for p in chosen],
                marker,
                color=color,
                linestyle="none",
            )
    memory.axhline(limit_bytes / 1024, color="gray", linestyle="--", label=f"device limit {limit_bytes / 1024:g} KiB")
    latency.set(xlabel=axis, ylabel="latency (ms, median)", title="latency (circled: knee)", xticks=values)
    memory.set(
        xlabel=axis,
        ylabel="dynamic shared memory per block (KiB)",
        title="shared memory (x: does not fit)",
        xticks=values,
    )
    for axes in (latency, memory):
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    figure.suptitle(f"{family} on {gpu_name}: {axis} sweep")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
