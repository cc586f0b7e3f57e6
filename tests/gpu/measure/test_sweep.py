"""Knee detection, the sweep conclusions and the curves built from the families' sweep declarations."""

from __future__ import annotations

import gpu_fakes as fake

from tilelang_golden.family import Sweep
from tilelang_golden.gpu.measure.sweep import SweepCurve, SweepPoint, conclusions, find_knee
from tilelang_golden.gpu.report.results import build_sweeps

KIB = 1024
FAMILY = "gemm_num_stages"


def points(latencies: dict[int, float | None], spread: float = 0.01, per_stage: int = 16 * KIB) -> list[SweepPoint]:
    return [
        SweepPoint(
            value=n,
            shared_memory_bytes=per_stage * max(n, 1),
            fits=ms is not None,
            median_ms=ms,
            spread=spread if ms is not None else 0.0,
        )
        for n, ms in latencies.items()
    ]


def curve(series: str, latencies: dict[int, float | None], **options) -> SweepCurve:
    return SweepCurve(FAMILY, "num_stages", series, points(latencies, **options))


def test_knee_where_latency_stops_improving():
    # The earlier probe's 128x128x32 curve with num_stages=6 as fast as 4.
    measured = points({0: 4.61, 1: 7.48, 2: 3.95, 3: 3.18, 4: 2.61, 6: 2.60})
    assert find_knee(measured) == 4


def test_later_gain_beyond_noise_moves_the_knee():
    assert find_knee(points({2: 4.0, 3: 3.0, 4: 2.9, 6: 2.5}, spread=0.01)) == 6


def test_gain_within_noise_does_not_move_the_knee():
    # 2.9 -> 2.85 is 1.7 % faster, less than the 3 % measured noise.
    assert find_knee(points({2: 4.0, 3: 3.0, 4: 2.9, 6: 2.85}, spread=0.03)) == 4


def test_noise_of_either_point_counts():
    measured = [SweepPoint(value=1, shared_memory_bytes=KIB, fits=True, median_ms=3.0, spread=0.0)]
    measured.append(SweepPoint(value=2, shared_memory_bytes=2 * KIB, fits=True, median_ms=2.9, spread=0.05))
    assert find_knee(measured) == 1


def test_rising_latency_puts_the_knee_at_the_minimum():
    # The earlier probe's 128x256x64 curve: best at num_stages=1, worse after it.
    assert find_knee(points({0: 12.1, 1: 7.20, 2: 7.93, 3: 8.95, 4: 9.45, 6: None})) == 1


def test_untimed_points_are_ignored_and_none_timed_has_no_knee():
    assert find_knee(points({0: None, 1: None})) is None
    assert find_knee(points({2: 3.0, 6: None})) == 2


def test_points_are_taken_in_axis_order_whatever_their_order_in_the_curve():
    assert find_knee(points({6: 2.6, 3: 3.0, 4: 2.6})) == 4


def test_plateau_only_when_the_knee_is_before_the_last_timed_value():
    still_improving = curve("64x64x32", {2: 12.4, 3: 8.8, 4: 7.0, 6: 5.7})
    assert still_improving.knee == 6 and not still_improving.plateau
    flat = curve("128x128x32", {3: 3.0, 4: 2.6, 6: 2.6})
    assert flat.knee == 4 and flat.plateau
    assert not curve("a", {0: None}).plateau


def test_conclusions_answer_the_seed_questions_naming_the_family():
    flat = curve("128x128x32", {3: 3.0, 4: 2.6, 6: 2.6})
    big = curve("128x256x64", {1: 7.2, 2: 7.9, 6: None}, per_stage=48 * KIB)
    lines = conclusions([flat, big])
    assert lines[0] == (
        "gemm_num_stages 128x128x32: latency stops improving after num_stages=4 (2.600 ms); "
        "shared memory keeps growing, 64 KiB -> 96 KiB at num_stages=6"
    )
    assert lines[1].startswith("gemm_num_stages 128x256x64: latency stops improving after num_stages=1 (7.200 ms)")
    assert lines[1].endswith("48 KiB -> 288 KiB at num_stages=6, which does not fit")
    assert lines[2] == "gemm_num_stages: same knee for every series: no (128x128x32: 4, 128x256x64: 1)"
    assert len(lines) == 3


def test_conclusions_say_when_there_is_no_knee_in_the_sweep():
    lines = conclusions([curve("64x64x32", {2: 12.4, 4: 7.0})])
    assert lines == [
        "gemm_num_stages 64x64x32: latency still improves up to num_stages=4 (7.000 ms), the largest that was "
        "timed: no knee inside the sweep"
    ]


def test_conclusions_say_when_nothing_was_timed():
    assert conclusions([curve("128x256x64", {6: None})]) == [
        "gemm_num_stages 128x256x64: no num_stages was timed, so there is no curve"
    ]


def test_shared_memory_that_stops_growing_is_said_so():
    same = [
        SweepPoint(value=n, shared_memory_bytes=32 * KIB, fits=True, median_ms=ms, spread=0.0)
        for n, ms in ((1, 3.0), (2, 2.0), (3, 2.0))
    ]
    (line,) = conclusions([SweepCurve("f", "block_K", "t", same)])
    assert line == "f t: latency stops improving after block_K=2 (2.000 ms); shared memory does not grow beyond it"


def test_same_knee_everywhere_is_reported_as_yes():
    sweeps = [curve(t, {2: 3.0, 3: 2.0, 4: 2.0}) for t in ("a", "b")]
    assert conclusions(sweeps)[-1] == "gemm_num_stages: same knee for every series: yes (a: 3, b: 3)"


def test_knees_are_compared_within_a_family_not_across_families():
    other = SweepCurve("other", "block_K", "x", points({2: 3.0, 3: 2.0}))
    sweeps = [curve("a", {2: 3.0, 3: 2.0, 4: 2.0}), other, curve("b", {2: 3.0, 3: 2.0, 4: 1.0})]
    lines = conclusions(sweeps)
    assert lines[0].startswith("gemm_num_stages a: latency stops improving after num_stages=3")
    assert lines[1].startswith("other x: latency still improves up to block_K=3")
    assert lines[2].startswith("gemm_num_stages b: latency still improves up to num_stages=4")
    assert lines[3:] == ["gemm_num_stages: same knee for every series: no (a: 3, b: 4)"]


def test_curve_as_dict_lists_points_in_axis_order():
    data = curve("128x128x32", {4: 2.6, 3: 3.0, 6: 2.6}).as_dict()
    assert {k: data[k] for k in ("family", "axis", "series", "knee", "plateau")} == {
        "family": FAMILY,
        "axis": "num_stages",
        "series": "128x128x32",
        "knee": 4,
        "plateau": True,
    }
    assert [p["value"] for p in data["points"]] == [3, 4, 6]
    assert data["points"][0] == {
        "value": 3,
        "median_ms": 3.0,
        "spread": 0.01,
        "shared_memory_bytes": 48 * KIB,
        "fits": True,
    }


# -- curves from the families' sweep declarations -------------------------------------------------


def test_build_sweeps_makes_a_curve_per_series_of_each_family_that_declares_a_sweep():
    results = [
        fake.result(fake.V0, 49152),  # its family declares no sweep
        fake.result(fake.sweep_case(2, (128, 128, 32)), 32 * KIB, (3.0, 3.0, 3.0)),
        fake.result(fake.sweep_case(6, (128, 256, 64)), 288 * KIB),  # does not fit: a point, untimed
        fake.result(fake.sweep_case(1, (128, 128, 32)), 16 * KIB, (4.0, 4.1, 3.9)),
    ]
    curves = build_sweeps(results)
    assert [(c.family, c.axis, c.series) for c in curves] == [
        ("gemm_num_stages", "num_stages", "128x128x32"),
        ("gemm_num_stages", "num_stages", "128x256x64"),
    ]
    assert curves[0].points == [
        SweepPoint(value=2, shared_memory_bytes=32 * KIB, fits=True, median_ms=3.0, spread=0.0),
        SweepPoint(value=1, shared_memory_bytes=16 * KIB, fits=True, median_ms=4.0, spread=results[3].timing.spread),
    ]
    assert curves[1].points == [
        SweepPoint(value=6, shared_memory_bytes=288 * KIB, fits=False, median_ms=None, spread=0.0)
    ]


def test_build_sweeps_reads_the_axis_and_series_the_family_declares():
    sweep = Sweep(axis="block_K", series=lambda p: f"BM={p['block_M']}")
    variants = [fake.variant(f"m{m}_k{k}", block_M=m, block_K=k) for m, k in ((64, 32), (128, 32), (64, 64))]
    family = fake.gemm_family("by_block_k", variants, sweep=sweep)
    curves = build_sweeps([fake.result(fake.case(family, v.name), 1024 * v.params["block_K"]) for v in variants])
    assert [(c.family, c.axis, c.series) for c in curves] == [
        ("by_block_k", "block_K", "BM=64"),
        ("by_block_k", "block_K", "BM=128"),
    ]
    assert [[p.value for p in c.points] for c in curves] == [[32, 64], [32]]
    assert [[p.shared_memory_bytes for p in c.points] for c in curves] == [[32 * KIB, 64 * KIB], [32 * KIB]]
    assert build_sweeps([fake.result(fake.V0, 49152)]) == []
