"""bench/analysis/tictactoe_tabular_grpo.py: the GRPO self-play loop with a table for a TicTacToe policy, and the
shared per-cell term that stands for a language model's cell tokens."""

import bench_modules
import numpy as np

bench_modules.load("analysis/tictactoe_filtered_imitation.py", "tictactoe_filtered_imitation")
grpo = bench_modules.load("analysis/tictactoe_tabular_grpo.py", "tictactoe_tabular_grpo")


def test_the_table_has_a_row_for_every_position_with_a_move_to_make():
    assert len(grpo.INDEX) == 4520  # TicTacToe's non-terminal positions reachable from the empty board
    empty = grpo.INDEX[grpo.EMPTY, grpo.FIRST]
    assert grpo.LEGAL[empty].all() and not grpo.SECOND[empty]
    full_but_one = grpo.INDEX["XOXXOOOX.", "X"]  # eight marks, no line: one free cell
    assert grpo.LEGAL[full_but_one].tolist() == [False] * 8 + [True]


def test_self_play_beats_random_play_as_the_first_mover_within_a_few_dozen_steps():
    (start,) = grpo.train(1, 0.0, 0.0, seed=0, record_at=[1]).values()  # lr 0: random play
    (trained,) = grpo.train(30, 0.3, 0.0, seed=0, record_at=[30]).values()
    assert trained["win vs random, seat 0"] > start["win vs random, seat 0"] + 0.1


def test_with_only_the_shared_term_every_position_of_a_mark_ranks_its_free_cells_alike(monkeypatch):
    def final_probs(cell_weight):
        seen, real = {}, grpo.sampler

        def spy(probs):  # the last call samples the final table, for the (stubbed) scores
            seen["probs"] = probs
            return real(probs)

        monkeypatch.setattr(grpo, "sampler", spy)
        monkeypatch.setattr(grpo, "scores", lambda policy, games, rng: {})
        grpo.train(3, 0.5, 0.0, seed=2, record_at=[3], cell_weight=cell_weight)
        return seen["probs"]

    def odds(probs, cells):  # cell 8 against cell 0, both free in each position below
        row = probs[grpo.INDEX[cells, "X"]]
        return row[8] / row[0]

    boards = (grpo.EMPTY, ".O..X....", "..XO.XO..")
    shared = final_probs(0.0)
    assert np.allclose([odds(shared, b) for b in boards], odds(shared, grpo.EMPTY))
    assert not np.isclose(odds(shared, grpo.EMPTY), 1.0)  # it learned a preference
    table = final_probs(None)
    assert not np.allclose([odds(table, b) for b in boards], odds(table, grpo.EMPTY))
