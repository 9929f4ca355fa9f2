"""The statistics OODA decides with: exact or well-founded tests, no raw differences.

* Success degrading: Fisher's exact test, one-sided, on the 2x2 table (window x
  failed/succeeded). Exact at any count, so a tool with 8 calls is judged as
  fairly as one with 80,000. The hypergeometric tail is summed from the observed
  count outwards and stops once terms no longer matter, so it costs O(sqrt(n)).
* Latency degrading: Welch's t-test on log(1 + duration_ms). Latencies are
  right-skewed and close to log-normal; on the log scale the mean is the log of the
  geometric mean, so the test asks whether the typical call got slower by a factor,
  and it needs only count, sum and sum of squares per window (SQL aggregates).
* Many tools are tested at once: Holm's step-down correction keeps the chance of
  any false finding in a cycle at ``alpha``.

Pure Python (math.lgamma, a continued fraction for the incomplete beta): no SciPy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: A tail term this small relative to the running sum ends a summation.
_NEGLIGIBLE = 1e-17


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_greater(bad_now: int, calls_now: int, bad_before: int, calls_before: int) -> float:
    """One-sided Fisher exact p-value that the failure rate rose from the earlier window
    to the later one: P(X >= bad_now), X hypergeometric with the table's margins."""
    for value in (bad_now, calls_now, bad_before, calls_before):
        if value < 0:
            raise ValueError(f"counts must be non-negative, got {value}")
    if bad_now > calls_now or bad_before > calls_before:
        raise ValueError("failures cannot exceed calls")
    total = calls_now + calls_before
    bad = bad_now + bad_before
    low, high = max(0, calls_now - (total - bad)), min(bad, calls_now)
    if total == 0 or bad_now <= low:
        return 1.0
    log_denominator = _log_comb(total, calls_now)

    def term(x: int) -> float:
        return math.exp(_log_comb(bad, x) + _log_comb(total - bad, calls_now - x) - log_denominator)

    expected = calls_now * bad / total
    if bad_now > expected:  # upper tail from the observation: its terms only shrink
        return min(1.0, _tail(term, bad_now, high, 1))
    # The observation is at or below the mean: 1 - P(X <= bad_now - 1), a shrinking tail.
    return max(0.0, min(1.0, 1.0 - _tail(term, bad_now - 1, low, -1)))


def _tail(term: Callable[[int], float], start: int, stop: int, step: int) -> float:
    total = 0.0
    for x in range(start, stop + step, step):
        value = term(x)
        total += value
        if value < _NEGLIGIBLE * total:
            break
    return total


@dataclass(frozen=True)
class Moments:
    """Count, sum and sum of squares of a sample (what SQL aggregates give)."""

    n: int
    total: float
    squares: float

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0

    @property
    def variance(self) -> float:
        """The unbiased sample variance (0 for fewer than two values)."""
        if self.n < 2:
            return 0.0
        return max(0.0, (self.squares - self.total * self.total / self.n) / (self.n - 1))


@dataclass(frozen=True)
class WelchResult:
    t: float
    df: float
    p_value: float


def welch_greater(now: Moments, before: Moments) -> WelchResult:
    """One-sided Welch t-test that the mean of ``now`` exceeds the mean of ``before``."""
    if now.n < 2 or before.n < 2:
        return WelchResult(0.0, 0.0, 1.0)
    a, b = now.variance / now.n, before.variance / before.n
    difference = now.mean - before.mean
    if a + b == 0.0:  # two constant samples: equal or certainly different
        return WelchResult(
            math.copysign(math.inf, difference) if difference else 0.0,
            float(now.n + before.n - 2),
            0.0 if difference > 0 else 1.0,
        )
    t = difference / math.sqrt(a + b)
    df = (a + b) ** 2 / (a * a / (now.n - 1) + b * b / (before.n - 1))
    return WelchResult(t, df, student_t_sf(t, df))


def student_t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * regularized_beta(df / (df + t * t), df / 2.0, 0.5)
    return tail if t > 0 else 1.0 - tail


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), by Lentz's continued fraction (Numerical Recipes 6.4)."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1.0 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return result


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (same order): reject where adjusted < alpha keeps the
    family-wise error rate at alpha for any dependence between the tests."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted
