"""The report's estimators and tests, against values worked out by hand and known exact answers."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as scipy_stats

from tau2_a2a.compare import stats
from tau2_a2a.compare.stats import TaskTrials

# Three tasks, three trials: pass/fail per trial in order.
HAND = [TaskTrials("a", (1.0, 1.0, 0.0)), TaskTrials("b", (1.0, 1.0, 1.0)), TaskTrials("c", (0.0, 1.0, 1.0))]


def test_success_is_tau2s_rule() -> None:
    assert stats.is_success(1.0) and stats.is_success(1 - 1e-7) and stats.is_success(1 + 1e-7)
    assert not stats.is_success(1 - 1e-5) and not stats.is_success(0.5) and not stats.is_success(0.0)


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (3, 2, 1, Fraction(2, 3)), (3, 2, 2, Fraction(1, 3)), (3, 2, 3, Fraction(0)), (3, 3, 3, Fraction(1)),
    (4, 3, 2, Fraction(3, 6)), (5, 4, 3, Fraction(4, 10)), (1, 0, 1, Fraction(0)),
])
def test_combinatorial_pass_hat_k_by_hand(n: int, c: int, k: int, expected: Fraction) -> None:
    assert stats.pass_hat_k_comb(n, c, k) == expected


def test_pass_hat_k_refuses_k_beyond_the_trials() -> None:
    with pytest.raises(ValueError, match="k=4 needs 1 <= k <= n=3"):
        stats.pass_hat_k_comb(3, 3, 4)
    with pytest.raises(ValueError, match="k=0"):
        stats.pass_first_k((True,), 0)


def test_both_conventions_on_a_hand_worked_example() -> None:
    # combinatorial: a = C(2,k)/C(3,k), b = 1, c = C(2,k)/C(3,k)
    assert stats.mean(stats.task_pass_values(HAND, 1, stats.COMBINATORIAL)) == Fraction(7, 9)
    assert stats.mean(stats.task_pass_values(HAND, 2, stats.COMBINATORIAL)) == Fraction(5, 9)
    assert stats.mean(stats.task_pass_values(HAND, 3, stats.COMBINATORIAL)) == Fraction(1, 3)
    # first k trials: a passes k=1,2; b always; c never (its first trial failed)
    assert stats.mean(stats.task_pass_values(HAND, 1, stats.FIRST_K)) == Fraction(2, 3)
    assert stats.mean(stats.task_pass_values(HAND, 2, stats.FIRST_K)) == Fraction(2, 3)
    assert stats.mean(stats.task_pass_values(HAND, 3, stats.FIRST_K)) == Fraction(1, 3)
    curve = stats.pass_curve(HAND, resamples=2000)
    assert [e.value for e in curve[stats.COMBINATORIAL].values()] == [7 / 9, 5 / 9, 1 / 3]
    assert [e.value for e in curve[stats.FIRST_K].values()] == [2 / 3, 2 / 3, 1 / 3]


def test_max_k_is_the_fewest_trials_any_task_has() -> None:
    assert stats.max_k(HAND + [TaskTrials("d", (1.0, 1.0))]) == 2
    assert set(stats.pass_curve(HAND + [TaskTrials("d", (1.0, 1.0))], resamples=500)[stats.FIRST_K]) == {1, 2}


def test_average_reward_weighs_every_trial_and_keeps_partial_rewards_exact() -> None:
    tasks = [TaskTrials("a", (0.5, 1.0)), TaskTrials("b", (0.0, 0.25, 1.0))]
    assert stats.average_reward(tasks) == Fraction(275, 500)
    assert stats.reward_estimate(tasks, resamples=500).value == 0.55


def test_interval_of_two_tasks_is_known_exactly() -> None:
    # Resampling two tasks {0, 1}: means 0, 1/2, 1 with probabilities 1/4, 1/2, 1/4,
    # so the 2.5% and 97.5% quantiles are 0 and 1.
    tasks = [TaskTrials("a", (0.0,)), TaskTrials("b", (1.0,))]
    estimate = stats.pass_estimate(tasks, 1, stats.COMBINATORIAL)
    assert (estimate.value, estimate.low, estimate.high) == (0.5, 0.0, 1.0)
    assert estimate.wide


def test_interval_collapses_when_every_task_agrees() -> None:
    tasks = [TaskTrials(str(i), (1.0, 1.0, 1.0)) for i in range(5)]
    reward = stats.reward_estimate(tasks)
    assert (reward.value, reward.low, reward.high, reward.wide) == (1.0, 1.0, 1.0, False)


@pytest.mark.parametrize(("tasks", "passed"), [(200, 140), (400, 100), (120, 60)])
def test_single_trial_interval_matches_the_exact_binomial_interval(tasks: int, passed: int) -> None:
    """One trial per task: pass^1 is a binomial proportion, whose exact (Clopper-Pearson) interval is known."""
    outcomes = [TaskTrials(str(i), (1.0 if i < passed else 0.0,)) for i in range(tasks)]
    estimate = stats.pass_estimate(outcomes, 1, stats.COMBINATORIAL)
    exact = scipy_stats.binomtest(passed, tasks).proportion_ci(0.95, method="exact")
    assert estimate.value == passed / tasks
    assert estimate.low == pytest.approx(exact.low, abs=0.015)
    assert estimate.high == pytest.approx(exact.high, abs=0.015)


def test_intervals_are_reproducible_from_the_seed() -> None:
    tasks = [TaskTrials(str(i), tuple(((i * 37 + t * 11) % 13) / 12 for t in range(4))) for i in range(30)]
    assert stats.reward_estimate(tasks, seed=5, resamples=500) == stats.reward_estimate(tasks, seed=5, resamples=500)
    assert stats.reward_estimate(tasks, seed=5, resamples=500) != stats.reward_estimate(tasks, seed=6, resamples=500)


def test_wide_intervals_are_flagged_and_narrow_ones_not() -> None:
    narrow = [TaskTrials(str(i), (1.0 if i % 50 else 0.0,)) for i in range(2000)]
    assert not stats.reward_estimate(narrow).wide
    wide = [TaskTrials(str(i), (1.0 if i % 2 else 0.0,)) for i in range(20)]
    assert stats.reward_estimate(wide).wide


def test_sign_flip_p_values_are_exact_on_small_cases() -> None:
    # All 2^6 sign patterns: only the two with every sign equal are as extreme as six +1s.
    assert stats.sign_flip_p_value(np.ones(6)) == pytest.approx(2 / 64, abs=1e-12)
    # A zero difference flips to itself: 4 of 64 patterns reach |mean| = 5/6.
    assert stats.sign_flip_p_value(np.array([1, 1, 1, 1, 1, 0.0])) == pytest.approx(4 / 64, abs=1e-12)
    assert stats.sign_flip_p_value(np.zeros(5)) == 1.0
    # +1, -1 on two tasks: every pattern is as extreme.
    assert stats.sign_flip_p_value(np.array([1.0, -1.0, 1.0, -1.0])) == 1.0


def test_paired_difference_on_a_constructed_case() -> None:
    a = [1.0, 1.0, 0.0, 0.0, 1.0, 0.5]
    b = [1.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    d = stats.paired_difference(a, b, trials=2)
    assert d.value == pytest.approx(0.25, abs=0) and d.tasks == 6
    # nonzero differences -1, +1, +1, +0.5: sums as extreme as |1.5| among the 16 sign patterns of those four
    patterns = [np.dot(signs, [-1, 1, 1, 0.5]) for signs in np.array(np.meshgrid(*[[-1, 1]] * 4)).T.reshape(-1, 4)]
    expected = sum(abs(s) >= 1.5 - 1e-12 for s in patterns) / 16
    assert d.p_value == pytest.approx(expected, abs=1e-12)
    assert d.within_noise
    assert d.low < d.value < d.high


def test_min_detectable_difference_by_hand() -> None:
    z = 1.959963984540054 + 0.8416212335729143
    # differences 1, 0, 1, 0: standard deviation sqrt(1/3)
    assert stats.min_detectable_difference(np.array([1.0, 0, 1, 0]), trials=1) == pytest.approx(
        z * math.sqrt(1 / 3) / 2, rel=1e-12)
    # all equal: the largest spread of a difference of two 4-trial means, sqrt(2 * 0.25 / 4)
    assert stats.min_detectable_difference(np.zeros(16), trials=4) == pytest.approx(
        z * math.sqrt(0.125) / 4, rel=1e-12)


def test_a_clear_difference_is_found() -> None:
    a = [0.0] * 30
    b = [1.0] * 24 + [0.0] * 6
    d = stats.paired_difference(a, b, trials=1)
    assert d.value == 0.8 and not d.within_noise and d.p_value < 0.001 and d.low > 0.6


def tasks_of(*outcomes: str) -> list[TaskTrials]:
    """Tasks from strings of trial outcomes: "1101" passed trials 0, 1 and 3."""
    return [TaskTrials(str(i), tuple(float(c) for c in trials)) for i, trials in enumerate(outcomes)]


def test_flips_pair_trial_i_with_trial_i() -> None:
    a = tasks_of("111", "101", "000")
    b = tasks_of("110", "011", "000")
    found, pairs = stats.flips(a, b)
    assert pairs == 9
    assert found == [stats.Flip("0", 2, True), stats.Flip("1", 0, True), stats.Flip("1", 1, False)]


def test_mcnemar_is_the_exact_binomial_test_on_few_discordant_pairs() -> None:
    test = stats.mcnemar(lost=7, gained=1, pairs=40)
    # under no difference each of the 8 discordant pairs goes either way with probability 1/2
    worse = sum(math.comb(8, i) for i in range(7, 9)) / 2 ** 8
    assert test.p_worse == pytest.approx(worse, abs=1e-12) and test.p_value == pytest.approx(2 * worse, abs=1e-12)
    assert test.method == "exact binomial"
    assert stats.mcnemar(0, 0, 10).p_value == stats.mcnemar(0, 0, 10).p_worse == 1.0
    assert stats.mcnemar(1, 7, 40).p_worse == pytest.approx(1 - sum(math.comb(8, i) for i in range(0, 1)) / 2 ** 8,
                                                            abs=1e-12)


def test_mcnemar_uses_the_corrected_normal_approximation_on_many() -> None:
    test = stats.mcnemar(lost=30, gained=10, pairs=200)
    assert test.method == "normal approximation, continuity-corrected"
    assert test.p_value == pytest.approx(math.erfc((19 / math.sqrt(40)) / math.sqrt(2)), rel=1e-9)
    assert test.p_worse == pytest.approx(0.5 * math.erfc((19 / math.sqrt(40)) / math.sqrt(2)), rel=1e-9)


def test_the_noise_floor_by_hand() -> None:
    assert stats.noise_floor(tasks_of("1", "0")) is None  # one trial: nothing to measure it from
    floor = stats.noise_floor(tasks_of("1100", "1111", "1000", "0000"))
    # c(n-c)/(n(n-1)): 4/12, 0, 3/12, 0
    spread = 4 / 12 + 3 / 12
    assert floor.flip_rate == pytest.approx(2 * spread / 4, abs=1e-12)
    assert floor.single_trial == pytest.approx(1.959963984540054 * math.sqrt(2 * spread) / 4, rel=1e-9)
    assert floor.at_trials == pytest.approx(floor.single_trial / 2, rel=1e-12)


def test_the_gate_passes_identical_runs() -> None:
    run = tasks_of(*["1101", "0000", "1111", "0110"] * 5)
    verdict = stats.gate("airline", run, run)
    assert not verdict.regression and verdict.p_worse == 1.0 and verdict.mcnemar.p_worse == 1.0
    assert verdict.reason.startswith("airline: no regression beyond noise: average reward +0.0 points; ")


def test_the_gate_fails_a_regression_and_honours_the_min_effect() -> None:
    base = tasks_of(*["1111"] * 20)
    new = tasks_of(*["0000"] * 8 + ["1111"] * 12)
    verdict = stats.gate("airline", base, new, resamples=2000)
    assert verdict.regression and verdict.difference.value == pytest.approx(-0.4, abs=1e-12)
    assert verdict.p_worse == pytest.approx(1 / 2 ** 8, abs=1e-12)  # exact: 2^8 sign patterns of 8 differing tasks
    assert (verdict.mcnemar.lost, verdict.mcnemar.gained, verdict.mcnemar.pairs) == (32, 0, 80)
    assert verdict.reason.startswith("airline: worse beyond noise: average reward -40.0 points; paired permutation "
                                     "over 20 tasks p = 0.00391, McNemar 32 lost vs 0 gained of 80 task x trial pairs")
    lenient = stats.gate("airline", base, new, min_effect=0.5, resamples=2000)
    assert not lenient.regression and lenient.reason.startswith("airline: worse, but by less than the min effect")
    improved = stats.gate("airline", new, base, resamples=2000)
    assert not improved.regression and improved.difference.value == pytest.approx(0.4, abs=1e-12)


def simulated_run(rates: np.ndarray, trials: int, rng: np.random.Generator) -> list[TaskTrials]:
    return [TaskTrials(str(i), tuple(float(x) for x in rng.random(trials) < p)) for i, p in enumerate(rates)]


def test_the_gate_fails_identical_agents_at_most_alpha_of_the_time_and_finds_a_real_drop() -> None:
    """Pairs of runs drawn from the same per-task pass rates: the gate fails at most 5% of them; runs whose every
    task lost 25 points of pass rate: it fails at least 80% of them (30 tasks x 4 trials; seeded)."""
    rng = np.random.default_rng(7)
    rates = rng.uniform(0.3, 1.0, size=30)
    same = [stats.gate("d", simulated_run(rates, 4, rng), simulated_run(rates, 4, rng), resamples=1000).regression
            for _ in range(200)]
    assert sum(same) / len(same) <= 0.05
    worse = [stats.gate("d", simulated_run(rates, 4, rng), simulated_run(np.clip(rates - 0.25, 0, 1), 4, rng),
                        resamples=1000).regression for _ in range(50)]
    assert sum(worse) / len(worse) >= 0.8


def test_a_difference_no_task_count_can_detect_is_said_so() -> None:
    """With two tasks that disagree the formula asks for more than 100 points: no reward moves that far, so the sentence and
    the page say that no difference is reliably detected."""
    from tau2_a2a.compare.html import detectable_points
    from tau2_a2a.compare.report import difference_sentence

    d = stats.paired_difference([1.0, 0.0], [0.0, 1.0], trials=1)
    assert d.detectable > 1
    assert "with 2 tasks x 1 trials, no difference in average reward is reliably detected" in difference_sentence(
        "a", "b", d, tasks=2, trials=1)
    assert (detectable_points(d.detectable), detectable_points(0.25), detectable_points(None)) == (
        "> 100", "25.0", "–")
