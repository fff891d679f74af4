"""Group normalization, constant groups, expert selection, preference pairs and the split, on
hand-made groups whose values are worked out by hand."""

import pandas as pd

from convert.groups import constant, ranked_pairs, top
from convert.split import validation_instances
from selfplay_gen.reward import RewardTerms, training_reward

# group a: 1.0, 0.0, 0.5 (mean 0.5, population std sqrt(1/6)); b: 0.2, 0.2 (constant); c: one game
REWARDS = pd.Series([1.0, 0.0, 0.5, 0.2, 0.2, 0.7])
GROUPS = pd.Series(["a", "a", "a", "b", "b", "c"])


def test_constant_marks_groups_whose_rewards_are_all_equal():
    assert constant(REWARDS, GROUPS).tolist() == [False, False, False, True, True, True]


def test_top_keeps_the_best_rewarded_share_of_each_group():
    # a: ceil(0.5 * 3) = 2 best (1.0 and 0.5); b: ceil(0.5 * 2) = 1, the first of the tie; c: its game
    assert top(REWARDS, GROUPS, 0.5).tolist() == [True, False, True, True, False, True]
    # a game without reward is never kept, even as the best of its group
    assert top(pd.Series([0.0, 0.0]), pd.Series([0, 0]), 1.0).tolist() == [False, False]


def test_ranked_pairs_take_the_widest_gaps_first_and_skip_ties():
    def pairs(*args, **kwargs):
        return list(ranked_pairs(*args, **kwargs).itertuples(index=False, name=None))

    assert pairs(REWARDS, REWARDS, GROUPS) == [(0, 1)]  # a: best against worst; b: all equal; c: one game
    assert pairs(REWARDS, REWARDS, GROUPS, per_group=3) == [(0, 1), (0, 2), (2, 1)]  # gaps 1.0, 0.5, 0.5
    assert pairs(REWARDS, REWARDS, GROUPS, per_group=9) == [(0, 1), (0, 2), (2, 1)]
    tied = pd.Series([0.3, 0.9, 0.9, 0.1])
    assert pairs(tied, tied, pd.Series([0] * 4)) == [(1, 3)]  # the first in file order among equals
    # ranked by the rules (win 1 > tie 0 > loss -1), widest margin first: two wins are not a pair
    margin = pd.Series([3.0, 1.0, -2.0, 0.0])
    ranks = margin.apply(lambda m: (m > 0) - (m < 0))
    assert pairs(margin, ranks, pd.Series([0] * 4), per_group=9) == [(0, 2), (0, 3), (1, 2), (3, 2), (1, 3)]


def test_split_keeps_instances_whole_and_is_seeded():
    ids = [f"seed-{i}" for i in range(40)]
    val = validation_instances(ids * 3, 0.25, seed=7)
    assert len(val) == 10 and val <= set(ids)
    assert validation_instances(list(reversed(ids)), 0.25, seed=7) == val  # order of games does not matter
    assert validation_instances(ids, 0.25, seed=8) != val
    assert validation_instances(ids, 0.0, seed=7) == set()
    assert len(validation_instances(ids[:2], 0.01, seed=0)) == 1  # both sides non-empty
    assert validation_instances(ids[:1], 0.5, seed=0) == set()


def test_invalid_move_penalty_is_the_seats_share_of_invalid_turns():
    def record(reward, invalid_by_seat, turns=(4, 2)):
        events = [{"player": s, "kind": "invalid"} for s, n in enumerate(invalid_by_seat) for _ in range(n)]
        events.append({"player": 0, "kind": "message"})
        return {
            "outcome": {"rewards": [reward, reward]},
            "events": events,
            "players": [{"turns": [{}] * turns[0]}, {"turns": [{}] * turns[1]}],
        }

    game = record(0.0, (1, 2))
    penalty = RewardTerms(invalid_move_penalty=1.0)
    assert [training_reward(game, s, RewardTerms(invalid_move_penalty=0.0)) for s in (0, 1)] == [0.0, 0.0]
    assert [training_reward(game, s, penalty) for s in (0, 1)] == [-0.25, -1.0]  # 1 of 4 turns, 2 of 2
    assert training_reward(record(0.9, (0, 0)), 0, penalty) == 0.9  # all valid: no shaping at all
    scripted = {"outcome": {"rewards": [0.5, 0.5]}, "events": [], "players": [{"kind": "scripted"}] * 2}
    assert training_reward(scripted, 1, penalty) == 0.5
