"""The performance history: records made from GPU reports, the history read back with its bad records skipped, the
change points on synthetic histories of the H200's noise, the site, and the recent runs beside an A/B verdict."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import gpu_fakes as fake
import pytest
from conftest import REPO, SUBPROCESS_LIMIT_S

from benchmarks import history as bench
from tilelang_golden.gpu.check import main_history
from tilelang_golden.gpu.gate import ab_gate
from tilelang_golden.gpu.report.report import render_markdown, report_data
from tilelang_golden.history.changes import change_points, recent, series_of, with_changes
from tilelang_golden.history.command import main as history_main
from tilelang_golden.history.page import label_rows, safe_name, write_site
from tilelang_golden.history.records import (
    RECORDS,
    BadRecord,
    Record,
    VariantFigures,
    read_history,
    record_from_report,
    write_record,
)

SHA = "a" * 40
WHEN = "2026-12-03T18:12:57+00:00"
H200 = "NVIDIA H200"


def record(commit: str, hour: int, ratios: dict[str, float], versions: dict[str, str] | None = None) -> Record:
    when = f"2026-12-03T{hour:02d}:00:00+00:00"
    timed = {key: VariantFigures(1 / ratio, 0.01, ratio, 0.01) for key, ratio in ratios.items()}
    return Record(commit, when, when, "", H200, versions or {"tilelang": "0.1.15"}, timed)


def stepped_history(folder: Path, runs: int = 40, at: int = 20, size: float = -0.03) -> list[Record]:
    """`runs` records of two variants, `g/slow` with a step of `size` at run `at`, `g/flat` without, of the
    H200's noise."""
    noise = bench.AS_MEASURED
    slow = bench.synthetic(runs, {at: size}, seed=1, noise=noise)
    flat = bench.synthetic(runs, {}, seed=2, noise=noise)
    made = [record(bench.commit(run), run % 24, {"g/slow": slow[run], "g/flat": flat[run]}) for run in range(runs)]
    made = [dataclasses.replace(r, commit_time=f"2026-12-{1 + run // 24:02d}T{run % 24:02d}:00:00+00:00")
            for run, r in enumerate(made)]  # fmt: skip
    for each in made:
        write_record(each, folder)
    return made


# -- records ---------------------------------------------------------------------------------------


def test_a_record_is_made_from_the_gpu_reports_own_data():
    """From report_data of a run, so a renamed field of the GPU report fails here, not on main's history job."""
    data = json.loads(json.dumps(report_data(fake.run([fake.result(fake.V0, 49152, reference_ms=1.7)]))))
    data["device"]["versions"].update(driver="580.95.05", nvcc="13.0.88")
    made = record_from_report(data, SHA, WHEN, "https://x/run", WHEN, "report.json")
    assert made.gpu == H200 and list(made.variants) == [fake.V0.key]
    timing = data["variants"][0]["timing"]
    assert made.variants[fake.V0.key] == VariantFigures(timing["median_ms"], timing["spread"], timing["ratio"],
                                               timing["ratio_spread"])  # fmt: skip
    assert made.versions == {"driver": "580.95.05", "cuda": "13.0", "nvcc": "13.0.88", "torch": "2.11.0+cu130",
                             "tilelang": "0.1.15"}  # fmt: skip


def test_a_report_without_a_timed_variant_or_a_full_commit_makes_no_record():
    data = report_data(fake.run([fake.result(fake.V0, 49152, reference_ms=1.7)]))
    untimed = {**data, "variants": [{**data["variants"][0], "timing": None}]}
    with pytest.raises(BadRecord, match="r.json: no variant was timed"):
        record_from_report(untimed, SHA, WHEN, "", WHEN, "r.json")
    with pytest.raises(BadRecord, match="full 40-hex SHA"):
        record_from_report(data, "abc", WHEN, "", WHEN, "r.json")
    with pytest.raises(BadRecord, match="no time zone"):
        record_from_report(data, SHA, "2026-12-03T18:12:57", "", WHEN, "r.json")


def test_records_read_back_in_commit_order_and_named_by_it(tmp_path):
    late, early = record("b" * 40, 9, {"f/v": 0.5}), record("c" * 40, 8, {"f/v": 0.6})
    paths = [write_record(r, tmp_path) for r in (late, early)]
    assert [p.parent.name for p in paths] == ["nvidia-h200"] * 2
    assert sorted(p.name for p in paths) == [p.name for p in reversed(paths)], "the names sort as the commits"
    history = read_history(tmp_path)
    assert history.records == [early, late] and history.skipped == []


def test_a_bad_record_is_reported_with_its_place_and_skipped(tmp_path):
    good = record(SHA, 9, {"f/v": 0.5})
    write_record(good, tmp_path)
    folder = tmp_path / RECORDS / "nvidia-h200"
    document = good.as_dict()
    bad = {
        "truncated.json": json.dumps(document)[:40],
        "empty.json": "",
        "format.json": json.dumps({**document, "format": 99}),
        "nocommit.json": json.dumps({k: v for k, v in document.items() if k != "commit"}),
        "nan.json": json.dumps(document).replace("0.5", "NaN", 1),
        "notes.txt": "a stray file",
    }
    for name, text in bad.items():
        (folder / name).write_text(text)
    history = read_history(tmp_path)
    assert history.records == [good]
    assert len(history.skipped) == len(bad)
    for name in bad:
        assert any(s.startswith(f"records/nvidia-h200/{name}: ") and s.endswith(": skipped") for s in history.skipped)
    site = write_site(history, tmp_path / "site", workers=1)
    index = site.index.read_text()
    assert f"{len(bad)} records skipped" in index and "truncated.json" in index and site.runs == 1


def test_the_record_command_adds_one_file_and_refuses_a_report_that_is_none(tmp_path, capsys):
    data = report_data(fake.run([fake.result(fake.V0, 49152, reference_ms=1.7)]))
    report = tmp_path / "report.json"
    report.write_text(json.dumps(data))
    into = tmp_path / "history"
    common = ["--commit", SHA, "--commit-time", WHEN, "--into", str(into)]
    assert history_main(["record", "--report", str(report), *common]) == 0
    assert "added records/nvidia-h200/" in capsys.readouterr().out
    report.write_text(json.dumps({**data, "variants": []}))
    assert history_main(["record", "--report", str(report), *common]) == 2
    said = capsys.readouterr().err
    assert f"{report}: no variant was timed" in said and "nothing was added" in said
    assert len(read_history(into).records) == 1


# -- change points ---------------------------------------------------------------------------------

HISTORIES = 100


def test_a_3_percent_step_is_found_at_its_run():
    found = bench.detect(bench.SCENARIOS[0], HISTORIES, bench.AS_MEASURED)
    assert found.within_one == HISTORIES and found.exact >= 0.95 * HISTORIES and found.most_false <= 1


def test_five_steps_of_1_5_percent_are_found():
    found = bench.detect(bench.SCENARIOS[1], HISTORIES, bench.AS_MEASURED)
    assert found.within_two == HISTORIES and found.most_false == 0, "all five, and nothing else, in every history"
    assert found.within_one >= 0.95 * HISTORIES and found.exact >= 0.7 * HISTORIES


@pytest.mark.parametrize("noise", bench.NOISES, ids=lambda n: n.name)
def test_noise_alone_gives_at_most_one_false_change_per_200_runs(noise):
    """Gaussian, heavy-tailed, slow runs and slow machine starts: least squares alone made 14 to 18 false changes per
    200 runs of the slow runs and starts (docs/measurements.md)."""
    found = bench.detect(bench.SCENARIOS[2], HISTORIES // 2, noise)
    assert found.false_per_200_runs <= 0.5 and found.most_false <= 2


@pytest.mark.parametrize("noise", bench.NOISES[2:], ids=lambda n: n.name)
def test_a_3_percent_step_is_found_through_slow_runs_and_machine_starts(noise):
    found = bench.detect(bench.SCENARIOS[0], HISTORIES // 2, noise)
    assert found.within_two >= 0.8 * found.histories and found.false_per_200_runs <= 1


def test_slow_runs_and_machine_starts_are_no_change():
    """One run 8 % slower, then a machine start of two: least squares alone makes a level of each."""
    values = bench.synthetic(60, {}, seed=3, noise=bench.AS_MEASURED)
    values[20] /= 1.08
    values[40] /= 1.08
    values[41] /= 1.08
    assert change_points(values) == []
    values[50:] = [v * 0.97 for v in values[50:]]
    assert change_points(values) == [50], "a step after them is still found"


def test_a_short_or_flat_series_has_no_change():
    assert change_points([1.0, 0.5, 1.0]) == [], "too short for two levels"
    assert change_points([1.0] * 50) == [], "no noise: the floor keeps a constant from splitting"
    assert change_points([1.0] * 25 + [0.9] * 25) == [25]


def test_a_change_says_when_by_how_much_and_what_else_moved(tmp_path):
    made = stepped_history(tmp_path)
    made[20] = dataclasses.replace(made[20], versions={"tilelang": "0.1.16"})
    write_record(made[20], tmp_path)
    slow, flat = (
        with_changes(s) for s in sorted(series_of(read_history(tmp_path)), key=lambda s: s.variant != "g/slow")
    )
    assert flat.changes == []
    [change] = slow.changes
    assert change.at == 20 and change.size == pytest.approx(-0.03, abs=0.006)
    assert change.commits == f"{made[19].commit[:7]}..{made[20].commit[:7]}"
    assert change.versions_moved() == ["tilelang 0.1.15 -> 0.1.16"]
    assert slow.levels == [change.ratio_before, change.ratio_after]


# -- the site --------------------------------------------------------------------------------------


def test_the_site_leads_with_the_latest_slowdown_and_plots_every_variant(tmp_path):
    made = stepped_history(tmp_path / "history")
    site = write_site(read_history(tmp_path / "history"), tmp_path / "site", "https://github.com/acme/kernels", 1)
    index = site.index.read_text()
    assert "Slower now: g/slow on NVIDIA H200" in index
    assert f"https://github.com/acme/kernels/compare/{made[19].commit}...{made[20].commit}" in index
    family = (tmp_path / "site" / "g.html").read_text()
    for variant in ("flat", "slow"):
        plot = tmp_path / "site" / "plots" / "g" / f"g--{variant}--nvidia-h200.svg"
        assert plot.read_text().startswith("<?xml") and f'src="plots/g/g--{variant}--nvidia-h200.svg"' in family
    assert "<script" not in index + family and 'src="http' not in index + family, "it opens offline"
    assert site.summary().endswith("40 runs, 2 variant histories, 1 changes (1 slower, 0 faster); 0 records skipped")


def test_the_site_escapes_what_records_say(tmp_path):
    write_record(record(SHA, 9, {"f/<b>v</b>": 0.5}, {"torch": "<script>x</script>"}), tmp_path / "h")
    write_site(read_history(tmp_path / "h"), tmp_path / "site", workers=1)
    page = (tmp_path / "site" / "f.html").read_text()
    assert "<b>v</b>" not in page and "&lt;b&gt;v&lt;/b&gt;" in page


def test_an_empty_history_renders_a_page_that_says_so(tmp_path):
    site = write_site(read_history(tmp_path / "none"), tmp_path / "site")
    assert "The history has no run yet" in site.index.read_text()


def test_nox_s_history_renders_through_the_command(tmp_path):
    stepped_history(tmp_path / "history", runs=10)
    done = subprocess.run(
        [sys.executable, "-m", "tilelang_golden", "history", "page", "--history", str(tmp_path / "history"),
         "--output", str(tmp_path / "site")],
        capture_output=True, text=True, cwd=REPO, timeout=SUBPROCESS_LIMIT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "10 runs, 2 variant histories" in done.stdout and (tmp_path / "site" / "index.html").is_file()


# -- beside an A/B verdict -------------------------------------------------------------------------


def test_a_variants_recent_runs_on_main_are_a_sparkline_its_latest_and_its_last_change(tmp_path):
    stepped_history(tmp_path)
    lines = recent(read_history(tmp_path), H200, ["g/slow", "g/flat", "g/new"], runs=10)
    assert set(lines) == {"g/slow", "g/flat"}, "a variant main has no run of has no line"
    spark, latest, within, *_ = lines["g/slow"].split(" ")
    assert len(spark) == 10 and set(spark) <= set("▁▂▃▄▅▆▇█")
    latest_ratio = read_history(tmp_path).records[-1].variants["g/slow"].ratio
    assert within == "(range" and math.isclose(float(latest), latest_ratio, abs_tol=0.0005)
    made = read_history(tmp_path).records
    assert re.search(
        rf", slower now: -[23]\.\d% since {made[19].commit[:7]}\.\.{made[20].commit[:7]}$", lines["g/slow"]
    )
    assert lines["g/flat"].endswith("no change of level")
    assert recent(read_history(tmp_path), "NVIDIA A100-SXM4-80GB", ["g/slow"]) == {}, "per GPU model"


def test_the_gpu_summary_shows_main_s_recent_runs_beside_the_ab_verdict():
    result = fake.result(fake.V0, 49152, reference_ms=1.7)
    ab = ab_gate.compare_ab("main (abc)", {fake.V0.key: [1.03] * 7}, lambda keys: {k: [1.03] * 7 for k in keys})
    run = fake.run([result], ab=ab)
    assert "on main |" not in render_markdown(run), "no history: the table as before"
    shown = render_markdown(dataclasses.replace(run, history={fake.V0.key: "▅▅▁ 0.531, last change -3.0 % at a..b"}))
    row = next(line for line in shown.splitlines() if line.startswith(f"| {fake.V0.key} |"))
    assert row.endswith("| slower (fails) | ▅▅▁ 0.531, last change -3.0 % at a..b |")


def test_a_pull_request_s_gpu_run_reads_main_s_history_for_the_variants_it_compared(tmp_path):
    stepped_history(tmp_path)
    ab = ab_gate.compare_ab("main (abc)", {"g/slow": [1.0] * 7}, lambda keys: {})
    run = fake.run([fake.result(fake.V0, 49152, reference_ms=1.7)], ab=ab)
    said: list[str] = []
    assert set(main_history(run, tmp_path, said.append)) == {"g/slow"}
    assert main_history(run, tmp_path / "absent", said.append) == {}, "no history: no column"
    assert main_history(dataclasses.replace(run, ab=None), tmp_path, said.append) == {}, "no A/B: nothing to show"
    (tmp_path / RECORDS / "nvidia-h200" / "bad.json").write_text("{")
    main_history(run, tmp_path, said.append)
    assert said == ["performance history: records/nvidia-h200/bad.json: unreadable (Expecting property name "
                    "enclosed in double quotes: line 1 column 2 (char 1)): skipped"]  # fmt: skip


def test_the_page_reads_the_history_branch_by_its_git_ref_and_names_a_missing_one(tmp_path, monkeypatch, capsys):
    repo = tmp_path / "repo"
    stepped_history(repo, runs=8)
    for command in (["init", "--quiet", "-b", "gpu-history"], ["add", "records"],
                    ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "records"]):  # fmt: skip
        subprocess.run(["git", *command], cwd=repo, check=True, timeout=SUBPROCESS_LIMIT_S)
    shutil.rmtree(repo / RECORDS)  # only the branch holds them now
    monkeypatch.chdir(repo)
    assert history_main(["page", "--history", "gpu-history", "--output", str(tmp_path / "site")]) == 0
    assert "8 runs, 2 variant histories" in capsys.readouterr().out
    assert history_main(["page", "--history", "origin/gpu-history", "--output", str(tmp_path / "site")]) == 2
    assert "git fetch origin gpu-history" in capsys.readouterr().err


def test_the_job_summary_leads_with_what_to_look_at_first(tmp_path, monkeypatch):
    stepped_history(tmp_path / "history")
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert history_main(["page", "--history", str(tmp_path / "history"), "--output", str(tmp_path / "site"),
                         "--summary"]) == 0  # fmt: skip
    lines = summary.read_text().splitlines()
    assert lines[:2] == ["### Performance history", ""] and lines[2].startswith("**Slower now: g/slow on NVIDIA H200, ")
    assert lines[2].endswith("Look there first.**") and any(
        line.startswith("| g/slow | NVIDIA H200 | ") for line in lines
    )


def test_a_history_that_cannot_be_shown_leaves_the_gpu_run_as_it_is(tmp_path, monkeypatch):
    stepped_history(tmp_path)
    ab = ab_gate.compare_ab("main (abc)", {"g/slow": [1.0] * 7}, lambda keys: {})
    run = fake.run([fake.result(fake.V0, 49152, reference_ms=1.7)], ab=ab)

    def no_ruptures(*args):
        raise ImportError("No module named 'ruptures'")

    monkeypatch.setattr("tilelang_golden.history.changes.recent", no_ruptures)
    said: list[str] = []
    assert main_history(run, tmp_path, said.append) == {}
    assert said == ["performance history not shown: ImportError: No module named 'ruptures'"]


# -- what is news, what no record can break --------------------------------------------------------


def two_step_history(folder: Path, recovered: float) -> list[Record]:
    """60 runs: `g/back` 3 % slower at run 20 and `recovered` faster at run 40; `g/kept` 2 % slower at run 10."""
    back = bench.synthetic(60, {20: -0.03, 40: recovered}, seed=4, noise=bench.AS_MEASURED)
    kept = bench.synthetic(60, {10: -0.02}, seed=5, noise=bench.AS_MEASURED)
    made = [record(bench.commit(run), 0, {"g/back": back[run], "g/kept": kept[run]}) for run in range(60)]
    made = [dataclasses.replace(r, commit_time=f"2026-11-{1 + run // 24:02d}T{run % 24:02d}:00:00+00:00")
            for run, r in enumerate(made)]  # fmt: skip
    for each in made:
        write_record(each, folder)
    return made


def test_the_headline_names_what_is_slower_now_not_a_recovered_slowdown(tmp_path):
    made = two_step_history(tmp_path / "h", recovered=1 / 0.97 - 1)
    site = write_site(read_history(tmp_path / "h"), tmp_path / "site", workers=1)
    assert [c.at for s, c in site.changes if s.variant == "g/back"] == [40, 20], "both changes are on the page"
    kept = f"{made[9].commit[:7]}..{made[10].commit[:7]}"
    assert re.fullmatch(rf"Slower now: g/kept on NVIDIA H200, [12]\.\d% slower than before {kept}\. Look there first\.",
                        site.headline()), "g/back's slowdown was later, but it recovered"  # fmt: skip
    lines = recent(read_history(tmp_path / "h"), H200, ["g/back", "g/kept"])
    back = f"{made[39].commit[:7]}..{made[40].commit[:7]}"
    assert re.search(rf", last change \+[23]\.\d% at {back}$", lines["g/back"]), "recovered: its latest change, no news"
    assert re.search(rf", slower now: -[12]\.\d% since {kept}$", lines["g/kept"])


def test_a_half_recovered_slowdown_is_still_news(tmp_path):
    made = two_step_history(tmp_path / "h", recovered=0.01)
    site = write_site(read_history(tmp_path / "h"), tmp_path / "site", workers=1)
    assert site.headline().startswith("Slower now: g/back on NVIDIA H200, 2.")
    assert f"than before {made[19].commit[:7]}..{made[20].commit[:7]}" in site.headline()
    assert "(1 more variant histories are slower now too.)" in site.headline()


def test_a_page_built_from_bad_records_opens_and_lists_them(tmp_path):
    good = record(SHA, 9, {"f/v": 0.5, "f/$x$ ../<i>": 0.6})
    write_record(good, tmp_path / "h")
    folder = tmp_path / "h" / RECORDS / "nvidia-h200"
    document = good.as_dict()
    figures = document["variants"]["f/v"]
    bad = {
        "long.json": {**document, "variants": {"f/" + "v" * 300: figures}},
        "nul.json": {**document, "variants": {"f/v\u0000x": figures}},
        "negative.json": {**document, "variants": {"f/v": {**figures, "median_ms": -1.0}}},
        "commit.json": {**document, "commit": "<script>alert(1)</script>"},
        "gpu.json": {**document, "gpu": "H200\n<b>"},
        "noslash.json": {**document, "variants": {"v": figures}},
    }
    for name, each in bad.items():
        (folder / name).write_text(json.dumps(each).replace("\\\\u0000", "\\u0000"))
    history = read_history(tmp_path / "h")
    assert history.records == [good] and len(history.skipped) == len(bad)
    site = write_site(history, tmp_path / "site", workers=1)
    index = site.index.read_text()
    assert f"{len(bad)} records skipped" in index and all(name in index for name in bad)
    assert "<script>" not in index and "\x00" not in index
    family = (tmp_path / "site" / "f.html").read_text()
    assert "<i>" not in family and "&lt;i&gt;" in family
    plots = sorted(p.name for p in (tmp_path / "site" / "plots" / "f").iterdir())
    assert len(plots) == 2 and all(safe_name(p.removesuffix(".svg")) == p.removesuffix(".svg") for p in plots)


def test_a_record_with_a_negative_time_is_refused_by_record():
    data = report_data(fake.run([fake.result(fake.V0, 49152, reference_ms=1.7)]))
    data["variants"][0]["timing"]["median_ms"] = -1.0
    with pytest.raises(BadRecord, match="no variant was timed"):
        record_from_report(data, SHA, WHEN, "", WHEN, "r.json")


def test_names_that_cannot_be_file_names_map_to_safe_distinct_ones():
    for name in ("gemm", "ns3_128x128", "a.b-c"):
        assert safe_name(name) == name
    unsafe = ["../up", ".hidden", "a b", "x" * 300, "a/b", "a:b", "a\\b", "é"]
    mapped = [safe_name(n) for n in unsafe]
    assert len(set(mapped)) == len(unsafe)
    assert all(re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}", m) for m in mapped), mapped


def test_a_render_replaces_the_site_and_refuses_a_folder_that_is_no_site(tmp_path):
    write_record(record(SHA, 9, {"gone/v": 0.5}), tmp_path / "old")
    write_site(read_history(tmp_path / "old"), tmp_path / "site", workers=1)
    assert (tmp_path / "site" / "gone.html").is_file()
    stepped_history(tmp_path / "new", runs=8)
    write_site(read_history(tmp_path / "new"), tmp_path / "site", workers=1)
    assert sorted(p.name for p in (tmp_path / "site").iterdir()) == ["g.html", "index.html", "plots"]
    assert sorted(p.name for p in (tmp_path / "site" / "plots").iterdir()) == ["g"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [], "no scratch folder is left"
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="not a site to replace"):
        write_site(read_history(tmp_path / "new"), tmp_path / "notes", workers=1)
    assert (tmp_path / "notes" / "mine.txt").read_text() == "keep"


def test_change_labels_never_share_a_row_where_they_would_overlap():
    ats = [10, 12, 14, 40, 41, 90]
    rows = label_rows(ats, 100)
    assert rows[0] == 0 and rows[3] == 0 and rows[5] == 0, "far apart: the first row"
    placed = [(at, row) for at, row in zip(ats, rows, strict=True) if row is not None]
    for (a, ra), (b, rb) in itertools.combinations(placed, 2):
        assert ra != rb or abs(a - b) >= 16, (a, b, ra)
    assert label_rows(list(range(0, 100, 1)), 100).count(None) > 0, "more than rows hold: some go unlabelled"


def test_a_plot_has_axis_titles_says_higher_is_faster_and_names_the_commit_range(tmp_path):
    import matplotlib

    made = stepped_history(tmp_path / "h")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text, to read it back
    try:
        write_site(read_history(tmp_path / "h"), tmp_path / "site", workers=1)
    finally:
        matplotlib.rcParams["svg.fonttype"] = "path"
    svg = (tmp_path / "site" / "plots" / "g" / "g--slow--nvidia-h200.svg").read_text()
    assert "higher is faster" in svg and "commit of main, oldest first" in svg
    assert f"{made[19].commit[:7]}..{made[20].commit[:7]}" in svg
