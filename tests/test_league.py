"""Competitive self-play's decisions on real games: scripted negotiators of three strengths play a
small tournament through `selfplay-gen play` (each pair in both seat orders, and self-play), and
the league rates them from those games, draws opponents near a player's rating, promotes only a
checkpoint whose interval lies above an even match, reports progress per checkpoint, and measures
whether graded play follows its skill level."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main
from selfplay_gen.games.negotiation import Instance, NegotiationGame
from selfplay_gen.games.negotiation.evaluation import evaluate, game_table
from selfplay_gen.games.negotiation.game import seat_skills
from selfplay_gen.games.negotiation.prompts import SKILLS, skill_of
from selfplay_gen.games.negotiation.skill import follows_levels, level_steps, step_up, steps_table
from selfplay_gen.league import League, Member, choose_opponents, opponent_weights, promote, scripted_member
from selfplay_gen.league.opponents import FLOOR, win_probability
from selfplay_gen.league.progress import progress, progress_table
from selfplay_gen.records import read_games

# the three strengths stand for a warm start and two checkpoints, and for the three skill levels
STRENGTHS = {"warm": 0.3, "iter_1": 0.6, "iter_2": 1.0}
LEVELS = {"warm": "novice", "iter_1": "intermediate", "iter_2": "expert"}
INSTANCES = 24


@pytest.fixture(scope="module")
def tournament(tmp_path_factory) -> pd.DataFrame:
    """Every ordered pair of the three strengths (self-play included), 24 instances, one game each,
    competitive rewards, each seat told the skill level its strength stands for."""
    out = tmp_path_factory.mktemp("tournament")
    tables = []
    for a, b in itertools.product(STRENGTHS, repeat=2):
        path = out / f"{a}__{b}.jsonl"
        args = ["play", "--backend", "scripted", "--game", "negotiation", "--reward-mode", "competitive"]
        args += ["--scripted-strength", str(STRENGTHS[a]), "--partner-scripted-strength", str(STRENGTHS[b])]
        args += ["--skill", f"{LEVELS[a]},{LEVELS[b]}", "-n", str(INSTANCES), "-k", "1", "--out", str(path), "-q"]
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        tables.append(game_table(read_games(path), (a, b)))
    return pd.concat(tables, ignore_index=True)


@pytest.fixture(scope="module")
def metrics(tournament) -> dict:
    return json.loads(json.dumps(evaluate(tournament, list(STRENGTHS), 400, 0)))  # as metrics.json holds it


def test_the_skill_level_reaches_each_seats_prompt(tournament, tmp_path):
    path = tmp_path / "g.jsonl"
    args = ["play", "--backend", "scripted", "--game", "negotiation", "--skill", "expert,", "-n", "1", "-k", "1"]
    result = CliRunner().invoke(main, [*args, "--out", str(path), "-q"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (record,) = read_games(path)
    systems = [p["messages"][0]["content"] for p in record["players"]]
    assert "Play as an expert negotiator" in systems[0] and "negotiator:" not in systems[1]
    bad = CliRunner().invoke(main, [*args, "--skill", "master", "--out", str(tmp_path / "b.jsonl")])
    assert bad.exit_code == 2 and "'master'" in bad.output and "novice, intermediate, expert" in bad.output


def test_skill_levels_per_seat_and_strengths_mapped_to_levels():
    game = NegotiationGame(skill="novice")
    first = game.reset(Instance.from_seed(0))
    assert all(SKILLS["novice"] in system for system in first.system)
    assert seat_skills(",expert") == (None, "expert") and seat_skills(("novice", None)) == ("novice", None)
    assert (
        seat_skills(None) == (None, None) and SKILLS["expert"] not in NegotiationGame().reset(game.instance).system[0]
    )
    with pytest.raises(ValueError, match="give a level for both seats"):
        NegotiationGame(skill="novice,expert,expert")
    assert [skill_of(s) for s in (0.0, 0.3, 0.45, 0.6, 0.8, 0.95, 1.0)] == [
        "novice",
        "novice",
        "novice",
        "intermediate",
        "intermediate",
        "expert",
        "expert",
    ]  # nearest level; halfway goes to the lower


# --- ratings ---------------------------------------------------------------------------------------


def test_ratings_order_the_strengths_and_accumulate_over_batches(tournament, tmp_path):
    members = [Member(name, "checkpoint", path=f"/ckpt/{name}") for name in STRENGTHS]
    league = League.of(members)
    assert league.ratings() == {name: None for name in STRENGTHS}  # no games: no rating
    once = league.record(tournament)
    ratings = once.ratings()
    assert ratings["warm"] == 0 and 0 < ratings["iter_1"] < ratings["iter_2"]
    crossed = tournament[tournament["seat0"] != tournament["seat1"]]
    assert once.win_matrix().sum() == len(crossed)  # self-play rates no one; a tie is two halves
    path = tmp_path / "cross.jsonl"
    args = ["play", "--backend", "scripted", "--game", "negotiation", "--scripted-strength", "1", "-q", "-n", "8"]
    args += ["--partner-scripted-strength", "0.3", "-k", "1", "--out", str(path)]
    assert CliRunner().invoke(main, args, catch_exceptions=False).exit_code == 0
    from_file = league.record_file(path, ("iter_2", "warm")).win_matrix()
    assert from_file.sum() == 8 and from_file[2, 0] > from_file[0, 2]
    twice = once.record(tournament)
    assert np.allclose(twice.win_matrix(), 2 * once.win_matrix())
    assert twice.ratings()["iter_2"] > ratings["iter_2"]  # the same record, twice the evidence: less shrinkage


def test_two_members_rating_gap_is_the_bradley_terry_odds_of_their_wins():
    league = League.of([scripted_member(1.0), scripted_member(0.3)])
    games = pd.DataFrame(
        {"seat0": ["scripted@1"] * 40, "seat1": ["scripted@0.3"] * 40, "points0": [6] * 30 + [3] * 10, "points1": 5}
    )
    ratings = league.record(games).ratings()
    # one virtual draw per compared pair keeps ratings finite: odds (30 + 0.5) : (10 + 0.5)
    assert ratings["scripted@0.3"] == pytest.approx(-400 * math.log10(30.5 / 10.5), rel=1e-6)
    assert win_probability(0, ratings["scripted@0.3"]) == pytest.approx(30.5 / 41, rel=1e-6)


def test_a_league_round_trips_through_its_file_and_refuses_bad_members(tournament, tmp_path):
    league = League.of([scripted_member(s) for s in (0.3, 1.0)]).add(Member("iter_1", path="/ckpt/1"))
    league = league.record(tournament.replace({"warm": "scripted@0.3", "iter_2": "scripted@1"}))
    league.save(tmp_path / "league.json")
    again = League.load(tmp_path / "league.json")
    assert again == league and again.ratings() == league.ratings()
    assert json.loads((tmp_path / "league.json").read_text())["ratings"] == league.ratings()
    assert league.member("iter_1").partner_args() == ["--partner-model", "/ckpt/1"]
    args = ["play", "--backend", "scripted", "--game", "negotiation", "-n", "1", "-k", "1", "-q"]
    args += [*league.member("scripted@0.3").partner_args(), "--out", str(tmp_path / "g.jsonl")]
    assert CliRunner().invoke(main, args, catch_exceptions=False).exit_code == 0
    (record,) = read_games(tmp_path / "g.jsonl")
    assert record["settings"]["seat1"]["strength"] == 0.3 and record["settings"]["seat0"]["strength"] == 1.0
    with pytest.raises(KeyError, match="no league member 'iter_9'"):
        league.member("iter_9")
    with pytest.raises(ValueError, match="needs a strength in"):
        Member("s", "scripted", strength=1.5)
    with pytest.raises(ValueError, match="distinct names"):
        league.add(scripted_member(1.0))
    (tmp_path / "bad.json").write_text(json.dumps({"members": [{"name": "x", "kind": "human"}]}))
    with pytest.raises(ValueError, match=r"bad.json: not a league .*kind 'human'"):
        League.load(tmp_path / "bad.json")


# --- opponent choice -------------------------------------------------------------------------------


def test_opponents_near_the_players_rating_are_drawn_most():
    ratings = {"me": 0.0, "even": 20.0, "weaker": -300.0, "hopeless": 1500.0, "new": None}
    weights = opponent_weights(ratings, "me")
    assert set(weights) == {"even", "weaker", "hopeless", "new"} and sum(weights.values()) == pytest.approx(1)
    assert weights["new"] > weights["even"] > weights["weaker"] > weights["hopeless"]  # unrated: an even game
    assert weights["hopeless"] == pytest.approx(FLOOR * weights["new"])  # never zero
    uniform = opponent_weights(ratings, "me", sharpness=0)
    assert set(uniform.values()) == {0.25}
    drawn = choose_opponents(ratings, "me", 2000, seed=3)
    assert drawn == choose_opponents(ratings, "me", 2000, seed=3) != choose_opponents(ratings, "me", 2000, seed=4)
    counts = Counter(drawn)
    for name, weight in weights.items():
        assert counts[name] / 2000 == pytest.approx(weight, abs=0.03)


def test_opponents_of_a_rated_league(tournament):
    ratings = League.of(Member(n, path=n) for n in STRENGTHS).record(tournament).ratings()
    weights = opponent_weights(ratings, "iter_1")
    p = {n: win_probability(ratings["iter_1"], ratings[n]) for n in ("warm", "iter_2")}
    closer = min(p, key=lambda n: abs(p[n] - 0.5))
    assert weights[closer] > weights[({"warm", "iter_2"} - {closer}).pop()]
    assert set(choose_opponents(ratings, "iter_1", 50, seed=0, candidates=["warm"])) == {"warm"}
    with pytest.raises(ValueError, match=r"not in the league's ratings: \['gone'\]"):
        opponent_weights(ratings, "iter_1", candidates=["gone"])
    with pytest.raises(ValueError, match="no opponent for 'warm'"):
        opponent_weights({"warm": 0.0}, "warm")


# --- promotion -------------------------------------------------------------------------------------


def test_a_checkpoint_is_promoted_only_above_an_even_match(metrics):
    up = promote(metrics, "iter_2", "iter_1")
    assert up.promoted and up.keep == "iter_2" and up.ci[0] > 0.5 and "promoted iter_2" in up.reason
    down = promote(metrics, "warm", "iter_1")  # whichever model the cross-play listed first
    assert not down.promoted and down.keep == "iter_1" and down.ci[1] < 0.5 and "worse than" in down.reason
    assert down.win_share == pytest.approx(1 - promote(metrics, "iter_1", "warm").win_share)
    seat = promote(metrics, "iter_2", "iter_1", order="seat1")
    assert seat.games == INSTANCES and seat.promoted


def test_an_interval_straddling_one_half_keeps_the_previous_checkpoint():
    def result(mean, ci, games=100):
        return {"games": games, "decided_win_share": {"mean": mean, "ci": ci}}

    metrics = {
        "cross_play": [{"models": ["new", "old"], "seat0": None, "seat1": None, "both": result(0.58, [0.47, 0.69])}]
    }
    kept = promote(metrics, "new", "old")
    assert not kept.promoted and kept.keep == "old" and "no better than" in kept.reason and "58.0%" in kept.reason
    metrics["cross_play"][0]["both"] = result(None, None)
    assert "decided no game" in promote(metrics, "new", "old").reason
    with pytest.raises(ValueError, match=r"no cross-play of 'new' against 'older'.*\('new', 'old'\)"):
        promote(metrics, "new", "older")


def test_a_winner_whose_self_play_stops_reaching_deals_is_not_promoted():
    def share(mean, lo, hi):
        return {"mean": mean, "ci": [lo, hi]}

    both = {"games": 192, "decided_win_share": share(0.9, 0.84, 0.94)}
    metrics = {
        "models": {"new": {"joint_share": share(0.45, 0.36, 0.54)}, "old": {"joint_share": share(0.87, 0.84, 0.9)}},
        "cross_play": [{"models": ["new", "old"], "seat0": None, "seat1": None, "both": both}],
    }
    kept = promote(metrics, "new", "old")
    assert not kept.promoted and kept.keep == "old" and kept.win_share == pytest.approx(0.9)
    assert "new wins 90.0%" in kept.reason and "45.0% [36.0%, 54.0%], lies below old's 87.0%" in kept.reason
    assert promote(metrics, "new", "old", cooperation=False).promoted  # winning alone is enough when asked
    metrics["models"]["new"]["joint_share"] = share(0.8, 0.72, 0.85)  # lower, but the intervals overlap
    assert promote(metrics, "new", "old").promoted
    del metrics["models"]  # a game without the measure: winning decides
    assert promote(metrics, "new", "old").promoted


def test_a_winner_whose_paired_self_play_drop_is_clear_is_not_promoted():
    """The intervals side by side overlap, but paired by instance the drop is clear and the new mean
    lies below the old interval: kept out. A clear but small drop (mean inside the old interval) is
    let through, and so is a large one the pairing cannot tell from zero."""

    def share(mean, lo, hi, **extra):
        return {"mean": mean, "ci": [lo, hi], **extra}

    both = {"games": 192, "decided_win_share": share(0.68, 0.63, 0.73)}
    metrics = {
        "models": {
            "old": {"joint_share": share(0.873, 0.847, 0.898)},
            "new": {"joint_share": share(0.821, 0.791, 0.849)},
        },
        "cross_play": [{"models": ["new", "old"], "seat0": None, "seat1": None, "both": both}],
        # listed from the old model's side: the rule turns it round
        "paired_self_play": [{"models": ["old", "new"], "joint_share": share(0.052, 0.021, 0.084, instances=96)}],
    }
    kept = promote(metrics, "new", "old")
    assert not kept.promoted and kept.keep == "old"
    assert "82.1% [79.1%, 84.9%], lies below old's interval 87.3%" in kept.reason
    assert "paired on 96 instances it changes by -5.2 [-8.4, -2.1] points" in kept.reason
    metrics["paired_self_play"][0]["joint_share"] = share(0.052, -0.004, 0.11, instances=96)  # not clear when paired
    assert promote(metrics, "new", "old").promoted
    metrics["paired_self_play"][0]["joint_share"] = share(0.011, 0.002, 0.02, instances=96)  # clear, but small
    metrics["models"]["new"]["joint_share"] = share(0.862, 0.83, 0.89)
    assert promote(metrics, "new", "old").promoted


def test_bounds_on_what_a_winner_gives_up_of_the_deal_keep_it_out_beyond_them():
    """A target's own terms (joint share at most 3 points down, paired; deals in 97% of self-play games) keep
    out a winner the intervals cannot fault; within them, or unset, it is promoted."""

    def share(mean, lo, hi, **extra):
        return {"mean": mean, "ci": [lo, hi], **extra}

    metrics = {
        "models": {
            "old": {"joint_share": share(0.90, 0.86, 0.93), "agreement_rate": share(1.0, 1.0, 1.0)},
            "new": {"joint_share": share(0.86, 0.81, 0.91), "agreement_rate": share(0.969, 0.93, 1.0)},
        },
        "cross_play": [
            {
                "models": ["new", "old"],
                "seat0": None,
                "seat1": None,
                "both": {"games": 192, "decided_win_share": share(0.604, 0.542, 0.667)},
            },
        ],  # fmt: skip
        "paired_self_play": [{"models": ["old", "new"], "joint_share": share(0.036, -0.02, 0.093, instances=48)}],
    }
    assert promote(metrics, "new", "old").promoted  # the paired interval reaches above zero: no loss shown
    kept = promote(metrics, "new", "old", joint_margin=0.03)
    assert not kept.promoted and kept.keep == "old" and kept.win_share == pytest.approx(0.604)
    assert "changes by -3.6 points against old's (paired on 48 instances), more than the 3.0 points" in kept.reason
    assert promote(metrics, "new", "old", joint_margin=0.04).promoted
    kept = promote(metrics, "new", "old", joint_margin=0.04, min_agreement=0.97)
    assert not kept.promoted and "reaches a deal in 96.9% of its games, below the run's 97.0%" in kept.reason
    assert promote(metrics, "new", "old", min_agreement=0.96, cooperation=False).promoted  # bounds stand alone
    del metrics["paired_self_play"]  # not paired: the means side by side
    assert "-4.0 points against old's (side by side)" in promote(metrics, "new", "old", joint_margin=0.03).reason
    del metrics["models"]  # a game without the measures: winning decides
    assert promote(metrics, "new", "old", joint_margin=0.0, min_agreement=1.0).promoted


# --- progress and skill ----------------------------------------------------------------------------


def test_progress_per_checkpoint(metrics):
    rows = progress(metrics, ["warm", "iter_1", "iter_2"], "warm")
    assert [r["checkpoint"] for r in rows] == ["warm", "iter_1", "iter_2"]
    assert rows[0]["vs_previous"] is None and rows[0]["vs_warm_start"] is None
    for row in rows[1:]:
        for versus in ("vs_previous", "vs_warm_start"):
            assert row[versus]["both"]["ci"][0] > 0.5
    # strength 1 wins in each seat order; 0.6 against 0.3 wins pooled, though not from seat 1
    assert all(
        rows[2][v][order]["ci"][0] > 0.5 for v in ("vs_previous", "vs_warm_start") for order in ("seat0", "seat1")
    )
    assert [r["rating"]["rating"] for r in rows] == sorted(r["rating"]["rating"] for r in rows)
    for row in rows:
        assert 0 < row["joint_share"]["mean"] <= 1 and 0 <= row["pareto_optimal_share"]["mean"] <= 1
        # the scripted negotiator says the same words in every game: few distinct bigrams
        assert 0 < row["diversity"]["distinct_2_seat0"] < 0.5
    table = progress_table(rows)
    assert table.count("\n") == 4 and "| iter_2 |" in table and "| warm | – | – | – |" in table


def test_each_level_step_is_paired_over_the_instances_both_levels_played_against_one_partner(tournament):
    ordered = level_steps(tournament, list(STRENGTHS), ["warm"], resamples=400)
    assert [(s["lower"], s["higher"]) for s in ordered] == [("warm", "iter_1"), ("iter_1", "iter_2")]
    assert all(step_up(s) and s["win"]["instances"] == INSTANCES and s["points"]["mean"] > 0 for s in ordered)
    reversed_scale = level_steps(tournament, list(reversed(STRENGTHS)), ["warm"], resamples=400)
    assert not any(step_up(s) for s in reversed_scale)
    assert all(s["win"]["mean"] == -o["win"]["mean"] for s, o in zip(reversed_scale, reversed(ordered)))
    # no games of a level against a partner: no step to read
    assert level_steps(tournament, list(STRENGTHS), ["scripted@1"]) == []
    table = steps_table(ordered)
    assert "| warm | warm → iter_1 | 24 |" in table and table.count("| yes |") == 2


def test_skill_following_from_cross_play_of_levels(tournament):
    levels = tournament.replace(LEVELS)
    found = follows_levels(levels, resamples=400)
    assert found["follows"] and found["meets_target"] and found["expert_vs_novice"]["mean"] >= 0.65
    assert [(p["higher"], p["lower"]) for p in found["pairs"]] == [
        ("intermediate", "novice"),
        ("expert", "novice"),
        ("expert", "intermediate"),
    ]
    points = found["points"]
    assert points["novice"]["mean"] < points["intermediate"]["mean"] < points["expert"]["mean"]
    inverted = tournament.replace({"warm": "expert", "iter_1": "intermediate", "iter_2": "novice"})
    assert not follows_levels(inverted, resamples=400)["follows"]
    with pytest.raises(ValueError, match=r"\['warm'\] are not skill levels"):
        follows_levels(tournament.replace({"iter_1": "novice", "iter_2": "expert"}))
