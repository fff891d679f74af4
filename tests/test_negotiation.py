"""The negotiation game (Deal or No Deal): instances, the strict move grammar, scoring under the three
reward modes, the turn rules, and the scripted negotiator."""

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from selfplay_gen import games
from selfplay_gen.games.base import FAILURES, MAX_INVALID, MAX_MOVES, STOPS, InvalidMove, Limits
from selfplay_gen.games.negotiation import (
    AGREED,
    INCONSISTENT,
    REWARD_MODES,
    TOTAL_VALUE,
    Instance,
    NegotiationGame,
    consistent,
    parse_move,
    points,
    render_share,
    rewards,
    stated_offer,
)
from selfplay_gen.runner import play

COUNTS = (2, 1, 3)  # 2 books, 1 hat, 3 balls
seeds = st.integers(0, 2**32 - 1)
modes = st.sampled_from(REWARD_MODES)
strengths = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])


def shares(counts):
    return st.tuples(*(st.integers(0, n) for n in counts))


def rejected(text: str, counts=COUNTS) -> str:
    with pytest.raises(InvalidMove) as err:
        parse_move(text, counts)
    return str(err.value)


def scripted_game(seed: int, strength0: float, strength1: float, mode: str = "semi-competitive", limits=None):
    game = NegotiationGame(limits, reward_mode=mode)
    first = game.reset(Instance.from_seed(seed))
    players = [game.scripted_player(s, seed=seed, strength=x) for s, x in enumerate((strength0, strength1))]
    assert asyncio.run(play(game, players, first)) is None  # no failure
    return game, players, game.outcome


# --- moves -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "[propose] 1 book, 0 hats, 2 balls",
        "[PROPOSE] 1 Book, 0 HATS, 2 Balls",  # case
        "[propose] (1 books, 0 hats, 2 balls)",  # Liao et al.'s form
        "[propose] 2 balls and 1 book; 0 hats.",  # any order, 'and', ';', a final period
        "[propose]\n1 book\n0 hats\n2 balls\n",  # one item per line
        "Keep the balls, they are worth most to me.\n[propose] 1 book, 0 hats, 2 balls",  # private text first
    ],
)
def test_proposal_forms_parse_to_the_same_share(text):
    move = parse_move(text, COUNTS)
    assert (move.kind, move.share) == ("propose", (1, 0, 2))


@given(st.data())
def test_rendered_shares_parse_back(data):
    counts = data.draw(st.tuples(*(st.integers(1, 4) for _ in range(3))))
    share = data.draw(shares(counts))
    assert parse_move("[propose] " + render_share(share), counts).share == share


def test_a_message_keeps_its_lines_and_the_partner_never_sees_private_text_or_a_proposal():
    move = parse_move("I want balls.\n[message] Can I have the balls?\nYou keep the hat.", COUNTS)
    assert move.text == "Can I have the balls?\nYou keep the hat."
    assert move.public == "[message] Can I have the balls?\nYou keep the hat."
    assert parse_move("I want balls [propose] 0 books, 0 hats, 3 balls", COUNTS).public == "[propose]"


@pytest.mark.parametrize(
    "text, error",
    [
        ("I take the balls", "no move tag found; start your move with one of [message], [propose]"),
        ("[accept]", "unknown tag [accept]; use one of [message], [propose]"),
        ("[message] ok [propose] 1 book, 0 hats, 2 balls", "exactly one tag, found 2: [message], [propose]"),
        ("[message]   ", "empty message"),
        ("[propose]", "a proposal names how many of each item you take, e.g. '[propose] 1 book, 0 hats, 2 balls'"),
        ("[propose] two books, 0 hats, 2 balls", "cannot read 'two books' in your proposal"),
        ("[propose] 1 book, 0 hats, 2 balls [END]", "cannot read '2 balls [END]'"),
        ("[propose] 1 book, 0 hats, 2 balls. Thanks!", "cannot read '2 balls. Thanks!'"),
        ("[propose] 1 book, 0 pens, 2 balls", "unknown item 'pens'; the items are books, hats, balls"),
        ("[propose] 1 book, 1 books, 0 hats, 2 balls", "your proposal names books twice"),
        ("[propose] 1 book, 2 balls", "does not say how many hats you take; name every item, 0 if you take none"),
        ("[propose] 1 book", "does not say how many hats or balls you take"),
        ("[propose] 3 books, 0 hats, 0 balls", "you cannot take 3 books: there are only 2"),
        ("[propose] 0 books, 2 hats, 0 balls", "you cannot take 2 hats: there are only 1"),
        ("[propose] -1 books, 0 hats, 0 balls", "cannot read '-1 books'"),
    ],
)
def test_invalid_moves_say_what_is_wrong(text, error):
    assert error in rejected(text)


def test_offers_are_read_from_messages_that_state_them():
    text = "Hmm. I propose: I take 2 books, 0 hats, 1 ball; you take 0 books, 1 hat, 2 balls."
    assert stated_offer(text, COUNTS) == (2, 0, 1)
    assert stated_offer("I get that you like hats. I take 1 book, 1 hat, 0 balls.", COUNTS) == (1, 1, 0)
    assert stated_offer("I take the hat, you take the rest", COUNTS) is None


def test_an_offer_is_misstated_when_both_halves_are_readable_and_do_not_add_up_to_the_pool():
    from selfplay_gen.games.negotiation.moves import misstates, stated_split

    assert stated_split("I take 1 book, 0 hats, 1 ball.", COUNTS) is None  # the partner's half is not stated
    assert stated_split("I take 1 book, 0 hats, 9 balls; you take 1 book, 1 hat, 2 balls", COUNTS) is None
    fair = "I get 1 book, 0 hats, 1 ball; you get 1 book, 1 hat, 2 balls"
    assert stated_split(fair, COUNTS) == ((1, 0, 1), (1, 1, 2)) and not misstates(fair, COUNTS)
    assert misstates("I take 1 book, 1 hat, 2 balls; you take 1 book, 1 hat, 1 ball.", COUNTS)  # 2 hats of 1
    assert not misstates("I take 1 book, 1 hat, 2 balls; you take the rest.", COUNTS)


# --- instances ---------------------------------------------------------------------------------


def test_a_seed_gives_the_same_instance_everywhere():
    # The seed -> instance contract: these values must never change.
    assert Instance.from_seed(0) == Instance((3, 2, 1), ((1, 0, 7), (1, 2, 3)), seed=0)
    assert Instance.from_seed(1) == Instance((2, 2, 2), ((2, 2, 1), (3, 1, 1)), seed=1)
    assert Instance.from_seed(7) == Instance.from_seed(7) and Instance.from_seed(7).id == "seed-7"
    assert len({Instance.from_seed(s) for s in range(50)}) > 40


@given(seeds)
def test_instances_meet_lewis_et_al_constraints(seed):
    inst = Instance.from_seed(seed)
    assert all(1 <= n <= 4 for n in inst.counts) and 5 <= sum(inst.counts) <= 7
    assert all(inst.value(seat, inst.counts) == TOTAL_VALUE for seat in (0, 1))
    worth = [(a > 0, b > 0) for a, b in zip(*inst.values)]
    assert all(x or y for x, y in worth) and any(x and y for x, y in worth)


@given(seeds)
def test_instances_round_trip_through_json(seed):
    inst = Instance.from_seed(seed)
    assert Instance.from_dict(json.loads(json.dumps(inst.to_dict()))) == inst


def test_bad_instances_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="worth 10 to each seat; to seat 1 it is 9"):
        Instance((1, 1, 1), ((5, 5, 0), (4, 5, 0)))
    with pytest.raises(ValueError, match="at least once"):
        Instance((0, 2, 5), ((0, 5, 0), (0, 0, 2)))
    data = Instance.from_seed(3).to_dict() | {"best_joint": 99}
    with pytest.raises(ValueError, match="stored best_joint 99"):
        Instance.from_dict(data)


# --- scoring -----------------------------------------------------------------------------------


@given(seeds, st.data())
def test_a_consistent_split_never_pays_more_than_the_pools_value(seed, data):
    inst = Instance.from_seed(seed)
    share0 = data.draw(shares(inst.counts))
    share1 = data.draw(st.one_of(st.just(inst.rest(share0)), shares(inst.counts)))
    p0, p1 = points(inst, (share0, share1))
    if consistent(inst, (share0, share1)):
        assert 0 <= p0 <= TOTAL_VALUE and 0 <= p1 <= TOTAL_VALUE  # no seat gets more than the whole pool
        assert p0 + p1 <= inst.best_joint <= 2 * TOTAL_VALUE
    else:
        assert (p0, p1) == (0, 0)


@given(st.integers(0, 10), st.integers(0, 10))
def test_reward_modes(p0, p1):
    assert rewards((p0, p1), "cooperative") == (p0 + p1, p0 + p1)
    assert rewards((p0, p1), "semi-competitive") == (p0, p1)
    competitive = rewards((p0, p1), "competitive")
    assert competitive == (p0 - p1, p1 - p0) and sum(competitive) == 0
    with pytest.raises(ValueError, match="cooperative, semi-competitive, competitive"):
        rewards((p0, p1), "zero-sum")


def test_pareto_optimality():
    inst = Instance((1, 1, 1), ((5, 5, 0), (0, 5, 5)))
    assert inst.best_joint == 15
    assert inst.pareto_optimal((1, 0, 0)) and inst.pareto_optimal((1, 1, 0))  # 5 + 10 and 10 + 5
    assert not inst.pareto_optimal((0, 0, 1))  # a ball seat 0 does not want: (0, 10) < (5, 10)


# --- turn rules --------------------------------------------------------------------------------


def test_each_seat_sees_its_own_values_and_the_runs_goal_only():
    game = NegotiationGame(reward_mode="competitive")
    first = game.reset(Instance((1, 1, 1), ((5, 5, 0), (0, 5, 5))))
    assert "book 5 points each, hat 5 points each, ball 0 points each" in first.system[0]
    assert "book 0 points each" not in first.system[0] and "book 0 points each" in first.system[1]
    assert all("your points minus your partner's points" in s and "30 moves" in s for s in first.system)
    assert first.told == (("You move first. Make your move.",), ())


def test_a_proposal_stays_private_and_the_partner_must_answer_with_its_own():
    game = NegotiationGame()
    game.reset(Instance((1, 1, 1), ((5, 5, 0), (0, 5, 5))))
    step = game.step(0, "[message] I take 1 book, 1 hat, 0 balls; you take the ball.")
    assert step.told == ((), ("Partner: [message] I take 1 book, 1 hat, 0 balls; you take the ball.",))
    step = game.step(1, "[propose] 0 books, 0 hats, 1 ball")
    assert step.told[1] == () and step.told[0][0] == "Partner: [propose]" and "ball" not in step.told[0][0]
    assert "Make yours now" in step.told[0][1] and game.to_move == 0
    step = game.step(0, "[message] wait")
    assert not step.valid and "your partner has made its final proposal" in (step.error or "")
    assert step.told == ((f"Invalid move: {step.error}. Your partner did not see it. Try again.",), ())
    step = game.step(0, "[propose] 1 book, 1 hat, 0 balls")
    assert step.done and game.outcome is not None
    assert (game.outcome.termination, game.outcome.agreed, game.outcome.rewards) == (AGREED, True, (10.0, 5.0))
    assert game.outcome.details["proposals"] == [[1, 1, 0], [0, 0, 1]] and game.outcome.details["points"] == [10, 5]
    assert [e["kind"] for e in game.events()] == ["message", "propose", "invalid", "propose"]
    assert game.events()[1]["share"] == [0, 0, 1] and (game.valid_moves, game.invalid_moves) == (3, 1)


@pytest.mark.parametrize("mode, expected", [("cooperative", (15.0, 15.0)), ("competitive", (5.0, -5.0))])
def test_the_reward_mode_is_the_runs_choice(mode, expected):
    game = NegotiationGame(reward_mode=mode)
    game.reset(Instance((1, 1, 1), ((5, 5, 0), (0, 5, 5))))
    game.step(0, "[propose] 1 book, 1 hat, 0 balls")
    game.step(1, "[propose] 0 books, 0 hats, 1 ball")
    assert game.outcome is not None and game.outcome.rewards == expected


@pytest.mark.parametrize(
    "second",
    ["[propose] 0 books, 1 hat, 1 ball", "[propose] 0 books, 0 hats, 0 balls"],
    ids=["both-take-the-hat", "the-ball-left-over"],
)
def test_shares_that_do_not_add_up_to_the_pool_pay_nothing(second):
    game = NegotiationGame(reward_mode="cooperative")
    game.reset(Instance((1, 1, 1), ((5, 5, 0), (0, 5, 5))))
    game.step(0, "[propose] 1 book, 1 hat, 0 balls")
    game.step(1, second)
    outcome = game.outcome
    assert outcome is not None and (outcome.termination, outcome.agreed) == (INCONSISTENT, False)
    assert outcome.rewards == (0, 0) and outcome.details["points"] == [0, 0] and not outcome.details["pareto_optimal"]


def test_limits_end_the_game_without_a_deal():
    game = NegotiationGame(Limits(max_moves=2))
    game.reset(Instance.from_seed(1))
    game.step(0, "[message] hi")
    assert game.step(1, "[message] hello").done
    assert game.outcome is not None and (game.outcome.termination, game.outcome.rewards) == (MAX_MOVES, (0, 0))
    game = NegotiationGame(Limits(max_invalid=2))
    game.reset(Instance.from_seed(1))
    game.step(0, "nothing")
    assert game.step(0, "[message] ok").valid  # a valid move resets the streak
    game.step(1, "x")
    assert game.step(1, "y").done
    assert game.outcome is not None and game.outcome.termination == MAX_INVALID
    assert game.outcome.truncated and not game.outcome.terminated and not game.outcome.failed  # a limit


def test_driver_stops_are_truncations_or_failures():
    for reason in STOPS:
        game = NegotiationGame()
        game.reset(Instance.from_seed(1))
        outcome = game.stop(reason, 0, "too long")
        assert outcome.termination == reason and outcome.rewards == (0, 0) and not outcome.terminated
        assert (outcome.truncated, outcome.failed) == (reason not in FAILURES, reason in FAILURES)
        assert game.events()[-1] == {"player": 0, "kind": "stop", "text": "", "share": None, "error": "too long"}
        assert game.stop(reason) is outcome  # a finished game keeps its outcome
    with pytest.raises(ValueError, match="not 'accepted'"):
        game.stop("accepted")


def test_lifecycle_and_turns_are_checked():
    game = NegotiationGame()
    assert not game.done and game.outcome is None
    with pytest.raises(RuntimeError, match="reset"):
        game.step(0, "[message] hi")
    game.reset(Instance.from_seed(1))
    with pytest.raises(ValueError, match="seat 0's turn, not seat 1's"):
        game.step(1, "[message] hi")
    game.stop("internal")
    with pytest.raises(RuntimeError, match="over"):
        game.step(0, "[message] hi")
    game.reset(Instance.from_seed(2))  # reset starts afresh
    assert not game.done and game.events() == [] and game.to_move == 0
    with pytest.raises(ValueError, match="unknown reward mode 'zero-sum'"):
        NegotiationGame(reward_mode="zero-sum")


def test_the_registry_builds_it_with_options():
    game = games.get("negotiation")(Limits(max_moves=10), reward_mode="cooperative")
    assert isinstance(game, NegotiationGame) and game.reward_mode == "cooperative" and game.limits.max_moves == 10
    assert game.instance_type.from_seed(4) == Instance.from_seed(4)


# --- the scripted negotiator -------------------------------------------------------------------


@pytest.mark.parametrize("strength0", [0.0, 0.25, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("strength1", [0.0, 0.5, 1.0])
def test_scripted_games_end_in_a_deal(strength0, strength1):
    for seed in range(20):
        game, players, outcome = scripted_game(seed, strength0, strength1)
        assert outcome.termination == AGREED and game.invalid_moves == 0
        assert game.valid_moves <= 23  # 10 concessions each, an offer at 0, two proposals
        assert outcome.details["points"] == [game.instance.value(s, outcome.details["proposals"][s]) for s in (0, 1)]


def test_a_stronger_negotiator_earns_more_against_the_same_partner():
    def mean_points(strength: float) -> float:
        total = 0
        for seed in range(60):
            total += scripted_game(seed, strength, 0.5)[2].details["points"][0]
            total += scripted_game(seed, 0.5, strength)[2].details["points"][1]
        return total / 120

    weak, middle, strong = (mean_points(s) for s in (0.0, 0.5, 1.0))
    assert weak < middle < strong


def test_strength_0_accepts_the_first_offer():
    game, players, outcome = scripted_game(5, 1.0, 0.0)
    assert game.valid_moves == 3  # offer, the partner's proposal, the offerer's proposal
    assert outcome.details["points"][0] == TOTAL_VALUE
    assert players[1].messages[-1]["content"].startswith("[propose]")


def test_scripted_play_is_deterministic_per_seed():
    def transcript(seed: int) -> list:
        game = NegotiationGame()
        first = game.reset(Instance.from_seed(9))
        players = [game.scripted_player(s, seed=seed, strength=0.75) for s in (0, 1)]
        asyncio.run(play(game, players, first))
        return game.events() + [p.log() for p in players]

    assert transcript(1) == transcript(1)


def test_scripted_knobs_are_checked():
    game = NegotiationGame()
    game.reset(Instance.from_seed(1))
    with pytest.raises(TypeError, match="no knob share; its knobs are strength"):
        game.scripted_player(0, share=0.5)
    with pytest.raises(ValueError, match=r"strength must lie in \[0, 1\]"):
        game.scripted_player(0, strength=2)
    log = game.scripted_player(1, strength=0.5).log()
    assert log["kind"] == "scripted" and log["strength"] == 0.5 and log["messages"][0]["role"] == "system"


@settings(max_examples=50, deadline=None)
@given(seeds, strengths, strengths, modes)
def test_played_games_keep_the_scoring_properties(seed, strength0, strength1, mode):
    _game, _players, outcome = scripted_game(seed, strength0, strength1, mode)
    p0, p1 = outcome.details["points"]
    assert max(p0, p1) <= TOTAL_VALUE and p0 + p1 <= outcome.details["best_joint"]
    assert outcome.rewards == rewards((p0, p1), mode)
    if mode == "competitive":
        assert sum(outcome.rewards) == 0
