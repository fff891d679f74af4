"""`selfplay-gen eval --from-games` counts each finished game once: failed games are left out with
a count, a repeated game id is refused naming its lines."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from test_eval import record, write_jsonl

from selfplay_gen.cli import main


def failed(instance: str, game: int) -> dict:
    """A game the server ended: reward 0 whatever the model did."""
    r = record(instance, 0.0, game=game)
    r["failure"] = {"reason": "backend_error", "detail": "server gone", "player": 0}
    r["outcome"]["termination"] = "backend_error"
    return r


def evaluate(tmp_path, records):
    games = write_jsonl(tmp_path / "games.jsonl", records)
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["eval", "--from-games", f"m={games}", "--out", str(out), "--bootstrap", "100"])
    return result, (json.loads((out / "metrics.json").read_text()) if result.exit_code == 0 else None)


def test_failed_games_are_left_out_of_the_means_and_counted(tmp_path):
    result, metrics = evaluate(tmp_path, [record("a", 0.8), failed("a", 1), failed("b", 0), record("b", 0.6, game=1)])
    assert result.exit_code == 0, result.output
    model = metrics["models"]["m"]
    assert model["mean_normalized_reward"]["mean"] == pytest.approx(0.7)  # (0.8 + 0.6) / 2, not averaged with two zeros
    assert model["games"] == 2 and model["failed_games"] == 2
    assert "backend_error" not in model["terminations"]
    assert "2 failed games left out of every figure (backend_error: 2)" in result.stderr


def test_a_file_of_failed_games_only_is_refused(tmp_path):
    result, _ = evaluate(tmp_path, [failed("a", 0), failed("a", 1)])
    assert result.exit_code == 2
    assert "games.jsonl holds no games that did not fail (2 failed)" in result.output


def test_a_repeated_game_is_refused_naming_file_and_lines(tmp_path):
    result, _ = evaluate(tmp_path, [record("a", 0.8), record("b", 0.6), record("a", 0.8)])
    assert result.exit_code == 2
    assert "games.jsonl: line 3: field 'game_id': 'a/0' is already the game of line 1" in result.output
