"""The random-matching baseline, the outcome columns of the report, and idempotent run reports."""

from __future__ import annotations

import asyncio
import json
from itertools import permutations

import numpy as np
import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main
from selfplay_gen.evaluation.cli import generate_games
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import Limits
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.games.matching.metrics import game_table, human_table, random_matching_reward, summarize
from selfplay_gen.games.matching.scripted import ScriptedPlayer
from selfplay_gen.records import read_games

PERMUTATIONS = np.array(list(permutations(range(8))))  # all 8! = 40,320 assignments


@pytest.mark.parametrize("table", [Instance.from_seed(1).table, np.random.default_rng(7).integers(0, 100, (8, 8))])
def test_random_matching_reward_equals_brute_force_over_all_assignments(table):
    table = np.asarray(table)
    best = Instance(table.tolist(), (np.ones((8, 8), int).tolist(),) * 2, (1.0, 1.0)).best_reward
    totals = table[np.arange(8), PERMUTATIONS].sum(axis=1)
    assert totals.max() == best
    assert random_matching_reward(table.tolist(), best) == pytest.approx(totals.mean() / best, rel=1e-12)


@pytest.fixture(scope="module")
def games_files(tmp_path_factory):
    """Scripted self-play that shares little vs much, on the same 5 instances."""
    folder = tmp_path_factory.mktemp("baseline")
    instances = [Instance.from_seed(s) for s in range(5)]
    files = {}
    for name, share in (("low", 0.1), ("high", 0.9)):

        def seat(spec, s, game, start, share=share):
            return ScriptedPlayer(spec.instance, s, share=share, rng=np.random.default_rng([spec.game_index, s]))

        files[name] = asyncio.run(
            generate_games(
                folder / f"{name}.jsonl",
                instances,
                2,
                (seat, seat),
                GameConfig("matching", Limits(max_moves=30)),
                4,
                {},
                progress=False,
            )
        )
    return files


def test_summary_reports_the_baseline_and_the_paired_difference(games_files):
    records = list(read_games(games_files["high"]))
    games = game_table(records, ("m", "m"))
    expected = [random_matching_reward(r["instance"]["table"], r["outcome"]["best_reward"]) for r in records]
    assert games["random_matching_reward"].tolist() == pytest.approx(expected)
    s = summarize(games, 300, np.random.default_rng(0))
    floor = games.groupby("instance_id")["random_matching_reward"].mean()
    reward = games.groupby("instance_id")["normalized_reward"].mean()
    assert s["random_matching_reward"]["mean"] == pytest.approx(floor.mean())
    assert s["minus_random"]["mean"] == pytest.approx((reward - floor).mean()) and s["minus_random"]["instances"] == 5
    assert s["valid_move_rate"]["mean"] == 1.0 and s["invalid_move_rate"] == 0.0  # scripted players never err


def test_humans_baseline_is_below_their_score():
    s = summarize(human_table(), 300, np.random.default_rng(0))
    assert 0.5 < s["random_matching_reward"]["mean"] < s["mean_normalized_reward"]["mean"]
    assert s["minus_random"]["ci"][0] > 0 and s["minus_random"]["instances"] == 134
    assert s["valid_move_rate"] == {"mean": None, "ci": None}  # people could make no invalid moves


def invoke(args):
    result = CliRunner().invoke(main, ["eval", *args, "--bootstrap", "200"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_report_shows_the_baseline_beside_every_reward(tmp_path, games_files):
    invoke(
        [
            "--from-games",
            f"low={games_files['low']}",
            "--from-games",
            f"high={games_files['high']}",
            "--out",
            str(tmp_path),
        ]
    )
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    for entry in metrics["iterations"]:
        for key in (
            "random_matching_reward", "minus_random", "agreement_rate", "agreed_reward", "valid_move_rate",
            "grounding_rate",
        ):  # fmt: skip
            assert entry[key] is not None, key
    report = (tmp_path / "report.md").read_text()
    for column in (
        "mean normalized reward [95% CI]",
        "random matching (same instances)",
        "model − random (paired)",
        "reward when agreed",
        "valid moves",
        "cells stated/game",
        "grounding [95% CI]",
        "− initial (paired)",
    ):
        assert column in report, column


def test_appending_the_same_label_again_replaces_its_row_in_place(tmp_path, games_files):
    run = tmp_path / "run"
    steps = [("it0", "low", "a"), ("it1", "high", "b"), ("it1", "high", "c"), ("it0", "high", "d")]
    for label, name, out in steps:
        invoke(["--from-games", f"{label}={games_files[name]}", "--out", str(tmp_path / out), "--append-to", str(run)])
    metrics = json.loads((run / "metrics.json").read_text())
    assert [(r["iteration"], r["label"], r["source"]) for r in metrics["rows"]] == [
        (0, "it0", str(tmp_path / "d")),
        (1, "it1", str(tmp_path / "c")),
    ]
    (_, second) = metrics["iterations"]
    assert second["vs_initial"]["mean"] == pytest.approx(0.0)  # it0 is now the same games as it1
    assert second["vs_previous"]["instances"] == 5
    report = (run / "report.md").read_text()
    # once in each table: iterations, outcomes, dialogue, endings
    assert report.count("| 0: it0 |") == 4 and report.count("| 1: it1 |") == 4
