"""The timing benchmarks' statistics (benchmarks/timing.py) and the GPU-state summary, on fakes (CI has no GPU)."""

from __future__ import annotations

import pytest

from benchmarks import timing as bench
from tilelang_golden.gpu.gate.baseline_file import Baseline
from tilelang_golden.gpu.gate.timing_gate import FAIL_SLOWER, WARN_SLOWER, compare_ratios
from tilelang_golden.gpu.run.gpu_state import summarize

Repetition, criteria, identical_groups, spread = bench.Repetition, bench.criteria, bench.identical_groups, bench.spread

KEY = {"gpu": "NVIDIA H200", "cuda": "13.0", "torch": "2.11", "tilelang": "0.1.15"}


def repetition(ratios: dict[str, float], baseline: dict[str, float]) -> Repetition:
    base = Baseline(KEY, baseline)
    twins = {k: k.removesuffix("_twin") for k in ratios if k.endswith("_twin")}
    unchanged = compare_ratios(base, "b.yaml", KEY, {k: v for k, v in ratios.items() if k not in twins}, lambda ks: {})
    twin_verdicts = {
        t: compare_ratios(base, "b.yaml", KEY, {o: ratios[t]}, lambda ks, t=t: {ks[0]: ratios[t]})
        for t, o in twins.items()
    }
    return Repetition(ratios, unchanged, twin_verdicts, None)


def test_spread_and_identical_groups():
    assert spread([1.0, 1.02, 0.99]) == pytest.approx(1.02 / 0.99 - 1)
    cuda = {"f/a": "x", "f/b": "x", "f/c": "y", "f/d": None}
    assert identical_groups(list(cuda), cuda.get) == [["f/a", "f/b"]]


def test_criteria_hold_for_a_quiet_gpu_and_a_detected_twin():
    baseline = {"f/a": 0.5, "f/b": 0.5, "f/v": 0.8}
    twin = 0.8 / (1 + FAIL_SLOWER * 1.5)  # slower than the fail threshold
    reps = [repetition({"f/a": 0.5, "f/b": 0.5 * 1.005, "f/v": 0.8, "f/v_twin": twin}, baseline) for _ in range(5)]
    results = criteria(reps, [["f/a", "f/b"]], {"f/v_twin": "f/v"})
    assert all(holds for _, holds, _ in results), results


def test_each_criterion_can_fail():
    baseline = {"f/a": 0.5, "f/b": 0.5, "f/v": 0.8}
    noisy = [
        repetition({"f/a": 0.5, "f/b": 0.5 * 1.02, "f/v": 0.8 / (1 + WARN_SLOWER * 1.2), "f/v_twin": 0.78}, baseline),
        repetition({"f/a": 0.5, "f/b": 0.5, "f/v": 0.8, "f/v_twin": 0.79}, baseline),
    ]
    verdicts = {name.split(".")[0]: holds for name, holds, _ in criteria(noisy, [["f/a", "f/b"]], {"f/v_twin": "f/v"})}
    assert verdicts == {"1": False, "2": False, "3a": False, "3b": False, "3c": False}


def test_gpu_state_summary_counts_capped_samples():
    samples = [
        {"sm_clock_mhz": 1980, "power_w": 500.0, "power_limit_w": 700.0, "throttle": []},
        {"sm_clock_mhz": 1410, "power_w": 702.0, "power_limit_w": 700.0, "throttle": ["software power cap"]},
        {},
    ]
    assert summarize(samples) == {
        "samples": 2,
        "sm_clock_mhz": [1410, 1980],
        "capped_fraction": 0.5,
        "caps": ["software power cap"],
        "max_power_w": 702.0,
        "power_limit_w": 700.0,
    }
    assert summarize([{}]) is None


# -- the A/B gate's benchmark ---------------------------------------------------------------------


def measuring(*slowdowns: float):
    """measure(seed) giving each measurement in turn the rounds of the next slowdown."""
    given = iter(slowdowns)

    def measure(seed):
        return [1 + next(given)] * 7

    return measure


def test_an_ab_trial_fails_only_when_the_second_measurement_agrees():
    assert bench.ab_trial(measuring(0.03, 0.025), seed=1) == bench.FAIL
    assert bench.ab_trial(measuring(0.03, 0.004), seed=1) == bench.WARN
    assert bench.ab_trial(measuring(0.004), seed=1) == bench.OK  # asked once: no second measurement


def test_the_ab_table_counts_verdicts_per_variant_and_slowdown():
    rows = [
        bench.AbRow("f/v", 0.0, 0.0001, (bench.OK,) * 19 + (bench.WARN,)),
        bench.AbRow("f/v", 0.02, 0.021, (bench.FAIL,) * 12 + (bench.WARN,) * 8),
        bench.AbRow("f/short", 0.01, None, note="kernel too short"),
    ]
    table = bench.ab_table(rows, 20)
    assert "| f/v | identical | +0.01% | 0 | 1 | 19 |  |" in table
    assert "| f/v | +2% | +2.10% | 12 | 8 | 0 |  |" in table
    assert "| f/short | +1% | — | — | — | — | kernel too short |" in table
    assert bench.ab_summary(rows) == [
        "identical pairs: 1 alarms (warn or fail) in 20 trials",
        "+2%: failed 12 of 20 trials",
    ]
