"""Instances and matchings: exact optima against brute force over all 8! assignments, the
seed -> instance contract, and the statistics of sampled hard instances."""

import hashlib
import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from selfplay_gen.games.matching import assignment as matching
from selfplay_gen.games.matching.assignment import batch_best_totals, batch_planned_totals, max_matching
from selfplay_gen.games.matching.instance import HIDDEN_VALUE, Instance, sample, score

PERMUTATIONS = np.array(list(itertools.permutations(range(8))))  # (40320, 8): paper of each reviewer
ROWS = np.arange(8)
ALL_SEEN = [[1] * 8 for _ in range(8)]


def all_totals(table) -> np.ndarray:
    """Total of every one of the 8! assignments of `table`."""
    return np.asarray(table)[ROWS, PERMUTATIONS].sum(axis=1)


def random_tables(seed: int, count: int) -> np.ndarray:
    """A (count, 8, 8) mix of uniform tables and tie-heavy ones (few distinct values, many 50s)."""
    rng = np.random.default_rng(seed)
    uniform = rng.integers(0, 100, (count // 2, 8, 8))
    ties = np.where(rng.random((count - count // 2, 8, 8)) < 0.6, HIDDEN_VALUE, rng.integers(45, 55, (1, 8, 8)))
    return np.concatenate([uniform, ties])


def batch_last(tables: np.ndarray) -> np.ndarray:
    return tables.transpose(1, 2, 0)


# --- optimal matchings -------------------------------------------------------------------------


def test_best_reward_is_the_brute_force_maximum():
    tables = random_tables(0, 40)
    brute = np.array([all_totals(t).max() for t in tables])
    for table, expected in zip(tables, brute):
        total, pairs = max_matching(table)
        assert total == expected
        assert sorted(r for r, _ in pairs) == list(range(8)) and sorted(p for _, p in pairs) == list(range(8))
        assert sum(table[r, p] for r, p in pairs) == total
    assert batch_best_totals(batch_last(tables)).tolist() == brute.tolist()


def test_planned_total_is_the_score_of_a_plan_optimal_matching():
    rng = np.random.default_rng(1)
    plans = random_tables(2, 40)
    scores = rng.integers(0, 100, plans.shape)
    planned = batch_planned_totals(batch_last(plans), batch_last(scores))
    unique = 0
    for plan, table, got in zip(plans, scores, planned):
        plan_totals, score_totals = all_totals(plan), all_totals(table)
        optimal = plan_totals == plan_totals.max()
        assert got in set(score_totals[optimal].tolist())
        if optimal.sum() == 1:
            unique += 1
            assert got == score_totals[optimal][0]
        # Ties are broken by the fixed pattern first, by the score only after that.
        keyed = plan_totals * 64 + all_totals(matching._TIEBREAK[:, :, 0])
        assert got == score_totals[keyed == keyed.max()].max()
    assert 0 < unique < len(plans)  # both kinds of plan were exercised


def test_planning_on_the_true_table_gets_the_best():
    tables = batch_last(random_tables(3, 30))
    assert batch_planned_totals(tables, tables).tolist() == batch_best_totals(tables).tolist()


def test_batch_functions_reject_bad_stacks():
    with pytest.raises(ValueError, match=r"\(8, 8, B\) stack.*\(3, 8, 8\)"):
        batch_best_totals(np.zeros((3, 8, 8), dtype=int))  # batch first instead of last
    with pytest.raises(ValueError, match=r"0\.\.99, got 0\.\.100"):
        batch_best_totals(np.full((8, 8, 2), 100) * np.eye(8, dtype=int)[:, :, None])
    with pytest.raises(ValueError, match="integer scores, got dtype float64"):
        batch_best_totals(np.full((8, 8, 2), 0.5))
    with pytest.raises(ValueError, match="differ in shape"):
        batch_planned_totals(np.zeros((8, 8, 2), dtype=int), np.zeros((8, 8, 3), dtype=int))
    assert batch_best_totals(np.zeros((8, 8, 0), dtype=int)).shape == (0,)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 99), min_size=8, max_size=8), min_size=8, max_size=8), st.permutations(range(8))
)
def test_no_assignment_beats_the_best_and_the_hungarian_one_reaches_it(table, papers):
    instance = Instance(table, (ALL_SEEN, ALL_SEEN), (1.0, 1.0))
    assert score(instance, list(enumerate(papers))) <= instance.best_reward
    assert score(instance, instance.best_assignment) == instance.best_reward
    assert batch_best_totals(np.array(table)[:, :, None]).tolist() == [instance.best_reward]


def test_score_rejects_what_is_not_a_perfect_matching():
    instance = Instance.from_seed(0)
    with pytest.raises(ValueError, match="not a perfect matching"):
        score(instance, [(r, 0) for r in range(8)])
    with pytest.raises(ValueError, match="not a perfect matching"):
        score(instance, [(r, r) for r in range(7)])


# --- the seed -> instance contract -------------------------------------------------------------


def digest(instance: Instance) -> str:
    return hashlib.sha256(json.dumps([instance.table, instance.masks]).encode()).hexdigest()[:16]


@pytest.mark.parametrize(
    "seed, table_digest, best, scales",
    [
        (0, "a1349d50e5c1dea7", 557, (1.5992669210873371, 9.781129602018062)),
        (1, "9c2e7ee968da7fef", 615, (7.619020227319178, 6.414217152222219)),
    ],
)
def test_golden_instances(seed, table_digest, best, scales):
    """Pins the seed -> instance contract: a change here changes every instance ever sampled."""
    instance = Instance.from_seed(seed)
    assert (digest(instance), instance.best_reward, instance.scales, instance.hard) == (
        table_digest,
        best,
        scales,
        True,
    )


def test_same_seed_same_instance_and_json_round_trip():
    first, again = Instance.from_seed(5), Instance.from_seed(5)
    assert first == again
    restored = Instance.from_json(first.to_json())
    assert restored == first and restored.to_dict() == first.to_dict()
    assert restored.best_assignment == first.best_assignment and restored.id == "seed-5"


def test_different_seeds_give_different_instances():
    digests = {digest(Instance.from_seed(seed)) for seed in range(20)}
    assert len(digests) == 20


def test_instance_invariants():
    instance = Instance.from_seed(3)
    table, masks = np.array(instance.table), np.array(instance.masks)
    hidden_both = (masks == 0).all(axis=0)
    assert hidden_both.any() and (table[hidden_both] == HIDDEN_VALUE).all()
    assert table.min() >= 0 and table.max() <= 99 and set(np.unique(masks)) <= {0, 1}
    assert all(1 <= s < 10 for s in instance.scales)
    for player in (0, 1):
        view = instance.view(player)
        for r, p in itertools.product(range(8), range(8)):
            expected = int(np.floor(table[r, p] * instance.scales[player])) if masks[player, r, p] else None
            assert view[r][p] == expected


def test_statistics_over_500_seeds_match_the_original():
    instances = [Instance.from_seed(seed) for seed in range(500)]
    masks = np.array([inst.masks for inst in instances])  # (500, 2, 8, 8)
    assert all(inst.hard for inst in instances)
    assert abs(np.mean([inst.best_reward for inst in instances]) - 612) < 6
    assert abs(masks.sum(axis=(2, 3)).mean() - 24.4) < 1
    assert abs((masks == 0).all(axis=1).sum(axis=(1, 2)).mean() - 23) < 1


def test_max_tries_caps_the_search_and_only_cuts_the_stream_short():
    for seed in range(5):
        capped = Instance.from_seed(seed, max_tries=1)
        assert not capped.hard
        table, visible, _, tried, hard = sample(seed, max_tries=1)
        assert (tried, hard) == (1, False) and capped.table == table.tolist()
    _, _, _, tried, hard = sample(0)
    assert hard and sample(0, max_tries=tried)[3:] == (tried, True)
    assert Instance.from_seed(0, max_tries=tried) == Instance.from_seed(0)
    assert sample(0, max_tries=tried - 1)[3:] == (tried - 1, False)
    with pytest.raises(ValueError, match="max_tries must be at least 1"):
        Instance.from_seed(0, max_tries=0)


# --- construction errors -----------------------------------------------------------------------


def test_bad_instances_are_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="8x8"):
        Instance([[1] * 8] * 7, (ALL_SEEN, ALL_SEEN), (1.0, 1.0))
    with pytest.raises(ValueError, match=r"0\.\.99.*120"):
        Instance([[120] * 8] * 8, (ALL_SEEN, ALL_SEEN), (1.0, 1.0))
    with pytest.raises(ValueError, match="lacks field 'mask2'"):
        Instance.from_human_record({"table": [[1] * 8] * 8, "mask1": ALL_SEEN, "scale1": 1, "scale2": 1})
    data = Instance.from_seed(0).to_dict()
    with pytest.raises(ValueError, match="stored best_reward 1 != recomputed 557"):
        Instance.from_dict({**data, "best_reward": 1})
