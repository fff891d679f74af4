"""Adding a game touches only its own folder and one registry line: the sum game of
tests/games_toy/, registered here, is played by `selfplay-gen play --backend scripted`, its
records are checked on read with its own record parts, `selfplay-convert` turns them into
chats, and `selfplay-gen eval` reports them with the evaluation every game gets by default, all
through the same code the matching and negotiation games use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from games_toy import SumGame, SumInstance
from test_convert import convert, rows

from selfplay_gen import games
from selfplay_gen.cli import main
from selfplay_gen.games.base import MAX_INVALID
from selfplay_gen.records import RecordError, parse, read_games

games.register("sum", "games_toy.SumGame")


def test_the_registry_finds_the_game():
    assert games.get("sum") is SumGame and "sum" in games.names()
    game = SumGame()
    start = game.reset(SumInstance.from_seed(3))
    assert start.told == (("You move first.",), ()) and str(game.instance.digits[0]) in start.system[0]
    assert not game.step(0, "[answer] seven").valid  # invalid: a number is needed
    assert game.step(0, "[say] hi").told[1] == ("Partner: [say] hi",)
    assert game.step(1, f"[answer] {sum(game.instance.digits)}").done
    assert game.outcome is not None and game.outcome.rewards == (1.0, 1.0) and game.outcome.terminated


def test_invalid_moves_in_a_row_truncate_the_game():
    game = SumGame()
    game.reset(SumInstance.from_seed(1))
    for _ in range(3):
        game.step(0, "no tag")
    assert game.outcome is not None and game.outcome.termination == MAX_INVALID and game.outcome.truncated


@pytest.fixture(scope="module")
def played(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sum") / "games.jsonl"
    args = ["--game", "sum", "--backend", "scripted", "--num-games", "12", "-k", "4", "--out", str(out), "-q"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out


def test_play_writes_checked_records_of_the_game(played):
    records = list(read_games(played))
    assert len(records) == 12 and {r["game"] for r in records} == {"sum"}
    for record in records:
        digits = record["instance"]["digits"]
        assert record["outcome"]["best_sum"] == sum(digits) and record["outcome"]["answer"] == sum(digits)
        assert record["outcome"]["rewards"] == [1.0, 1.0] and record["outcome"]["terminated"]
        assert [e["kind"] for e in record["events"]] == ["say", "answer"] and record["failure"] is None
    summary = json.loads(played.with_name("games.summary.json").read_text())
    assert summary["games"] == 12 and summary["agreement_rate"] == 1.0


def test_the_games_own_record_parts_are_checked(played):
    record = json.loads(played.read_text().splitlines()[0])
    record["instance"]["digits"] = [3, 12]
    with pytest.raises(RecordError, match=r"x:1: field 'instance.digits\[1\]': 12"):
        parse(json.dumps(record).encode(), "x:1")


def test_convert_writes_the_games_chats(played, tmp_path):
    out = tmp_path / "sft"
    convert(played, "--format", "sft", "--top-fraction", "1", "--out-dir", str(out))
    chats = rows(out / "train.parquet") + rows(out / "val.parquet")
    assert chats and {row["data_source"] for row in chats} == {"selfplay_sum"}
    for row in chats:
        said = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
        assert said and all(text.startswith(("[say]", "[answer]")) for text in said)


def test_eval_reports_the_game_with_the_default_evaluation(tmp_path):
    """A game that brings no evaluation of its own gets the one every record allows: rewards per
    seat, agreement, moves, endings, cross-play per seat order, and a run report row."""
    out, run = tmp_path / "eval", tmp_path / "run"
    args = ["eval", "--game", "sum", "--backend", "scripted", "--partner-scripted-strength", "0.2"]
    args += ["--limit-instances", "6", "-k", "2", "--out", str(out), "-q", "--bootstrap", "200"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["game"] == "sum" and set(metrics["models"]) == {"scripted-strength-1", "scripted-strength-0.2"}
    # the strong teller's self-play always finds the sum; the weak one's seat 1 guesses
    strong, weak = metrics["models"]["scripted-strength-1"], metrics["models"]["scripted-strength-0.2"]
    assert strong["games"] == 12 and strong["mean_reward"]["mean"] == 1.0 and strong["agreement_rate"]["mean"] == 1.0
    assert weak["mean_reward"]["mean"] < 1.0 and weak["terminations"]["answered"]["games"] == 12
    assert {tuple(e["seats"]) for e in metrics["cross_play"]} == {
        ("scripted-strength-1", "scripted-strength-0.2"),
        ("scripted-strength-0.2", "scripted-strength-1"),
    }
    assert "# Evaluation: sum" in (out / "report.md").read_text()

    one = ["eval", "--game", "sum", "--backend", "scripted", "--limit-instances", "3", "-k", "1", "-q"]
    for label in ("base", "iter1"):
        result = CliRunner().invoke(
            main, [*one, "--out", str(tmp_path / label), "--label", label, "--append-to", str(run)]
        )
        assert result.exit_code == 0, result.output
    report = json.loads((run / "metrics.json").read_text())
    assert report["game"] == "sum" and [r["label"] for r in report["rows"]] == ["base", "iter1"]
    assert "| 1: iter1 | 3 | 3 |" in (run / "report.md").read_text()
