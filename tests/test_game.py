"""Turn rules, limits and rewards of the game state machine."""

import copy

import pytest

from selfplay_gen.games.base import MAX_INVALID, MAX_MOVES, MAX_NEW_TOKENS, Limits
from selfplay_gen.games.matching.instance import Instance, score
from selfplay_gen.games.matching.moves import render_proposal
from selfplay_gen.games.matching.record import ACCEPTED, TERMINATIONS
from selfplay_gen.games.matching.rules import MatchingGame

INSTANCE = Instance.from_seed(0)
DIAGONAL = [(i, i) for i in range(8)]
MESSAGE = "[message] Ava looks strong on BLEU."
ACCEPT, REJECT = "[accept]", "[reject]"


def propose(pairs) -> str:
    return "[propose] " + render_proposal(pairs)


def new_game(**limits) -> MatchingGame:
    return MatchingGame(Limits(**limits)).reset(INSTANCE)


def play(game: MatchingGame, *moves: str):
    return [game.step(move) for move in moves]


def test_player_0_moves_first_and_turns_alternate():
    game = new_game()
    assert game.to_move == 0
    steps = play(game, MESSAGE, MESSAGE, propose(DIAGONAL))
    assert [s.player for s in steps] == [0, 1, 0] and all(s.valid for s in steps)
    assert game.to_move == 1 and game.pending == (0, tuple(DIAGONAL))


@pytest.mark.parametrize("move, kind", [(MESSAGE, "message"), (propose(DIAGONAL), "propose")])
def test_a_pending_proposal_must_be_answered(move, kind):
    game = new_game()
    play(game, propose(DIAGONAL))
    step = game.step(move)
    assert not step.valid and step.player == 1
    assert "pending" in step.error and "[accept] or [reject]" in step.error and kind in step.error
    assert game.to_move == 1 and game.pending == (0, tuple(DIAGONAL))


@pytest.mark.parametrize("move", [ACCEPT, REJECT])
def test_answering_without_a_pending_proposal_is_invalid(move):
    game = new_game()
    step = game.step(move)
    assert not step.valid and f"no pending proposal to {move.strip('[]')}" in step.error
    play(game, MESSAGE)
    assert not game.step(move).valid


def test_after_a_reject_the_responder_keeps_the_turn_and_the_proposal_is_gone():
    game = new_game()
    play(game, propose(DIAGONAL), REJECT)
    assert game.to_move == 1 and game.pending is None and not game.done
    assert not game.step(ACCEPT).valid  # nothing left to accept
    counter = [(i, (i + 1) % 8) for i in range(8)]
    assert game.step(propose(counter)).valid and game.to_move == 0
    assert game.step(ACCEPT).player == 0 and game.done
    assert game.result.proposal == counter


def test_accept_ends_the_game_with_the_shared_reward():
    game = new_game()
    steps = play(game, MESSAGE, propose(DIAGONAL), ACCEPT)
    assert steps[-1].player == 0 and steps[-1].done and game.to_move == 0  # the responder kept the turn
    raw = score(INSTANCE, DIAGONAL)
    assert game.result.to_dict() == {
        "agreed": True,
        "termination": ACCEPTED,
        "proposal": DIAGONAL,
        "raw_reward": raw,
        "best_reward": INSTANCE.best_reward,
        "normalized_reward": raw / INSTANCE.best_reward,
    }
    assert 0 < game.result.normalized_reward < 1
    with pytest.raises(RuntimeError, match="game is over"):
        game.step(MESSAGE)


def test_accepting_the_best_assignment_scores_1():
    game = new_game()
    play(game, propose(INSTANCE.best_assignment), ACCEPT)
    assert game.result.raw_reward == INSTANCE.best_reward and game.result.normalized_reward == 1.0


def test_an_invalid_move_changes_nothing_but_the_movers_counters_and_the_log():
    game = new_game()
    play(game, MESSAGE, propose(DIAGONAL))
    before = copy.deepcopy(vars(game))
    step = game.step("[propose] Proposal:\nBLEU: Ava Li")
    after = vars(game)
    assert not step.valid and not step.done and step.player == 0
    changed = {key for key in after if after[key] != before[key]}
    assert changed == {"invalid_streak", "invalid_moves", "events"}
    assert after["events"][:-1] == before["events"]
    last = after["events"][-1]
    assert (last.player, last.kind, last.pairs) == (0, "invalid", None) and "needs 8 lines" in last.error


def test_max_moves_ends_without_agreement_even_with_a_pending_proposal():
    game = new_game(max_moves=3)
    steps = play(game, MESSAGE, MESSAGE, propose(DIAGONAL))
    assert [s.done for s in steps] == [False, False, True]
    assert (
        game.result.agreed,
        game.result.termination,
        game.result.raw_reward,
        game.result.normalized_reward,
        game.result.proposal,
    ) == (False, MAX_MOVES, 0, 0.0, None)


def test_an_accept_on_the_last_allowed_move_still_counts():
    game = new_game(max_moves=2)
    play(game, propose(DIAGONAL), ACCEPT)
    assert game.result.agreed and game.result.termination == ACCEPTED


def test_max_invalid_counts_consecutive_invalid_moves_and_a_valid_move_resets_it():
    game = new_game(max_invalid=3)
    play(game, "oops", "oops", MESSAGE, "oops", "oops")
    assert not game.done and game.invalid_moves == 4 and game.invalid_streak == 2
    last = game.step("oops")
    assert last.done and last.player == 1
    assert (game.result.agreed, game.result.termination, game.result.raw_reward) == (False, MAX_INVALID, 0)


def test_stop_ends_the_game_for_limits_only_players_see():
    game = new_game()
    play(game, propose(DIAGONAL))
    outcome = game.stop(MAX_NEW_TOKENS)
    assert game.done and (outcome.agreed, outcome.termination, outcome.raw_reward) == (False, MAX_NEW_TOKENS, 0)
    assert game.stop("context_length") is outcome  # the first ending stands


def test_stop_refuses_unknown_reasons_and_accepted():
    game = new_game()
    for reason in ("bored", ACCEPTED):
        with pytest.raises(ValueError, match="unknown termination reason"):
            game.stop(reason)
    assert not game.done
    assert {MAX_MOVES, MAX_INVALID, MAX_NEW_TOKENS, "context_length", "backend_error"} <= set(TERMINATIONS)


def test_reset_takes_an_instance_or_a_seed_and_starts_clean():
    game = MatchingGame().reset(seed=0)
    assert game.instance == INSTANCE and game.to_move == 0 and game.events == [] and game.result is None
    play(game, propose(DIAGONAL), ACCEPT)
    game.reset(INSTANCE)
    assert not game.done and game.pending is None and game.valid_moves == game.invalid_moves == 0
    for kwargs in ({}, {"instance": INSTANCE, "seed": 0}):
        with pytest.raises(ValueError, match="exactly one"):
            MatchingGame().reset(**kwargs)


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="limits must be positive"):
        Limits(max_moves=0)
    with pytest.raises(ValueError, match="limits must be positive"):
        Limits(max_invalid=0)
    assert (Limits().max_moves, Limits().max_invalid) == (30, 3)


def test_event_log():
    game = new_game()
    play(game, "thinking [message] hi", "junk", propose(DIAGONAL), REJECT)
    assert [(e.player, e.kind) for e in game.events] == [(0, "message"), (1, "invalid"), (1, "propose"), (0, "reject")]
    assert game.events[0].text == "hi" and game.events[2].pairs == [list(p) for p in DIAGONAL]
    assert game.events[1].text == "junk" and "no move tag" in game.events[1].error
