"""The matching game under the game protocol: `runner.play_game` and `runner.play` drive it alike,
and each seat is told exactly what its chat then holds as user turns. (That the runner's records
are those it wrote before it drove the protocol: test_golden_records.py.)"""

import pytest

from selfplay_gen import games
from selfplay_gen.games import GameConfig, move_formats
from selfplay_gen.games.base import FAILURES, MAX_INVALID, STOPS, Limits, Observation, Player
from selfplay_gen.games.matching import MatchingGame
from selfplay_gen.games.matching.instance import PAPERS, REVIEWERS, Instance
from selfplay_gen.games.matching.moves import render_proposal
from selfplay_gen.games.matching.prompts import FIRST_MOVE, PARTNER_MOVED
from selfplay_gen.games.matching.record import TERMINATIONS
from selfplay_gen.games.matching.scripted import ScriptedPlayer
from selfplay_gen.games.move_formats import BOXED, BOXED_ASK, NO_BOXED_MOVE
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


def test_a_boxed_move_is_read_from_the_reasoning_and_the_partner_is_told_the_move_alone():
    """`move_format` boxed: the seats are asked to reason at the end of what they are told before each move, the
    last \\boxed{...} of a response is its move (a proposal's lines inside), and a response that boxes nothing is
    refused and kept whole; what the partner is told, and what the game's events keep, is the move without the
    reasoning."""
    game = GameConfig("matching", options={"move_format": "boxed"}).new()
    start = game.reset(Instance.from_seed(3))
    assert start.told == ((FIRST_MOVE, BOXED_ASK), ()) and not any(BOXED_ASK in system for system in start.system)
    refused = game.step(0, "My best cell is 80, so [message] I see 80 for Ada on BLEU.")
    assert not refused.valid and refused.error == NO_BOXED_MOVE and game.to_move == 0
    assert refused.told[0][-1] == BOXED_ASK and refused.told[1] == ()
    assert game.events()[-1]["text"].startswith("My best cell")
    reasoning = "I should share first; [propose] would be too early.\n"
    made = game.step(0, reasoning + "\\boxed{[message] Ada on BLEU is 80 for me.}")
    assert made.valid and (game.events()[-1]["kind"], game.events()[-1]["text"]) == (
        "message",
        "Ada on BLEU is 80 for me.",
    )
    assert not any("too early" in line for line in made.told[1]) and any("80 for me" in line for line in made.told[1])
    assert made.told == ((), (PARTNER_MOVED.format(move="[message] Ada on BLEU is 80 for me."), BOXED_ASK))
    lines = "\n".join(f"{paper}: {reviewer}" for paper, reviewer in zip(PAPERS, REVIEWERS, strict=True))
    proposed = game.step(1, f"Matching each paper to a reviewer.\n\\boxed{{[propose] Proposal:\n{lines}}}")
    assert proposed.valid and game.events()[-1]["kind"] == "propose"
    accepted = game.step(0, "It is a fair start. \\boxed{\\text{[accept]}}")
    assert game.done and game.outcome.details["move_format"] == "boxed"
    assert BOXED_ASK not in accepted.told[0] + accepted.told[1]  # the game is over: nobody is asked to move


@pytest.mark.parametrize("move_format", ["plain", "boxed"])
def test_move_credits_score_each_proposal_line_on_the_table_the_seat_sees(move_format):
    """A line's credit: its reviewer's value for the paper on the seat's table (hidden cells guessed), in standard
    deviations of that paper's column from the column's mean; other moves earn none."""
    game = GameConfig("matching", options={"move_format": move_format}).new()
    instance = Instance.from_seed(3)
    game.reset(instance)
    pairs = [(r, (r + 5) % 8) for r in range(8)]

    def said(move: str) -> str:
        return move if move_format == "plain" else f"Reasoning first.\n\\boxed{{{move}}}"

    text = said("[propose] " + render_proposal(pairs))
    for seat in (0, 1):
        seen = instance.guessed(seat).astype(float)
        credits = game.move_credits(seat, text)
        assert len(credits) == 8
        for start, end, credit in credits:
            paper_text, _, reviewer_text = text[start:end].partition(": ")
            r, p = REVIEWERS.index(reviewer_text), PAPERS.index(paper_text)
            assert (r, p) in pairs
            assert credit == pytest.approx((seen[r, p] - seen[:, p].mean()) / seen[:, p].std())
    own = game.move_credits(0, said("[propose] " + render_proposal(instance.own_plan(0))))
    assert sum(c for *_, c in own) > sum(c for *_, c in game.move_credits(0, text))  # its own plan earns more
    assert game.move_credits(0, said("[message] BLEU is 80 for me.")) == [] == game.move_credits(0, said("[accept]"))


def test_the_boxed_rules_lay_out_a_proposal_without_giving_one_to_copy():
    """The boxed rules, read by models that learn from the rules alone, show a proposal's lines with each reviewer
    left to choose: boxed as it stands the example is refused, and with the seat's own reviewers filled in it is
    a proposal of them. The plain rules, which the shipped warm starts were trained to read, keep a whole one."""
    instance = Instance.from_seed(3)
    game = GameConfig("matching", options={"move_format": "boxed"}).new()
    example = move_formats.boxed(game.reset(instance).system[0])  # the rules' last box: the table after it has none
    assert example is not None and example.startswith("[propose] Proposal:")
    assert example.count("<reviewer>") == len(PAPERS) and not any(name in example for name in REVIEWERS)
    assert not game.step(0, move_formats.answer(example, BOXED)).valid and game.to_move == 0
    filled = example
    for reviewer in REVIEWERS[::-1]:
        filled = filled.replace("<reviewer>", reviewer, 1)
    made = game.step(0, "I assign from my table.\n" + move_formats.answer(filled, BOXED))
    assert made.valid and sorted(game.events()[-1]["pairs"]) == [[reviewer, 7 - reviewer] for reviewer in range(8)]
    plain = GameConfig("matching").new().reset(instance).system[0]
    whole = "\n".join(f"{paper}: {reviewer}" for paper, reviewer in zip(PAPERS, REVIEWERS, strict=True))
    assert f"Example proposal:\n[propose] Proposal:\n{whole}\n" in plain


@pytest.mark.parametrize("policy", ["teacher", "random"])
async def test_scripted_seats_answer_in_the_boxed_format_and_play_the_same_game(policy):
    """A scripted seat of a boxed game is asked as the models are and boxes each move (a format warm start's chats
    teach what the game reads); the game it plays is the plain game's, move for move."""
    instance = Instance.from_seed(5)
    played = {}
    for move_format in ("plain", "boxed"):
        game = MatchingGame(move_format=move_format)
        first = game.reset(instance)
        make = game.random_player if policy == "random" else game.scripted_player
        knobs = {} if policy == "random" else {"policy": "teacher"}
        players = [make(s, seed=11 + s, **knobs) for s in (0, 1)]
        assert await play(game, players, first) is None
        played[move_format] = (game.events(), game.outcome.rewards, players)
    assert played["boxed"][:2] == played["plain"][:2]
    for plain, boxed in zip(played["plain"][2], played["boxed"][2], strict=True):
        assert boxed.messages[0]["content"] == game.reset(instance).system[boxed.seat]  # as the game asks a model
        assert "\\boxed{[reject]}" in boxed.messages[0]["content"]
        asked = [m["content"] for m in boxed.messages if m["role"] == "user"]
        assert asked and all(turn.endswith(BOXED_ASK) for turn in asked)  # each turn closes with the request
        assert "never shown to your partner" in plain.messages[0]["content"]
        said = [m["content"] for m in plain.messages if m["role"] == "assistant"]
        assert [m["content"] for m in boxed.messages if m["role"] == "assistant"] == [f"\\boxed{{{s}}}" for s in said]
