"""Knee detection and the seed 01 conclusions, on fake timings."""

from __future__ import annotations

from harness.sweep import SweepPoint, TileSweep, conclusions, find_knee

KIB = 1024


def points(latencies: dict[int, float | None], spread: float = 0.01, per_stage: int = 16 * KIB) -> list[SweepPoint]:
    return [
        SweepPoint(
            n, per_stage * max(n, 1), fits=ms is not None, median_ms=ms, spread=spread if ms is not None else 0.0
        )
        for n, ms in latencies.items()
    ]


def test_knee_where_latency_stops_improving():
    # The earlier probe's 128x128x32 curve with num_stages=6 as fast as 4.
    curve = points({0: 4.61, 1: 7.48, 2: 3.95, 3: 3.18, 4: 2.61, 6: 2.60})
    assert find_knee(curve) == 4


def test_later_gain_beyond_noise_moves_the_knee():
    assert find_knee(points({2: 4.0, 3: 3.0, 4: 2.9, 6: 2.5}, spread=0.01)) == 6


def test_gain_within_noise_does_not_move_the_knee():
    # 2.9 -> 2.85 is 1.7 % faster, less than the 3 % measured noise.
    assert find_knee(points({2: 4.0, 3: 3.0, 4: 2.9, 6: 2.85}, spread=0.03)) == 4


def test_noise_of_either_point_counts():
    curve = [SweepPoint(1, KIB, True, 3.0, 0.0), SweepPoint(2, 2 * KIB, True, 2.9, 0.05)]
    assert find_knee(curve) == 1


def test_rising_latency_puts_the_knee_at_the_minimum():
    # The earlier probe's 128x256x64 curve: best at num_stages=1, worse after it.
    assert find_knee(points({0: 12.1, 1: 7.20, 2: 7.93, 3: 8.95, 4: 9.45, 6: None})) == 1


def test_untimed_points_are_ignored_and_none_timed_has_no_knee():
    assert find_knee(points({0: None, 1: None})) is None
    assert find_knee(points({2: 3.0, 6: None})) == 2


def test_plateau_only_when_the_knee_is_before_the_last_timed_stage():
    still_improving = TileSweep("64x64x32", points({2: 12.4, 3: 8.8, 4: 7.0, 6: 5.7}))
    assert still_improving.knee == 6 and not still_improving.plateau
    flat = TileSweep("128x128x32", points({3: 3.0, 4: 2.6, 6: 2.6}))
    assert flat.knee == 4 and flat.plateau


def test_conclusions_answer_the_seed_questions():
    flat = TileSweep("128x128x32", points({3: 3.0, 4: 2.6, 6: 2.6}))
    big = TileSweep("128x256x64", points({1: 7.2, 2: 7.9, 6: None}, per_stage=48 * KIB))
    lines = conclusions([flat, big])
    assert lines[0] == (
        "128x128x32: latency stops improving after num_stages=4 (2.600 ms); "
        "shared memory keeps growing, 64 KiB -> 96 KiB at num_stages=6"
    )
    assert lines[1].endswith("48 KiB -> 288 KiB at num_stages=6, which does not fit")
    assert lines[2] == "same knee for every tile shape: no (128x128x32: 4, 128x256x64: 1)"


def test_conclusions_say_when_there_is_no_knee_in_the_sweep():
    lines = conclusions([TileSweep("64x64x32", points({2: 12.4, 4: 7.0}))])
    assert lines == [
        "64x64x32: latency still improves up to num_stages=4 (7.000 ms), the largest that was timed: "
        "no knee inside the sweep"
    ]


def test_same_knee_everywhere_is_reported_as_yes():
    sweeps = [TileSweep(t, points({2: 3.0, 3: 2.0, 4: 2.0})) for t in ("a", "b")]
    assert conclusions(sweeps)[-1] == "same knee for every tile shape: yes (a: 3, b: 3)"
