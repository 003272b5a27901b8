"""The report's statistics: point estimates, bootstrap intervals over tasks, paired comparisons.

Point estimates are exact rationals (`fractions.Fraction`) rounded once to a
float, so they equal tau2's own `compute_metrics` up to its float summation
(tau2 adds floats in its own order: 0.49999999999999994 where the exact value
is 0.5). Intervals and tests come from SciPy (`scipy.stats.bootstrap`,
`scipy.stats.permutation_test`), seeded, so a report is reproducible.

The unit of resampling is the task: tasks are what a benchmark samples, and
the trials of one task are not independent of each other.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
RESAMPLES = 10_000
SEED = 0
# An interval wider than this (10 points) cannot separate runs by the few points
# papers and leaderboards usually quote; the report warns.
WARN_WIDTH = 0.10
POWER = 0.80
ALPHA = 0.05

COMBINATORIAL = "combinatorial"
FIRST_K = "first_k"
CONVENTIONS = (COMBINATORIAL, FIRST_K)


def is_success(reward: float) -> bool:
    """tau2's rule (`tau2.metrics.agent_metrics.is_successful`): a reward of 1 within 1e-6."""
    return (1 - 1e-6) <= reward <= (1 + 1e-6)


@dataclass(frozen=True)
class TaskTrials:
    """One task's rewards, in trial order."""

    task_id: str
    rewards: tuple[float, ...]

    @property
    def successes(self) -> tuple[bool, ...]:
        return tuple(is_success(r) for r in self.rewards)


def max_k(tasks: Sequence[TaskTrials]) -> int:
    """The largest k every task has trials for (tau2 lowers k the same way)."""
    return min((len(t.rewards) for t in tasks), default=0)


def pass_hat_k_comb(n: int, c: int, k: int) -> Fraction:
    """tau2's estimator (Yao et al. 2024): C(c, k) / C(n, k), unbiased for P(k fresh trials all pass)."""
    if not 1 <= k <= n:
        raise ValueError(f"k={k} needs 1 <= k <= n={n}")
    return Fraction(math.comb(c, k), math.comb(n, k))


def pass_first_k(successes: Sequence[bool], k: int) -> Fraction:
    """The other convention: 1 when the task's first k trials all passed, else 0."""
    if not 1 <= k <= len(successes):
        raise ValueError(f"k={k} needs 1 <= k <= {len(successes)} trials")
    return Fraction(int(all(successes[:k])))


def task_pass_values(tasks: Sequence[TaskTrials], k: int, convention: str) -> list[Fraction]:
    """Each task's pass^k under `convention`; their mean over tasks is the domain's pass^k."""
    if convention == COMBINATORIAL:
        return [pass_hat_k_comb(len(t.rewards), sum(t.successes), k) for t in tasks]
    if convention == FIRST_K:
        return [pass_first_k(t.successes, k) for t in tasks]
    raise ValueError(f"unknown pass^k convention {convention!r}")


def mean(values: Sequence[Fraction]) -> Fraction:
    return sum(values, Fraction(0)) / len(values)


def average_reward(tasks: Sequence[TaskTrials]) -> Fraction:
    """The mean reward over all simulations, as tau2 computes it (every trial weighs the same)."""
    rewards = [Fraction(r) for t in tasks for r in t.rewards]
    return mean(rewards)


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its bootstrap interval and, when the interval is wide, a warning."""

    value: float
    low: float
    high: float
    tasks: int

    @property
    def width(self) -> float:
        return self.high - self.low

    @property
    def wide(self) -> bool:
        return self.width > WARN_WIDTH + 1e-12

    def as_dict(self) -> dict[str, object]:
        return {"value": self.value, "ci": [self.low, self.high], "ci_width": self.width,
                "tasks": self.tasks, "small_sample": self.wide}


def bootstrap_interval(data: tuple[np.ndarray, ...], statistic: Callable[..., np.ndarray],
                       seed: int = SEED, resamples: int = RESAMPLES) -> tuple[float, float]:
    """The percentile 95% interval of `statistic` over tasks resampled with replacement.

    `data` holds one value per task in each array (resampled together). Percentile,
    not BCa: BCa is undefined when every task has the same value (a perfect run),
    and the percentile interval is the one readers can reconstruct.
    """
    if len(data[0]) < 2 or all(np.all(d == d[0]) for d in data):
        point = float(statistic(*data, axis=-1))
        return point, point
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stats.bootstrap(data, statistic, paired=True, vectorized=True, n_resamples=resamples,
                                 confidence_level=CONFIDENCE, method="percentile",
                                 rng=np.random.default_rng(seed))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _mean(values: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(values, axis=axis)


def _ratio(numerators: np.ndarray, denominators: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.sum(numerators, axis=axis) / np.sum(denominators, axis=axis)


def reward_estimate(tasks: Sequence[TaskTrials], seed: int = SEED, resamples: int = RESAMPLES) -> Estimate:
    """Average reward over simulations; resampled by task (sum of rewards / number of trials)."""
    sums = np.array([math.fsum(t.rewards) for t in tasks], dtype=float)
    counts = np.array([len(t.rewards) for t in tasks], dtype=float)
    low, high = bootstrap_interval((sums, counts), _ratio, seed, resamples)
    return Estimate(float(average_reward(tasks)), low, high, len(tasks))


def pass_estimate(tasks: Sequence[TaskTrials], k: int, convention: str, seed: int = SEED,
                  resamples: int = RESAMPLES) -> Estimate:
    """pass^k under `convention`, with its interval over tasks."""
    values = task_pass_values(tasks, k, convention)
    low, high = bootstrap_interval((np.array([float(v) for v in values]),), _mean, seed, resamples)
    return Estimate(float(mean(values)), low, high, len(tasks))


def pass_curve(tasks: Sequence[TaskTrials], seed: int = SEED,
               resamples: int = RESAMPLES) -> dict[str, dict[int, Estimate]]:
    """pass^k for k = 1..max_k under both conventions."""
    return {convention: {k: pass_estimate(tasks, k, convention, seed, resamples)
                         for k in range(1, max_k(tasks) + 1)}
            for convention in CONVENTIONS}


@dataclass(frozen=True)
class PairedDifference:
    """Run B minus run A on the same tasks: mean of per-task differences, interval, test."""

    value: float
    low: float
    high: float
    p_value: float
    detectable: float
    tasks: int

    @property
    def within_noise(self) -> bool:
        return self.p_value >= ALPHA

    def as_dict(self) -> dict[str, object]:
        return {"value": self.value, "ci": [self.low, self.high], "p_value": self.p_value,
                "min_detectable_difference": self.detectable, "tasks": self.tasks,
                "within_noise": self.within_noise}


def sign_flip_p_value(differences: np.ndarray, seed: int = SEED, resamples: int = RESAMPLES) -> float:
    """Two-sided p-value of a paired permutation test: under no difference, each task's sign is a coin flip.

    SciPy enumerates all 2^n sign patterns when that is fewer than `resamples` (exact), else samples them.
    """
    if len(differences) == 0 or np.all(differences == 0):
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stats.permutation_test((differences,), _mean, permutation_type="samples", vectorized=True,
                                        n_resamples=resamples, alternative="two-sided",
                                        rng=np.random.default_rng(seed))
    return float(min(result.pvalue, 1.0))


def min_detectable_difference(differences: np.ndarray, trials: int) -> float:
    """The difference a two-sided test at 5% finds 80% of the time with this many tasks.

    (z_0.975 + z_0.80) * s / sqrt(n), with s the standard deviation of the per-task
    differences; when they are all equal (s = 0, nothing to estimate it from), s is
    the largest a difference of two means of `trials` pass/fail outcomes can have,
    sqrt(2 * 0.25 / trials).
    """
    n = len(differences)
    if n == 0:
        return math.inf
    s = float(np.std(differences, ddof=1)) if n > 1 else 0.0
    if s == 0.0:
        s = math.sqrt(2 * 0.25 / max(trials, 1))
    z = stats.norm.ppf(1 - ALPHA / 2) + stats.norm.ppf(POWER)
    return float(z * s / math.sqrt(n))


def paired_difference(a: Sequence[float | Fraction], b: Sequence[float | Fraction], trials: int,
                      seed: int = SEED, resamples: int = RESAMPLES) -> PairedDifference:
    """B - A over tasks given per-task values of each run in the same task order."""
    exact = [Fraction(y) - Fraction(x) for x, y in zip(a, b)]
    differences = np.array([float(d) for d in exact], dtype=float)
    value = float(mean(exact)) if exact else 0.0
    low, high = bootstrap_interval((differences,), _mean, seed, resamples) if len(a) else (0.0, 0.0)
    return PairedDifference(value, low, high, sign_flip_p_value(differences, seed, resamples),
                            min_detectable_difference(differences, trials), len(a))


def task_mean_rewards(tasks: Sequence[TaskTrials]) -> list[Fraction]:
    """Each task's mean reward over its trials, exactly."""
    return [mean([Fraction(r) for r in t.rewards]) for t in tasks]
