"""Group normalization, constant groups, expert selection, preference pairs and the split, on
hand-made groups whose values are worked out by hand."""
import math

import pandas as pd
import pytest

from convert.groups import EPS, advantages, constant, extremes, top
from convert.split import validation_instances

# group a: 1.0, 0.0, 0.5 (mean 0.5, population std sqrt(1/6)); b: 0.2, 0.2 (constant); c: one game
REWARDS = pd.Series([1.0, 0.0, 0.5, 0.2, 0.2, 0.7])
GROUPS = pd.Series(["a", "a", "a", "b", "b", "c"])


def test_mean_subtracts_the_group_mean():
    assert advantages(REWARDS, GROUPS, "mean").tolist() == pytest.approx([0.5, -0.5, 0.0, 0.0, 0.0, 0.0])


def test_mean_std_divides_by_the_population_std():
    std = math.sqrt((0.5 ** 2 + 0.5 ** 2 + 0.0) / 3)          # 0.408248...
    expected = [0.5 / (std + EPS), -0.5 / (std + EPS), 0.0, 0.0, 0.0, 0.0]
    assert advantages(REWARDS, GROUPS, "mean-std").tolist() == pytest.approx(expected, rel=1e-12)
    assert expected[0] == pytest.approx(1.2247419, rel=1e-6)


def test_none_passes_rewards_through():
    assert advantages(REWARDS, GROUPS, "none").tolist() == REWARDS.tolist()


def test_constant_groups_have_exactly_zero_advantage():
    # 0.1 three times: the float mean is not exactly 0.1, the advantage must still be exactly 0
    rewards, groups = pd.Series([0.1, 0.1, 0.1]), pd.Series([0, 0, 0])
    assert (rewards - rewards.mean()).abs().max() > 0
    for normalize in ("mean", "mean-std"):
        assert advantages(rewards, groups, normalize).tolist() == [0.0, 0.0, 0.0]
    assert constant(REWARDS, GROUPS).tolist() == [False, False, False, True, True, True]


def test_two_rows_per_game_do_not_change_the_statistics():
    twice = pd.concat([REWARDS, REWARDS], ignore_index=True)
    groups = pd.concat([GROUPS, GROUPS], ignore_index=True)
    assert advantages(twice, groups, "mean-std")[:6].tolist() == pytest.approx(advantages(REWARDS, GROUPS, "mean-std").tolist())


def test_top_keeps_the_best_rewarded_share_of_each_group():
    # a: ceil(0.5 * 3) = 2 best (1.0 and 0.5); b: ceil(0.5 * 2) = 1, the first of the tie; c: its game
    assert top(REWARDS, GROUPS, 0.5).tolist() == [True, False, True, True, False, True]
    # a game without reward is never kept, even as the best of its group
    assert top(pd.Series([0.0, 0.0]), pd.Series([0, 0]), 1.0).tolist() == [False, False]


def test_extremes_pair_best_and_worst_and_skip_ties():
    pairs = extremes(REWARDS, GROUPS)
    assert pairs.to_dict("index") == {"a": {"chosen": 0, "rejected": 1}}


def test_split_keeps_instances_whole_and_is_seeded():
    ids = [f"seed-{i}" for i in range(40)]
    val = validation_instances(ids * 3, 0.25, seed=7)
    assert len(val) == 10 and val <= set(ids)
    assert validation_instances(list(reversed(ids)), 0.25, seed=7) == val      # order of games does not matter
    assert validation_instances(ids, 0.25, seed=8) != val
    assert validation_instances(ids, 0.0, seed=7) == set()
    assert len(validation_instances(ids[:2], 0.01, seed=0)) == 1              # both sides non-empty
    assert validation_instances(ids[:1], 0.5, seed=0) == set()


def test_valid_move_bonus_gives_all_zero_groups_signal():
    from convert.pipeline import training_reward

    def record(valid, invalid, termination="max_invalid", reward=0.0):
        return {"outcome": {"normalized_reward": reward, "termination": termination},
                "stats": {"valid_moves": valid, "invalid_moves": invalid}}

    games = [record(0, 3), record(1, 3), record(2, 0, "max_new_tokens")]
    assert [training_reward(g, 0.0) for g in games] == [0.0, 0.0, 0.0]          # no agreement: constant group
    assert [training_reward(g, 1.0) for g in games] == [0.0, 0.25, 2 / 3]       # the turn that ran long counts
    assert training_reward(record(4, 0, "accepted", 0.9), 0.5) == 0.9 + 0.5    # added to the game's score
