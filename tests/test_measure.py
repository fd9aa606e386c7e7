from refbench.measure import steady_state


def test_flat_samples_are_steady():
    state = steady_state([1000, 1010, 995, 1005, 1000])
    assert state.reached and abs(state.mean - 1002) < 1e-9


def test_wide_scatter_around_a_flat_line_is_not_steady():
    # A slope-only test (fio's iops_slope) passes this window: the fitted line is flat, the spread is 76%.
    samples = [1380, 620, 1000, 620, 1380]
    state = steady_state(samples)
    assert state.slope_fraction <= 0.10
    assert state.range_fraction > 0.20 and not state.reached


def test_a_ramp_is_not_steady_even_with_a_small_range():
    state = steady_state([900, 940, 980, 1020, 1060])  # range 16% of the mean, but climbing 16% across the window
    assert state.range_fraction <= 0.20
    assert state.slope_fraction > 0.10 and not state.reached


def test_only_the_last_window_counts_and_short_series_are_not_steady():
    assert steady_state([10, 5000, 1000, 1000, 1000, 1000, 1000]).reached
    assert not steady_state([1000, 1000, 1000, 1000]).reached
    assert not steady_state([0, 0, 0, 0, 0]).reached
