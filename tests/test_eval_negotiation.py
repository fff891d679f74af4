"""`selfplay-gen eval --game negotiation`: cross-play win rates and ratings of scripted
negotiators of known strength, the metrics on hand-made games, and what the game refuses."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main
from selfplay_gen.games.negotiation.evaluation import evaluate, no_deal_table
from selfplay_gen.stats.metrics import win_counts

STRONG, WEAK = "scripted-strength-1", "scripted-strength-0.3"


def invoke(args):
    return CliRunner().invoke(main, ["eval", "--game", "negotiation", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def strengths(tmp_path_factory):
    """Scripted negotiators of strength 1 and 0.3 in self-play and both cross-play seat orders."""
    out = tmp_path_factory.mktemp("neg") / "report"
    result = invoke(
        [
            "--reward-mode",
            "competitive",
            "--backend",
            "scripted",
            "--scripted-strength",
            "1",
            "--partner-scripted-strength",
            "0.3",
            "--limit-instances",
            "30",
            "-k",
            "2",
            "--bootstrap",
            "400",
            "--out",
            str(out),
            "-q",
        ]
    )
    assert result.exit_code == 0, result.output
    return out


def test_the_stronger_negotiator_wins_in_both_seat_orders(strengths):
    metrics = json.loads((strengths / "metrics.json").read_text())
    assert list(metrics["models"]) == [STRONG, WEAK]
    (cross,) = metrics["cross_play"]
    assert cross["models"] == [STRONG, WEAK]
    for order in ("seat0", "seat1", "both"):
        result = cross[order]
        assert result["instances"] == 30 and result["games"] == (120 if order == "both" else 60)
        assert result["win"]["mean"] + result["tie"]["mean"] + result["loss"]["mean"] == pytest.approx(1)
        assert result["decided_win_share"]["ci"][0] > 0.5  # the interval excludes an even match
        assert result["points"]["mean"] > result["partner_points"]["mean"]
    ratings = metrics["ratings"]
    assert ratings[STRONG]["rating"] == 0 and ratings[WEAK]["ci"][1] < 0
    assert ratings[STRONG]["comparisons"] == ratings[WEAK]["comparisons"] == 120
    model = metrics["models"][STRONG]
    assert model["agreement_rate"]["mean"] == 1.0  # two scripted negotiators always make a deal
    # its words repeat from game to game, and it proposes the same split in both games of an instance
    diversity = model["diversity"]
    assert 0 < diversity["distinct_2_seat0"] < 0.5 and diversity["repeated_message_share"] > 0.5
    assert diversity["distinct_proposal_share"] <= 0.5
    assert 0 < model["points_seat0"]["mean"] <= 10 and model["games"] == 60
    report = (strengths / "report.md").read_text()
    assert "## Cross-play" in report and f"{STRONG} vs {WEAK}" in report


def test_games_already_played_give_the_same_metrics(strengths, tmp_path):
    games = strengths / "games"
    specs = [f"{STRONG}={games / f'{STRONG}__{STRONG}.jsonl'}", f"{WEAK}={games / f'{WEAK}__{WEAK}.jsonl'}"]
    specs += [f"{a},{b}={games / f'{a}__{b}.jsonl'}" for a, b in ((STRONG, WEAK), (WEAK, STRONG))]
    result = invoke([x for s in specs for x in ("--from-games", s)] + ["--bootstrap", "400", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    again, first = (json.loads((d / "metrics.json").read_text()) for d in (tmp_path, strengths))
    assert again["cross_play"] == first["cross_play"] and again["ratings"] == first["ratings"]


def table(rows):
    return pd.DataFrame(
        [
            {"instance_id": i, "seat0": s0, "seat1": s1, "points0": p0, "points1": p1, "agreed": p0 + p1 > 0}
            for i, s0, s1, p0, p1 in rows
        ]
    )


def test_wins_count_per_instance_with_ties_as_halves_and_self_play_left_out():
    games = table([("x", "a", "b", 6, 4), ("x", "b", "a", 5, 5), ("y", "b", "a", 7, 3), ("y", "a", "a", 9, 1)])
    wins = win_counts(games, ["a", "b"], "points")
    assert wins.tolist() == [[[0, 1.5], [0.5, 0]], [[0, 0], [1, 0]]]


def test_win_rates_are_from_the_first_models_side_in_each_seat_order():
    games = table([("x", "a", "b", 6, 4), ("x", "b", "a", 5, 5), ("y", "a", "b", 0, 0), ("y", "b", "a", 8, 2)])
    games = games.assign(game_id="g", joint=1.0, pareto_optimal=False, moves=2, invalid=0, termination="t")
    games = games.assign(failed=False, messages0=[[]] * 4, messages1=[[]] * 4, proposals=[[]] * 4)
    (cross,) = evaluate(games, ["a", "b"], 100, 0)["cross_play"]
    assert cross["seat0"]["win"]["mean"] == 0.5 and cross["seat0"]["tie"]["mean"] == 0.5
    assert cross["seat1"]["tie"]["mean"] == 0.5 and cross["seat1"]["loss"]["mean"] == 0.5
    assert cross["both"]["decided_win_share"]["mean"] == 0.5
    assert cross["both"]["points"]["mean"] == np.mean([(6 + 5) / 2, (0 + 2) / 2])


def test_self_play_is_compared_instance_by_instance_on_the_instances_both_played():
    """a's deals are worth 0.2 more of the best joint than b's on every shared instance, while the
    instances' own spread (0.3 to 0.9) is wider than that: the paired difference is exactly 0.2."""
    rows = [("x", "a", "a", 5, 4), ("x", "b", "b", 4, 3), ("y", "a", "a", 2, 1), ("y", "b", "b", 1, 0)]
    rows += [("z", "b", "b", 0, 0)]  # b alone: left out of the pairing
    games = table(rows).assign(game_id="g", joint=[0.9, 0.7, 0.3, 0.1, 0.0], pareto_optimal=[1, 0, 1, 0, 0])
    games = games.assign(moves=2, invalid=0, termination="t", failed=False, proposals=[[]] * 5)
    games = games.assign(messages0=[[]] * 5, messages1=[[]] * 5)
    metrics = evaluate(games, ["a", "b"], 200, 0)
    (paired,) = metrics["paired_self_play"]
    assert paired["models"] == ["a", "b"] and paired["instances"] == 2
    joint = paired["joint_share"]
    assert joint["mean"] == pytest.approx(0.2) and joint["ci"] == pytest.approx([0.2, 0.2])
    assert paired["pareto_optimal_share"]["mean"] == 1.0 and paired["points_seat0"]["mean"] == 1.0
    assert paired["agreement_rate"]["mean"] == 0.0  # both made a deal on x and y
    assert metrics["models"]["a"]["joint_share"]["ci"][1] - metrics["models"]["a"]["joint_share"]["ci"][0] > 0.5


def test_the_report_shows_the_paired_self_play_of_a_cross_play_match(strengths):
    metrics = json.loads((strengths / "metrics.json").read_text())
    (paired,) = metrics["paired_self_play"]
    assert paired["models"] == [STRONG, WEAK] and paired["instances"] == 30
    assert f"| {STRONG} − {WEAK} | 30 |" in (strengths / "report.md").read_text()


def test_what_the_negotiation_eval_refuses(tmp_path):
    result = CliRunner().invoke(
        main, ["eval", "--game", "negotiation", "--backend", "scripted", "--instances", "human", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2 and "has random ones only" in result.output


def test_append_to_keeps_a_run_level_report_of_each_checkpoints_self_play(strengths, tmp_path):
    games, run = strengths / "games", tmp_path / "run"
    for label, name in (("base", WEAK), ("iter_1", STRONG), ("iter_1", STRONG)):  # the last: a resumed iteration
        spec = f"{label}={games / f'{name}__{name}.jsonl'}"
        args = ["--from-games", spec, "--bootstrap", "200", "--out", str(tmp_path / label), "--append-to", str(run)]
        result = invoke(args)
        assert result.exit_code == 0, result.output
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["game"] == "negotiation" and [r["label"] for r in metrics["rows"]] == ["base", "iter_1"]
    assert [e["label"] for e in metrics["iterations"]] == ["0: base", "1: iter_1"]
    assert metrics["iterations"][1]["agreement_rate"]["mean"] == 1.0
    assert "| 1: iter_1 | 60 | 30 |" in (run / "report.md").read_text()
    matching = CliRunner().invoke(
        main,
        ["eval", "--backend", "scripted", "--limit-instances", "2", "-k", "1", "-q", "--out", str(tmp_path / "m")]
        + ["--append-to", str(run)],
    )
    assert matching.exit_code == 2 and "a run-level report of the negotiation game" in matching.output


def test_the_report_counts_each_models_games_without_a_deal_by_how_they_ended(strengths):
    rows = [("x", "a", "a", 5, 4), ("y", "a", "a", 0, 0), ("z", "a", "a", 0, 0), ("x", "b", "b", 0, 0)]
    rows += [("y", "b", "b", 3, 3)]
    games = table(rows).assign(game_id="g", joint=0.5, pareto_optimal=False, moves=2, invalid=0, failed=False)
    games = games.assign(termination=["agreed", "inconsistent", "max_moves", "inconsistent", "agreed"])
    games = games.assign(proposals=[[]] * 5, messages0=[[]] * 5, messages1=[[]] * 5)
    assert no_deal_table(evaluate(games, ["a", "b"], 100, 0)).splitlines() == [
        "| model | games | inconsistent | max_moves |",
        "|---|---|---|---|",
        "| a | 3 | 1 | 1 |",
        "| b | 2 | 1 | 0 |",
    ]
    # scripted negotiators always make a deal: their report has no such table
    assert "max_moves" not in (strengths / "report.md").read_text()
