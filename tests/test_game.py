"""Turn rules, limits and rewards of the matching game's state machine."""

import copy

import pytest

from selfplay_gen.games.base import MAX_INVALID, MAX_MOVES, MAX_NEW_TOKENS, Limits
from selfplay_gen.games.matching.game import MatchingGame
from selfplay_gen.games.matching.instance import Instance, score
from selfplay_gen.games.matching.moves import render_proposal
from selfplay_gen.games.matching.record import ACCEPTED, TERMINATIONS

INSTANCE = Instance.from_seed(0)
DIAGONAL = [(i, i) for i in range(8)]
MESSAGE = "[message] Ava looks strong on BLEU."
ACCEPT, REJECT = "[accept]", "[reject]"


def propose(pairs) -> str:
    return "[propose] " + render_proposal(pairs)


def new_game(**limits) -> MatchingGame:
    game = MatchingGame(Limits(**limits))
    game.reset(INSTANCE)
    return game


def step(game: MatchingGame, move: str):
    """The move of whoever is to move."""
    return game.step(game.to_move, move)


def play(game: MatchingGame, *moves: str):
    return [step(game, move) for move in moves]


def result(game: MatchingGame) -> dict:
    assert game.outcome is not None
    return game.outcome.to_dict()


def test_player_0_moves_first_and_turns_alternate():
    game = new_game()
    assert game.to_move == 0
    steps = play(game, MESSAGE, MESSAGE, propose(DIAGONAL))
    assert [s.seat for s in steps] == [0, 1, 0] and all(s.valid for s in steps)
    assert game.to_move == 1 and game.pending == (0, tuple(DIAGONAL))


@pytest.mark.parametrize("move, kind", [(MESSAGE, "message"), (propose(DIAGONAL), "propose")])
def test_a_pending_proposal_must_be_answered(move, kind):
    game = new_game()
    play(game, propose(DIAGONAL))
    played = step(game, move)
    assert not played.valid and played.seat == 1
    assert "pending" in played.error and "[accept] or [reject]" in played.error and kind in played.error
    assert game.to_move == 1 and game.pending == (0, tuple(DIAGONAL))


@pytest.mark.parametrize("move", [ACCEPT, REJECT])
def test_answering_without_a_pending_proposal_is_invalid(move):
    game = new_game()
    played = step(game, move)
    assert not played.valid and f"no pending proposal to {move.strip('[]')}" in played.error
    play(game, MESSAGE)
    assert not step(game, move).valid


def test_after_a_reject_the_responder_keeps_the_turn_and_the_proposal_is_gone():
    game = new_game()
    play(game, propose(DIAGONAL), REJECT)
    assert game.to_move == 1 and game.pending is None and not game.done
    assert not step(game, ACCEPT).valid  # nothing left to accept
    counter = [(i, (i + 1) % 8) for i in range(8)]
    assert step(game, propose(counter)).valid and game.to_move == 0
    assert step(game, ACCEPT).seat == 0 and game.done
    assert result(game)["proposal"] == counter


def test_accept_ends_the_game_with_the_shared_reward():
    game = new_game()
    steps = play(game, MESSAGE, propose(DIAGONAL), ACCEPT)
    assert steps[-1].seat == 0 and steps[-1].done and game.to_move == 0  # the responder kept the turn
    raw = score(INSTANCE, DIAGONAL)
    assert result(game) == {
        "agreed": True,
        "termination": ACCEPTED,
        "proposal": DIAGONAL,
        "raw_reward": raw,
        "best_reward": INSTANCE.best_reward,
        "normalized_reward": raw / INSTANCE.best_reward,
        "rewards": [raw / INSTANCE.best_reward] * 2,
        "own_plan_shares": [INSTANCE.own_plan_share(seat, DIAGONAL) for seat in (0, 1)],
        "terminated": True,
        "truncated": False,
    }
    assert 0 < result(game)["normalized_reward"] < 1
    with pytest.raises(RuntimeError, match="game is over"):
        game.step(0, MESSAGE)


def test_accepting_the_best_assignment_scores_1():
    game = new_game()
    play(game, propose(INSTANCE.best_assignment), ACCEPT)
    assert result(game)["raw_reward"] == INSTANCE.best_reward and result(game)["normalized_reward"] == 1.0


def test_an_invalid_move_changes_nothing_but_the_movers_counters_and_the_log():
    game = new_game()
    play(game, MESSAGE, propose(DIAGONAL))
    before = copy.deepcopy(vars(game))
    played = step(game, "[propose] Proposal:\nBLEU: Ava Li")
    after = vars(game)
    assert not played.valid and not played.done and played.seat == 0
    changed = {key for key in after if after[key] != before[key]}
    assert changed == {"invalid_streak", "_invalid", "_events"}
    assert after["_events"][:-1] == before["_events"]
    last = after["_events"][-1]
    assert (last.player, last.kind, last.pairs) == (0, "invalid", None) and "needs 8 lines" in last.error


def test_max_moves_ends_without_agreement_even_with_a_pending_proposal():
    game = new_game(max_moves=3)
    steps = play(game, MESSAGE, MESSAGE, propose(DIAGONAL))
    assert [s.done for s in steps] == [False, False, True]
    outcome = result(game)
    assert (
        outcome["agreed"],
        outcome["termination"],
        outcome["raw_reward"],
        outcome["normalized_reward"],
        outcome["proposal"],
    ) == (False, MAX_MOVES, 0, 0.0, None)
    assert outcome["truncated"] and not outcome["terminated"]  # a limit, as Gymnasium's time limit


def test_an_accept_on_the_last_allowed_move_still_counts():
    game = new_game(max_moves=2)
    play(game, propose(DIAGONAL), ACCEPT)
    assert result(game)["agreed"] and result(game)["termination"] == ACCEPTED


def test_max_invalid_counts_consecutive_invalid_moves_and_a_valid_move_resets_it():
    game = new_game(max_invalid=3)
    play(game, "oops", "oops", MESSAGE, "oops", "oops")
    assert not game.done and game.invalid_moves == 4 and game.invalid_streak == 2
    last = step(game, "oops")
    assert last.done and last.seat == 1
    outcome = result(game)
    assert (outcome["agreed"], outcome["termination"], outcome["raw_reward"]) == (False, MAX_INVALID, 0)
    assert outcome["truncated"] and not outcome["terminated"]


def test_stop_ends_the_game_for_limits_only_players_see():
    game = new_game()
    play(game, propose(DIAGONAL))
    outcome = game.stop(MAX_NEW_TOKENS)
    assert game.done and (outcome.agreed, outcome.termination, outcome.details["raw_reward"]) == (
        False,
        MAX_NEW_TOKENS,
        0,
    )
    assert outcome.truncated and not outcome.terminated and not outcome.failed
    assert game.stop("context_length") is outcome  # the first ending stands


def test_stop_refuses_unknown_reasons_and_accepted():
    game = new_game()
    for reason in ("bored", ACCEPTED, MAX_MOVES):  # the game's own ends are the rules' to reach
        with pytest.raises(ValueError, match="unknown termination reason"):
            game.stop(reason)
    assert not game.done
    assert {MAX_MOVES, MAX_INVALID, MAX_NEW_TOKENS, "context_length", "backend_error"} <= set(TERMINATIONS)


def test_reset_starts_clean():
    game = MatchingGame()
    with pytest.raises(RuntimeError, match="no game yet"):
        game.step(0, MESSAGE)
    game.reset(Instance.from_seed(0))
    assert game.instance == INSTANCE and game.to_move == 0 and game.events() == [] and game.outcome is None
    play(game, propose(DIAGONAL), ACCEPT)
    game.reset(INSTANCE)
    assert not game.done and game.pending is None and game.valid_moves == game.invalid_moves == 0
    assert game.events() == [] and game.outcome is None


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="limits must be positive"):
        Limits(max_moves=0)
    with pytest.raises(ValueError, match="limits must be positive"):
        Limits(max_invalid=0)
    assert (Limits().max_moves, Limits().max_invalid) == (30, 3)


def test_event_log():
    game = new_game()
    play(game, "thinking [message] hi", "junk", propose(DIAGONAL), REJECT)
    events = game.events()
    assert [(e["player"], e["kind"]) for e in events] == [(0, "message"), (1, "invalid"), (1, "propose"), (0, "reject")]
    assert events[0]["text"] == "hi" and events[2]["pairs"] == [list(p) for p in DIAGONAL]
    assert events[1]["text"] == "junk" and "no move tag" in events[1]["error"]
