"""How a changed fact's two values are shown: whole where short, else both from a little before where they differ."""

from tilelang_golden.static.snapshots.diff import SHORT, fact_changes, shortened_apart

WARNING = "Warning: T.vectorized loop over `local_id` with extent 4 is lowered as a serial loop because TileLang could"


def test_two_long_values_are_cut_around_their_first_difference():
    (change,) = fact_changes({"warnings": [f"{WARNING} not bind tx here"]},
                             {"warnings": [f"{WARNING} not bind thread_binding here"]})  # fmt: skip
    assert change.before.startswith("...") and change.after.startswith("...")
    assert "bind tx here" in change.before and "bind thread_binding here" in change.after
    assert change.before != change.after
    assert max(len(change.before), len(change.after)) <= SHORT


def test_short_values_are_shown_whole_and_a_long_one_differing_at_once_from_its_start():
    assert shortened_apart(3, 4) == ("3", "4")
    before, after = shortened_apart("a" + "x" * 300, "b" + "x" * 300)
    assert before.startswith("'a") and after.startswith("'b") and before.endswith("...") and len(before) == SHORT


def test_a_value_that_only_grows_shows_its_end():
    before, after = shortened_apart("x" * 300, "x" * 300 + "tail")
    assert after.endswith("tail'") and before.endswith("x'") and before.startswith("...")
