"""bench/analysis/tictactoe_filtered_imitation.py: the tabular ceiling of imitating one's own TicTacToe wins."""

import random
from collections import Counter

import bench_modules
from click.testing import CliRunner

ttt = bench_modules.load("analysis/tictactoe_filtered_imitation.py", "tictactoe_filtered_imitation")


def test_minimax_never_loses_and_draws_itself():
    rng = random.Random(0)
    for _ in range(200):
        assert ttt.play(ttt.minimax, ttt.random_policy, rng)[0] != "O"
        assert ttt.play(ttt.random_policy, ttt.minimax, rng)[0] != "X"
    assert {ttt.play(ttt.minimax, ttt.minimax, rng)[0] for _ in range(50)} == {None}


def test_the_imitation_plays_only_kept_moves_where_it_kept_any():
    kept = {(ttt.EMPTY, "X"): Counter({4: 3, 0: 1})}
    policy, rng = ttt.imitation(kept), random.Random(1)
    opening = Counter(policy(ttt.EMPTY, "X", rng) for _ in range(400))
    assert set(opening) == {0, 4} and opening[4] > 2 * opening[0]
    elsewhere = {policy("X........", "O", rng) for _ in range(200)}
    assert elsewhere == set(range(1, 9))  # never seen: random play


def test_imitating_random_plays_wins_beats_random_play_in_both_seats():
    rng = random.Random(2)
    base = ttt.scores(ttt.random_policy, 1500, rng)
    imitated = ttt.scores(ttt.filtered_iteration(ttt.random_policy, 512, 16, rng), 1500, rng)
    for seat in (0, 1):
        assert imitated[f"win vs random, seat {seat}"] > base[f"win vs random, seat {seat}"] + 0.1


def test_the_command_prints_random_play_and_each_iteration():
    args = ["--iterations", "1", "--instances", "64", "--eval-games", "100"]
    result = CliRunner().invoke(ttt.main, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("| policy | win vs random, seat 0 |") and len(lines) == 4
    assert lines[2].startswith("| random play |") and lines[3].startswith("| iteration 1 |")
