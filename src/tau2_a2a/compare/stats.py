"""The report's statistics: point estimates, bootstrap intervals over tasks, paired comparisons, the gate.

The one module of tau2-a2a's estimators (the service's summary and
`tau2-a2a ab` use it too): pass^k under both conventions, averages and
percentiles, their intervals, the paired test over tasks, McNemar's test on task x trial pass/fail pairs, the
verdicts that flipped between two runs, the noise floor measured from a
run's repeated trials, and the regression gate built on them.

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypedDict

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


def pass_hat_ks(tasks: Sequence[TaskTrials]) -> dict[int, Fraction]:
    """tau2's pass^k (combinatorial) for k = 1..max_k: the figures tau2's `compute_metrics` reports, exactly."""
    return {k: mean(task_pass_values(tasks, k, COMBINATORIAL)) for k in range(1, max_k(tasks) + 1)}


def average_reward(tasks: Sequence[TaskTrials]) -> Fraction:
    """The mean reward over all simulations, as tau2 computes it (every trial weighs the same)."""
    rewards = [Fraction(r) for t in tasks for r in t.rewards]
    return mean(rewards)


def average(values: Iterable[float]) -> float | None:
    """The mean, summed exactly so that the order of the values cannot change it; None for no values."""
    exact = [Fraction(v) for v in values]
    return float(mean(exact)) if exact else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100), interpolated between the two nearest values (NumPy's default, which the
    metrics file's latencies use too); None for no values."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else None


class EstimateFigures(TypedDict):
    """An Estimate as the report keeps it."""

    value: float
    ci: list[float]
    ci_width: float
    tasks: int
    small_sample: bool


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

    def as_dict(self) -> EstimateFigures:
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


def sign_flip_p_value(differences: np.ndarray, seed: int = SEED, resamples: int = RESAMPLES,
                      alternative: str = "two-sided") -> float:
    """p-value of a paired permutation test: under no difference, each task's sign is a coin flip.

    Two-sided by default; `alternative="less"` asks whether the differences are below 0 (the second run worse).
    A task with no difference flips to itself and shifts every pattern's mean alike, so it is left out; SciPy
    enumerates all 2^n sign patterns of the others when that is fewer than `resamples` (exact), else samples them.
    """
    differences = differences[differences != 0]
    if len(differences) == 0:
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stats.permutation_test((differences,), _mean, permutation_type="samples", vectorized=True,
                                        n_resamples=resamples, alternative=alternative,
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


# -- flips, McNemar, the noise floor, the gate ------------------------------------------------

EXACT_BELOW = 25  # discordant pairs below which McNemar's test is the exact binomial one


@dataclass(frozen=True)
class Flip:
    """One (task, trial) verdict that differs between two runs."""

    task_id: str
    trial: int
    lost: bool  # passed in the first run, failed in the second (else the other way round)


def flips(a: Sequence[TaskTrials], b: Sequence[TaskTrials]) -> tuple[list[Flip], int]:
    """The (task, trial) pass/fail verdicts that differ between runs `a` and `b` (same tasks, same order), trial
    i of one paired with trial i of the other (tau2 gives trial i the same seed in every run); and how many pairs
    there are."""
    found, pairs = [], 0
    for x, y in zip(a, b):
        for trial, (passed, passes) in enumerate(zip(x.successes, y.successes)):
            pairs += 1
            if passed != passes:
                found.append(Flip(x.task_id, trial, passed))
    return found, pairs


@dataclass(frozen=True)
class McNemar:
    """McNemar's test on paired pass/fail verdicts: only the discordant pairs count."""

    lost: int  # passed in the first run, failed in the second
    gained: int  # failed in the first, passed in the second
    pairs: int
    p_value: float  # two-sided
    p_worse: float  # one-sided: the second run fails more often
    method: str

    def as_dict(self) -> dict[str, object]:
        return {"lost": self.lost, "gained": self.gained, "pairs": self.pairs, "p_value": self.p_value,
                "p_worse": self.p_worse, "method": self.method}


def mcnemar(lost: int, gained: int, pairs: int) -> McNemar:
    """Exact binomial McNemar (under no difference a discordant pair goes either way with probability 1/2) below
    EXACT_BELOW discordant pairs; the continuity-corrected normal approximation from there."""
    n = lost + gained
    if n == 0:
        return McNemar(lost, gained, pairs, 1.0, 1.0, "no discordant pairs")
    if n < EXACT_BELOW:
        two_sided = stats.binomtest(lost, n, 0.5, alternative="two-sided").pvalue
        worse = stats.binomtest(lost, n, 0.5, alternative="greater").pvalue
        return McNemar(lost, gained, pairs, float(min(two_sided, 1.0)), float(worse), "exact binomial")
    corrected = max(abs(lost - gained) - 1, 0) / math.sqrt(n)
    two_sided = 2 * float(stats.norm.sf(corrected))
    worse = float(stats.norm.sf((lost - gained - 1) / math.sqrt(n)))
    return McNemar(lost, gained, pairs, float(min(two_sided, 1.0)), float(worse),
                   "normal approximation, continuity-corrected")


class NoiseFloorFigures(TypedDict):
    """A NoiseFloor as the report keeps it."""

    tasks: int
    trials: int
    flip_rate: float
    single_trial: float
    at_trials: float


@dataclass(frozen=True)
class NoiseFloor:
    """How far two runs of this very agent on these tasks differ by chance, from the run's repeated trials."""

    tasks: int
    trials: int
    flip_rate: float  # the chance that two trials of a task disagree, averaged over tasks
    single_trial: float  # 95% of two single-trial runs' average rewards lie within this of each other
    at_trials: float  # the same for two runs of `trials` trials each

    def as_dict(self) -> NoiseFloorFigures:
        return {"tasks": self.tasks, "trials": self.trials, "flip_rate": self.flip_rate,
                "single_trial": self.single_trial, "at_trials": self.at_trials}


def noise_floor(tasks: Sequence[TaskTrials]) -> NoiseFloor | None:
    """The noise floor of pass/fail outcomes; None without two trials of every task to measure it from.

    Per task, c(n-c)/(n(n-1)) estimates p(1-p) without bias (p: the task's pass rate): two trials disagree with
    probability 2p(1-p), and the difference of two single-trial runs' means has variance sum 2p(1-p) / T^2.
    """
    trials = max_k(tasks)
    if trials < 2:
        return None
    spread = [sum(t.successes) * (len(t.rewards) - sum(t.successes)) / (len(t.rewards) * (len(t.rewards) - 1))
              for t in tasks]
    z = float(stats.norm.ppf(1 - ALPHA / 2))
    single = z * math.sqrt(2 * sum(spread)) / len(tasks)
    return NoiseFloor(len(tasks), trials, 2 * sum(spread) / len(tasks), single, single / math.sqrt(trials))


@dataclass(frozen=True)
class GateSettings:
    """How `--gate` judges: the chance of failing identical agents, the smallest drop that fails (a fraction), and
    whether runs with different trials per task may be judged (their trials paired i with i over the fewer)."""

    alpha: float = ALPHA
    min_effect: float = 0.0
    unequal_trials: bool = False


WORSE = "worse beyond noise"
WORSE_BELOW_MIN_EFFECT = "worse, but by less than the min effect"
NOT_WORSE = "no regression beyond noise"


@dataclass(frozen=True)
class GateVerdict:
    """Whether the second run is worse than the first beyond noise, and why, on one domain."""

    domain: str
    regression: bool
    difference: PairedDifference
    p_worse: float  # one-sided paired permutation test over tasks
    mcnemar: McNemar
    alpha: float
    min_effect: float
    verdict: str  # WORSE, WORSE_BELOW_MIN_EFFECT or NOT_WORSE
    trials: tuple[int, int]  # the fewest trials any task has, in a and in b
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {"domain": self.domain, "regression": self.regression, "verdict": self.verdict,
                "difference": self.difference.value, "p_worse": self.p_worse, "mcnemar": self.mcnemar.as_dict(),
                "alpha": self.alpha, "min_effect": self.min_effect,
                "trials": {"base": self.trials[0], "new": self.trials[1]}, "reason": self.reason}


def gate(domain: str, a: Sequence[TaskTrials], b: Sequence[TaskTrials], alpha: float = ALPHA,
         min_effect: float = 0.0, seed: int = SEED, resamples: int = RESAMPLES) -> GateVerdict:
    """Is run `b` worse than run `a` on these tasks beyond noise?

    A regression when the average reward drops by at least `min_effect` and one of two one-sided tests rejects
    "no difference" at alpha/2 each (Bonferroni: identical agents fail the gate at most alpha of the time): the
    paired permutation test on per-task mean rewards, and McNemar's test on the task x trial pass/fail pairs.
    """
    a_means, b_means = task_mean_rewards(a), task_mean_rewards(b)
    difference = paired_difference(a_means, b_means, min(max_k(a), max_k(b)), seed, resamples)
    differences = np.array([float(y - x) for x, y in zip(a_means, b_means)], dtype=float)
    p_worse = sign_flip_p_value(differences, seed, resamples, alternative="less")
    flipped, pairs = flips(a, b)
    test = mcnemar(sum(f.lost for f in flipped), sum(not f.lost for f in flipped), pairs)
    drop = -difference.value
    significant = min(p_worse, test.p_worse) < alpha / 2
    regression = drop > 0 and drop >= min_effect - 1e-12 and significant
    evidence = (f"paired permutation over {len(a)} tasks p = {p_worse:.3g}, McNemar {test.lost} lost vs "
                f"{test.gained} gained of {pairs} task x trial pairs p = {test.p_worse:.3g} (one-sided, "
                f"{test.method}); alpha {alpha:g} (each test at {alpha / 2:g}), min effect {min_effect * 100:g} points")
    trials = (max_k(a), max_k(b))
    if trials[0] != trials[1]:  # only with GateSettings.unequal_trials: say how the runs were paired
        evidence += (f"; trials per task {trials[0]} (base) vs {trials[1]} (new): McNemar paired trial i with "
                     f"trial i over the first {min(trials)}, the permutation test compared per-task means")
    change = f"average reward {difference.value * 100:+.1f} points"
    verdict = WORSE if regression else WORSE_BELOW_MIN_EFFECT if drop > 0 and significant else NOT_WORSE
    reason = f"{domain}: {verdict}: {change}; {evidence}"
    return GateVerdict(domain, regression, difference, p_worse, test, alpha, min_effect, verdict, trials, reason)
