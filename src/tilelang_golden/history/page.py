"""The performance history as a static site: an index with the latest changes, a page per family with a plot per
variant and GPU model. Plain HTML and SVG files with relative links: it opens from the disk, offline, and GitHub
Pages serves the folder as it is."""

from __future__ import annotations

import dataclasses
import hashlib
import html
import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tilelang_golden.files import atomic_write
from tilelang_golden.history.changes import Change, Series, series_of, with_changes
from tilelang_golden.history.records import History, gpu_folder

LATEST_SHOWN = 30  # changes in the index's table; every change is on its family's page
SUMMARY_SHOWN = 5  # changes in the job summary
PLOTS = "plots"
STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:72em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left}.slower{color:#b00}.faster{color:#070}
img{max-width:100%}code{font-size:90%}"""


@dataclass(frozen=True)
class Site:
    """What was written: the index, how many runs and series, the changes and the records skipped."""

    index: Path
    runs: int
    series: int
    changes: list[tuple[Series, Change]]
    skipped: list[str]
    all_series: list[Series]

    def headline(self) -> str:
        """What to look at first: the variant slower now than before a change (the latest such change), or that none
        is. A slowdown a later change recovered is history, not news."""
        if not self.runs:
            return "The history has no run yet: the GPU workflow adds one for each run of main."
        slower = sorted(
            ((s, *found) for s in self.all_series if (found := s.still_slower())),
            key=lambda scn: scn[1].after.order,
            reverse=True,
        )
        if not slower:
            return "No variant is slower now than before a change of level."
        series, change, now = slower[0]
        others = f" ({len(slower) - 1} more variant histories are slower now too.)" if len(slower) > 1 else ""
        return (
            f"Slower now: {series.variant} on {series.gpu}, {abs(now):.1%} slower than before {change.commits}. "
            f"Look there first.{others}"
        )

    def markdown(self, link: str) -> str:
        """The job summary: the headline, the newest changes and where the whole site is."""
        lines = [
            "### Performance history",
            "",
            f"**{self.headline()}**",
            "",
            f"{self.runs} runs of main, {self.series} variant histories, {len(self.changes)} changes of level; "
            f"the site (plots per family): {link}",
            "",
        ]
        if self.changes:
            lines += ["| variant | GPU | commits | change |", "|---|---|---|---|"]
            lines += [
                f"| {s.variant} | {s.gpu} | {c.commits} | {c.size:+.1%} |" for s, c in self.changes[:SUMMARY_SHOWN]
            ]
        if self.skipped:
            lines += ["", f"{len(self.skipped)} records skipped (listed on the site)."]
        return "\n".join(lines) + "\n"

    def summary(self) -> str:
        slower = sum(1 for _, c in self.changes if c.size < 0)
        return (
            f"{self.index}: {self.runs} runs, {self.series} variant histories, {len(self.changes)} changes "
            f"({slower} slower, {len(self.changes) - slower} faster); {len(self.skipped)} records skipped"
        )


def write_site(history: History, folder: Path, repository_url: str = "", workers: int | None = None) -> Site:
    """The site for `history` in `folder`, replacing the site there (no page of a family that is gone stays);
    `repository_url` links commits (https://github.com/OWNER/REPO). A folder that holds files but no site is refused,
    never emptied."""
    if folder.is_dir() and any(folder.iterdir()) and not (folder / "index.html").is_file():
        raise FileExistsError(f"{folder} holds files but no index.html: not a site to replace; give an empty folder")
    folder.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        site = _write_site(history, building, repository_url, workers)
        old = folder.with_name(f".{folder.name}-old-{os.getpid()}")
        if folder.exists():
            folder.rename(old)
        building.rename(folder)  # the whole new site appears at once
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return dataclasses.replace(site, index=folder / site.index.name)


def _write_site(history: History, folder: Path, repository_url: str, workers: int | None) -> Site:
    all_series = [with_changes(s) for s in series_of(history)]
    _write_plots(all_series, folder, workers or min(4, os.cpu_count() or 1))
    url = repository_url.rstrip("/")
    families = sorted({s.family for s in all_series})
    for family in families:
        atomic_write(
            folder / family_page(family), _family_page(family, [s for s in all_series if s.family == family], url)
        )
    changes = sorted(((s, c) for s in all_series for c in s.changes), key=lambda sc: sc[1].after.order, reverse=True)
    site = Site(
        folder / "index.html", len(history.records), len(all_series), changes, list(history.skipped), all_series
    )
    atomic_write(site.index, _index_page(site, families, url))
    return site


def plot_path(series: Series) -> str:
    """`plots/gemm/gemm--ns3--nvidia-h200.svg`: relative to the site's root."""
    name = f"{series.variant.replace('/', '--')}--{gpu_folder(series.gpu)}"
    return f"{PLOTS}/{safe_name(series.family)}/{safe_name(name)}.svg"


def family_page(family: str) -> str:
    """`gemm.html`: the family's page, relative to the site's root."""
    return f"{safe_name(family)}.html"


def safe_name(name: str) -> str:
    """`name` where it is a safe file name on every system (letters, digits, `._-`, not hidden, short), else its safe
    characters cut short and a hash of the whole: two names never share a file."""
    if re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}", name):
        return name
    kept = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-")[:60]
    return f"{kept}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"


def _commit_link(change: Change, url: str) -> str:
    """The change's commit range, linked to its compare view (or its one commit) where the repository is known."""
    text = html.escape(change.commits)
    if not url:
        return f"<code>{text}</code>"
    before, after = change.before.commit, change.after.commit
    target = f"{url}/commit/{after}" if before == after else f"{url}/compare/{before}...{after}"
    return f'<a href="{html.escape(target)}"><code>{text}</code></a>'


def _change_cells(change: Change, url: str) -> str:
    word = "slower" if change.size < 0 else "faster"
    moved = "; ".join(change.versions_moved()) or "—"
    return (
        f"<td>{_commit_link(change, url)}</td><td class={word}>{abs(change.size):.1%} {word} "
        f"(ratio {change.ratio_before:.3f} → {change.ratio_after:.3f})</td><td>{html.escape(moved)}</td>"
    )


def _index_page(site: Site, families: Sequence[str], url: str) -> str:
    shown = site.changes[:LATEST_SHOWN]
    rows = [
        f"<tr><td>{html.escape(c.after.commit_time[:10])}</td>"
        f'<td><a href="{html.escape(family_page(s.family))}#{html.escape(_anchor(s))}">'
        f"{html.escape(s.variant)}</a></td>"
        f"<td>{html.escape(s.gpu)}</td>{_change_cells(c, url)}</tr>"
        for s, c in shown
    ]
    more = len(site.changes) - len(shown)
    table = (
        "<table><tr><th>date</th><th>variant</th><th>GPU</th><th>commits</th><th>change</th><th>else moved</th></tr>"
        + "".join(rows)
        + "</table>"
    )
    parts = [
        f"<h1>Performance history</h1><p><b>{html.escape(site.headline())}</b></p>",
        f"<p>{site.runs} runs of main, {site.series} variant histories, {len(site.changes)} changes of level "
        "(ratio to the PyTorch reference: higher is faster; change points by ruptures' Pelt, each kept where a rank "
        "test tells its two levels apart).</p>",
        "<h2>Latest changes</h2>",
        table if rows else "<p>No change of level yet.</p>",
        f"<p>{more} older changes are on the family pages.</p>" if more > 0 else "",
        "<h2>Families</h2><ul>"
        + "".join(f'<li><a href="{html.escape(family_page(f))}">{html.escape(f)}</a></li>' for f in families)
        + "</ul>",
    ]
    if site.skipped:
        parts.append(
            f"<h2>{len(site.skipped)} records skipped</h2><ul>"
            + "".join(f"<li><code>{html.escape(s)}</code></li>" for s in site.skipped)
            + "</ul>"
        )
    return _document("Performance history", parts)


def _family_page(family: str, all_series: Sequence[Series], url: str) -> str:
    parts = [f'<p><a href="index.html">Performance history</a></p><h1>{html.escape(family)}</h1>']
    for series in all_series:
        latest = series.runs[-1]
        parts.append(
            f'<h2 id="{html.escape(_anchor(series))}">{html.escape(series.variant)} on {html.escape(series.gpu)}</h2>'
            f"<p>{len(series.runs)} runs; latest {latest.timed.median_ms:.4g} ms, ratio {latest.timed.ratio:.3f} "
            f"± {latest.timed.ratio_spread:.1%} at <code>{html.escape(latest.record.commit[:7])}</code>.</p>"
            f'<img src="{html.escape(plot_path(series))}" alt="ratio to reference over the runs">'
        )
        if series.changes:
            rows = "".join(f"<tr>{_change_cells(c, url)}</tr>" for c in reversed(series.changes))
            parts.append(f"<table><tr><th>commits</th><th>change</th><th>else moved</th></tr>{rows}</table>")
    return _document(f"{family}: performance history", parts)


def _anchor(series: Series) -> str:
    return safe_name(f"{series.variant.partition('/')[2]}--{gpu_folder(series.gpu)}")


def _document(title: str, parts: Sequence[str]) -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{STYLE}</style></head><body>\n" + "\n".join(p for p in parts if p) + "\n</body></html>\n"
    )


def _write_plots(all_series: Sequence[Series], folder: Path, workers: int) -> None:
    jobs = [(s, folder / plot_path(s)) for s in all_series]
    if workers <= 1 or len(jobs) < 2 * workers:
        for series, path in jobs:
            plot(series, path)
        return
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(plot, *zip(*jobs, strict=True), chunksize=max(1, len(jobs) // (4 * workers))))


LABEL_ROW = 0.09  # the height of a row of change labels, in fractions of the axes
LABEL_ROWS = 3  # rows of labels at most: more would hide the points
LABEL_RUNS = 0.16  # the width one label takes, in fractions of the runs shown


def label_rows(ats: Sequence[int], runs: int) -> list[int | None]:
    """The row each change's label goes in, the first where the label before it in that row ends before it starts;
    None where no row has room."""
    width = max(1.0, LABEL_RUNS * runs)
    ends: list[float] = []
    rows: list[int | None] = []
    for at in ats:
        row = next((r for r, end in enumerate(ends) if end <= at), None)
        if row is None and len(ends) < LABEL_ROWS:
            row = len(ends)
            ends.append(0.0)
        if row is not None:
            ends[row] = at + width
        rows.append(row)
    return rows


def plot(series: Series, path: Path) -> None:
    """The ratio to the reference over the runs, each level's median as a line and each change marked with its size
    and commit range."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratios = series.ratios
    figure, axes = plt.subplots(figsize=(8, 3))
    axes.plot(range(len(ratios)), ratios, ".", color="#4477aa", markersize=4)
    starts = [0, *(c.at for c in series.changes), len(ratios)]
    for (a, b), level in zip(itertools.pairwise(starts), series.levels, strict=True):
        axes.hlines(level, a - 0.5, b - 0.5, color="#222222", linewidth=1)
    rows = label_rows([c.at for c in series.changes], len(ratios))
    for change, row in zip(series.changes, rows, strict=True):
        colour = "#bb0000" if change.size < 0 else "#007700"
        axes.axvline(change.at - 0.5, color=colour, linestyle="--", linewidth=1)
        if row is None:
            continue  # no room beside its neighbours' labels: the family page's table lists every change
        axes.annotate(
            f"{change.size:+.1%} {change.commits}",
            (change.at - 0.5, 1 - row * LABEL_ROW),
            xycoords=("data", "axes fraction"),
            fontsize=7,
            color=colour,
            va="top",
            ha="left",
            parse_math=False,
        )
    step = max(1, len(ratios) // 8)
    ticks = list(range(0, len(ratios), step))
    axes.set_xticks(ticks, [series.runs[i].record.commit[:7] for i in ticks], fontsize=7)
    axes.set_xlabel("commit of main, oldest first (one point a run)", fontsize=8)
    axes.set_ylabel("ratio to reference\n(higher is faster)", fontsize=8)
    axes.set_title(f"{series.variant} on {series.gpu}", fontsize=9, parse_math=False)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="svg")
    plt.close(figure)
