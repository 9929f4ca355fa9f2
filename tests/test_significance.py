"""The tests OODA decides with, against exact enumeration and SciPy's published values
(the reference numbers were computed with scipy.stats 1.17 and are pinned here)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldb.ooda.significance import (
    Moments,
    WelchResult,
    fisher_greater,
    holm,
    regularized_beta,
    student_t_sf,
    welch_greater,
)


def fisher_by_enumeration(
    bad_now: int, calls_now: int, bad_before: int, calls_before: int
) -> float:
    total, bad = calls_now + calls_before, bad_now + bad_before
    denominator = math.comb(total, calls_now)
    top = min(bad, calls_now)
    return (
        sum(
            math.comb(bad, x) * math.comb(total - bad, calls_now - x)
            for x in range(bad_now, top + 1)
        )
        / denominator
    )


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))),
    st.integers(0, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))),
)
def test_fisher_matches_exact_enumeration(now: tuple[int, int], before: tuple[int, int]) -> None:
    (calls_now, bad_now), (calls_before, bad_before) = now, before
    expected = (
        fisher_by_enumeration(bad_now, calls_now, bad_before, calls_before)
        if calls_now + calls_before
        else 1.0
    )
    assert fisher_greater(bad_now, calls_now, bad_before, calls_before) == pytest.approx(
        expected, rel=1e-9, abs=1e-15
    )


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ((30, 100, 10, 100), 0.0003252053538017104),
        ((3000, 10000, 1000, 10000), 4.7047967803291725e-284),
        ((1000, 10000, 1010, 10000), 0.602062967583719),
        ((5, 5, 0, 5), 0.003968253968253969),
    ],
)
def test_fisher_matches_scipy_at_large_counts(
    table: tuple[int, int, int, int], expected: float
) -> None:
    assert fisher_greater(*table) == pytest.approx(expected, rel=1e-9)


def test_fisher_rejects_impossible_tables() -> None:
    with pytest.raises(ValueError, match="cannot exceed"):
        fisher_greater(5, 4, 0, 4)
    with pytest.raises(ValueError, match="non-negative"):
        fisher_greater(-1, 4, 0, 4)


@pytest.mark.parametrize(
    ("t", "df", "expected"),
    [
        (2.0, 5, 0.050969739414929174),
        (-1.5, 12.5, 0.9207787065051751),
        (3.0, 1, 0.10241638234956672),
        (0.7, 200000, 0.24196405932375287),
        (0.0, 7, 0.5),
    ],
)
def test_student_t_tail_matches_scipy(t: float, df: float, expected: float) -> None:
    assert student_t_sf(t, df) == pytest.approx(expected, rel=1e-9)


def test_incomplete_beta_edges_and_symmetry() -> None:
    assert regularized_beta(0.0, 2, 3) == 0.0 and regularized_beta(1.0, 2, 3) == 1.0
    assert regularized_beta(0.3, 2.5, 4) == pytest.approx(1 - regularized_beta(0.7, 4, 2.5))
    with pytest.raises(ValueError):
        regularized_beta(1.5, 1, 1)


def test_welch_matches_scipy_from_moments_alone() -> None:
    before = Moments(6, 18.3, 55.99)  # 3.1 2.9 3.3 3.0 3.2 2.8
    now = Moments(5, 18.7, 70.23)  # 3.6 3.9 3.4 4.1 3.7
    result = welch_greater(now, before)
    assert result.t == pytest.approx(4.827024252283906, rel=1e-9)
    assert result.df == pytest.approx(6.947620456310324, rel=1e-9)
    assert result.p_value == pytest.approx(0.0009731808531097038, rel=1e-6)
    assert welch_greater(before, now).p_value == pytest.approx(1 - 0.0009731808531097038)


def test_welch_degenerate_samples() -> None:
    assert welch_greater(Moments(1, 5.0, 25.0), Moments(10, 10.0, 10.0)).p_value == 1.0
    constant_low, constant_high = Moments(4, 4.0, 4.0), Moments(4, 8.0, 16.0)
    assert welch_greater(constant_high, constant_low).p_value == 0.0
    assert welch_greater(constant_low, constant_low).p_value == 1.0


def test_holm_adjusts_step_down_and_keeps_order() -> None:
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([]) == []
    assert holm([0.2, 0.3]) == pytest.approx([0.4, 0.4])
    assert holm([0.9, 0.8]) == [1.0, 1.0]


def test_welch_from_two_values_per_window_is_a_real_test() -> None:
    """Promise: two calls per window are enough for Welch's test (variance needs two);
    equal but non-zero variances are tested, not taken as constant samples."""
    result = welch_greater(Moments(2, 8.0, 34.0), Moments(2, 4.0, 10.0))  # 3 5 vs 1 3
    # t = 2 / sqrt(1 + 1), df = 2: P(T > sqrt 2) = (1 - sqrt(2) / 2) / 2 for 2 df
    assert result.t == pytest.approx(math.sqrt(2.0), rel=1e-12)
    assert result.df == pytest.approx(2.0, rel=1e-12)
    assert result.p_value == pytest.approx((1.0 - math.sqrt(2.0) / 2.0) / 2.0, rel=1e-9)
    assert (
        welch_greater(Moments(3, 9.0, 29.0), Moments(3, 3.0, 5.0)).p_value < 0.05
    )  # 2 3 4 vs 0 1 2


def test_welch_degenerate_results_are_exact() -> None:
    """Promise: too few calls give no evidence (t 0, df 0, p 1); two constant samples are
    equal (p 1) or certainly different (p 0, t infinite), with n + m - 2 degrees."""
    assert welch_greater(Moments(1, 5.0, 25.0), Moments(10, 10.0, 10.0)) == WelchResult(
        0.0, 0.0, 1.0
    )
    assert welch_greater(Moments(10, 10.0, 10.0), Moments(1, 5.0, 25.0)) == WelchResult(
        0.0, 0.0, 1.0
    )
    low, high = Moments(4, 4.0, 4.0), Moments(3, 6.0, 12.0)
    assert welch_greater(high, low) == WelchResult(math.inf, 5.0, 0.0)
    assert welch_greater(low, high) == WelchResult(-math.inf, 5.0, 1.0)
    assert welch_greater(low, low) == WelchResult(0.0, 6.0, 1.0)


def test_the_tails_refuse_impossible_arguments_and_take_infinite_t() -> None:
    assert student_t_sf(math.inf, 3.0) == 0.0 and student_t_sf(-math.inf, 3.0) == 1.0
    for df in (0.0, -1.0):
        with pytest.raises(ValueError, match=f"^degrees of freedom must be positive, got {df}$"):
            student_t_sf(1.0, df)
    for x in (1.5, -0.1):
        with pytest.raises(ValueError, match=rf"^x must be in \[0, 1\], got {x}$"):
            regularized_beta(x, 1.0, 1.0)


def test_fisher_says_why_a_table_is_impossible() -> None:
    with pytest.raises(ValueError, match=r"^failures cannot exceed calls$"):
        fisher_greater(3, 2, 0, 5)
