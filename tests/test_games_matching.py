"""The matching game under the game protocol: `runner.play_game` and `runner.play` drive it alike,
and each seat is told exactly what its chat then holds as user turns. (That the runner's records
are those it wrote before it drove the protocol: test_golden_records.py.)"""

import pytest

from selfplay_gen import games
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import FAILURES, MAX_INVALID, STOPS, Limits, Observation, Player
from selfplay_gen.games.matching import MatchingGame
from selfplay_gen.games.matching.instance import PAPERS, REVIEWERS, Instance
from selfplay_gen.games.matching.record import TERMINATIONS
from selfplay_gen.games.matching.scripted import ScriptedPlayer
from selfplay_gen.runner import GameSpec, play, play_game


class Told:
    """A seat that records what the game tells it, between its turns, and plays `inner`."""

    def __init__(self, inner: Player):
        self.inner, self.pending, self.turns = inner, [], []

    def observe(self, told, step):
        self.pending += told
        self.inner.observe(told, step)

    async def act(self):
        self.turns.append("\n".join(self.pending))
        self.pending = []
        return await self.inner.act()

    def log(self):
        return self.inner.log()


def start(seed: int, limits: Limits | None = None) -> tuple[MatchingGame, Observation]:
    game = games.get("matching")(limits)
    return game, game.reset(Instance.from_seed(seed))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("policy", ["share", "teacher"])
async def test_the_runner_plays_the_protocol_game_as_play_does(seed, policy):
    instance = Instance.from_seed(seed)

    def seat(spec, s, game, start):
        return Told(game.scripted_player(s, seed=2 * seed + s, policy=policy))

    record = await play_game(GameSpec("g", 0, 0, instance), (seat, seat), GameConfig(), {})

    game = MatchingGame()
    first = game.reset(instance)
    players = [Told(game.scripted_player(s, seed=2 * seed + s, policy=policy)) for s in (0, 1)]
    assert await play(game, players, first) is None  # no failure
    outcome = game.outcome
    assert outcome is not None

    assert record["game"] == "matching" and game.events() == record["events"]
    assert outcome.to_dict() == record["outcome"] and outcome.agreed
    assert outcome.rewards == (record["outcome"]["normalized_reward"],) * 2 and outcome.terminated
    assert (game.valid_moves, game.invalid_moves) == (record["stats"]["valid_moves"], record["stats"]["invalid_moves"])
    for s, player in enumerate(players):
        user_turns = [m["content"] for m in player.log()["messages"] if m["role"] == "user"]
        assert (
            user_turns
            == player.turns
            == [m["content"] for m in record["players"][s]["messages"] if m["role"] == "user"]
        )


def test_reset_shows_each_seat_its_own_table_and_tells_seat_0_to_move():
    game, first = start(1)
    assert first.system == tuple(ScriptedPlayer(game.instance, s).messages[0]["content"] for s in (0, 1))
    assert first.system[0] != first.system[1]
    assert first.told == (("You move first. Make your move.",), ())


def test_an_invalid_move_is_told_to_the_mover_only():
    game, _ = start(1)
    step = game.step(0, "hello")
    assert not step.valid and step.told[1] == ()
    assert step.told[0] == (f"Invalid move: {step.error}. Your partner did not see it. Try again.",)


def test_a_reject_keeps_the_turn_and_says_so():
    game, _ = start(1)
    game.step(0, "[propose] Proposal:\n" + "\n".join(f"{p}: {r}" for p, r in zip(PAPERS, REVIEWERS)))
    step = game.step(1, "[reject]")
    assert step.told == (("Partner: [reject]",), ("It is still your turn. Make your move.",))
    assert game.to_move == 1


def test_turn_order_and_lifecycle_are_checked():
    game = MatchingGame()
    assert not game.done and game.outcome is None and game.valid_moves == 0
    with pytest.raises(RuntimeError, match="reset"):
        game.step(0, "[message] hi")
    game.reset(Instance.from_seed(1))
    with pytest.raises(ValueError, match="seat 0's turn, not seat 1's"):
        game.step(1, "[message] hi")


def test_limits_truncate_and_driver_failures_fail():
    game, _ = start(1, Limits(max_invalid=1))
    assert game.step(0, "no tag").done
    assert game.outcome is not None and game.outcome.termination == MAX_INVALID
    assert game.outcome.truncated and not game.outcome.terminated and not game.outcome.failed
    for reason in STOPS:
        game, _ = start(1)
        outcome = game.stop(reason, 1, "why")
        assert outcome.termination == reason and outcome.rewards == (0.0, 0.0) and not outcome.terminated
        assert (outcome.truncated, outcome.failed) == (reason not in FAILURES, reason in FAILURES)
        assert game.events()[-1] == {"player": 1, "kind": "stop", "text": "", "pairs": None, "error": "why"}


def test_scripted_knobs_are_checked():
    game, _ = start(1)
    with pytest.raises(TypeError, match="no knob strength; its knobs are policy, plan, share"):
        game.scripted_player(0, strength=1)
    with pytest.raises(ValueError, match="share, teacher"):
        game.scripted_player(0, policy="greedy")


def test_the_instance_is_a_game_instance():
    inst = MatchingGame.instance_type.from_seed(3)
    assert MatchingGame.instance_type.from_dict(inst.to_dict()) == inst and inst.id == "seed-3"
    assert set(STOPS) < set(TERMINATIONS) == set(MatchingGame.terminations)
