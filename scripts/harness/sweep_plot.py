"""The seed 01 picture: latency (left) and shared memory (right) against num_stages, one line per tile shape."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.sweep import TileSweep


def plot_sweeps(sweeps: Sequence[TileSweep], limit_bytes: int, gpu_name: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display on runners
    import matplotlib.pyplot as plt

    figure, (latency, memory) = plt.subplots(1, 2, figsize=(11, 4.2))
    stages = sorted({p.num_stages for s in sweeps for p in s.points})
    for index, sweep in enumerate(sweeps):
        color = f"C{index}"
        timed = sweep.timed
        latency.plot([p.num_stages for p in timed], [p.median_ms for p in timed], "o-", color=color, label=sweep.tile)
        knee = next((p for p in timed if p.num_stages == sweep.knee), None)
        if knee is not None and sweep.plateau:
            latency.plot([knee.num_stages], [knee.median_ms], "o", markersize=14, fillstyle="none", color=color)
        points = sorted((p for p in sweep.points if p.shared_memory_bytes is not None), key=lambda p: p.num_stages)
        memory.plot(
            [p.num_stages for p in points],
            [p.shared_memory_bytes / 1024 for p in points],
            "-",
            color=color,
            label=sweep.tile,
        )
        for fits, marker in ((True, "o"), (False, "x")):
            chosen = [p for p in points if p.fits == fits]
            memory.plot(
                [p.num_stages for p in chosen],
                [p.shared_memory_bytes / 1024 for p in chosen],
                marker,
                color=color,
                linestyle="none",
            )
    memory.axhline(limit_bytes / 1024, color="gray", linestyle="--", label=f"device limit {limit_bytes / 1024:g} KiB")
    latency.set(xlabel="num_stages", ylabel="latency (ms, median)", title="latency (circled: knee)", xticks=stages)
    memory.set(
        xlabel="num_stages",
        ylabel="dynamic shared memory per block (KiB)",
        title="shared memory (x: does not fit)",
        xticks=stages,
    )
    for axes in (latency, memory):
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    figure.suptitle(f"Seed 01 on {gpu_name}: num_stages sweep")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
