"""Evaluation: metrics with known answers, ratings, the report, the command end to end."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main
from selfplay_gen.evaluation.cli import generate_games
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import Limits
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.games.matching.metrics import game_table, human_table, summarize
from selfplay_gen.games.matching.scripted import ScriptedPlayer
from selfplay_gen.records import read_games
from selfplay_gen.stats.metrics import distinct_n, mean_interval, paired_difference, repeated_share
from selfplay_gen.stats.ratings import bradley_terry, rate

PNG = b"\x89PNG\r\n\x1a\n"
TABLE = [[(r * 8 + p) % 100 for p in range(8)] for r in range(8)]
MASKS = [[[1] * 8 for _ in range(8)], [[0] * 8 for _ in range(8)]]
BEST = Instance(TABLE, tuple(MASKS), (1.0, 1.0)).best_reward


def record(
    instance: str,
    reward: float,
    optimal: bool = False,
    moves: int = 4,
    invalid: int = 0,
    messages: tuple[str, ...] = ("hello there",),
    game: int = 0,
    proposals: tuple[list[list[int]], ...] = (),
) -> dict:
    """A minimal valid record: only what the metrics read."""
    agreed = reward > 0
    events = [{"player": 0, "kind": "message", "text": m, "pairs": None, "error": None} for m in messages]
    events += [{"player": 1, "kind": "propose", "text": "", "pairs": pairs, "error": None} for pairs in proposals]
    return {
        "schema_version": 1,
        "game_id": f"{instance}/{game}",
        "group": 0,
        "game_index": game,
        "instance_id": instance,
        "instance": {"table": TABLE, "masks": MASKS, "scales": [1.0, 1.0]},
        "settings": {},
        "players": [
            {"kind": "scripted", "messages": [{"role": "assistant", "content": "[message] " + m} for m in messages]},
            {"kind": "scripted", "messages": []},
        ],
        "events": events,
        "failure": None,
        "outcome": {
            "agreed": agreed,
            "termination": "accepted" if agreed else "max_moves",
            "raw_reward": BEST if optimal else BEST - 10,
            "best_reward": BEST,
            "normalized_reward": reward,
        },
        "stats": {"valid_moves": moves, "invalid_moves": invalid},
    }


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


# ---------------------------------------------------------------- metrics


def test_summary_has_known_means_and_instance_level_intervals():
    rng = np.random.default_rng(0)
    # instance a: games 1.0 and 0.0 (mean 0.5); instance b: one game 0.9: mean of instance means 0.7
    games = game_table([record("a", 1.0, optimal=True), record("a", 0.0, game=1), record("b", 0.9)], ("m", "m"))
    s = summarize(games, 500, rng)
    assert s["mean_normalized_reward"]["mean"] == pytest.approx(0.7)
    assert s["agreement_rate"]["mean"] == pytest.approx(0.75)
    assert s["optimal_share"]["mean"] == pytest.approx(0.25)
    # the agreed games' own mean (1.0 and 0.9), apart from the game without agreement
    assert s["agreed_reward"]["mean"] == pytest.approx(0.95)
    assert 0.9 <= s["agreed_reward"]["ci"][0] <= 0.95 <= s["agreed_reward"]["ci"][1] <= 1.0
    assert s["terminations"] == {"accepted": {"games": 2, "share": 2 / 3}, "max_moves": {"games": 1, "share": 1 / 3}}
    lo, hi = s["mean_normalized_reward"]["ci"]
    assert 0.5 <= lo <= 0.7 <= hi <= 0.9  # resampling instances: only 0.5/0.9 instance means exist
    assert s["instances"] == 2 and s["games"] == 3


def test_invalid_move_rate_counts_all_attempts():
    games = game_table([record("a", 1.0, moves=6, invalid=2), record("b", 1.0, moves=2, invalid=0)], ("m", "m"))
    assert summarize(games, 100, np.random.default_rng(0))["invalid_move_rate"] == pytest.approx(2 / 10)


def test_intervals_contain_the_mean_and_shrink_with_more_instances():
    rng = np.random.default_rng(1)
    small = rng.uniform(0, 1, 20)
    large = np.tile(small, 25)  # same distribution, 25 times the instances
    a, b = mean_interval(small, 2000, rng), mean_interval(large, 2000, rng)
    for stat in (a, b):
        assert stat["ci"][0] < stat["mean"] < stat["ci"][1]
    assert (b["ci"][1] - b["ci"][0]) < 0.5 * (a["ci"][1] - a["ci"][0])


def test_paired_difference_uses_shared_instances_only():
    a = pd.Series({"x": 0.9, "y": 0.8, "z": 0.5})
    b = pd.Series({"x": 0.7, "y": 0.6, "w": 0.0})
    d = paired_difference(a, b, 200, np.random.default_rng(0))
    assert d["instances"] == 2
    assert d["mean"] == pytest.approx(0.2) and d["ci"] == pytest.approx([0.2, 0.2])
    assert paired_difference(a, pd.Series({"q": 1.0}), 200, np.random.default_rng(0)) is None


def test_distinct_n_and_repeated_messages_on_hand_made_text():
    assert distinct_n(["a b a b"], 1) == pytest.approx(2 / 4)
    assert distinct_n(["a b a b"], 2) == pytest.approx(2 / 3)  # (a b), (b a), (a b)
    assert distinct_n(["a b", "c d"], 2) == pytest.approx(1.0)  # n-grams never cross messages
    assert distinct_n(["one"], 2) is None
    # "hi there" occurs in games 0 and 1 (case and spacing aside); "x" only in game 0; game 2 repeats itself
    assert repeated_share([["hi there", "x"], ["Hi  there"], ["y", "y"]]) == pytest.approx(2 / 5)


def top_proposal_share(*records: dict) -> float | None:
    return summarize(game_table(records, ("m", "m")), 100, np.random.default_rng(0))["diversity"]["top_proposal_share"]


def test_top_proposal_share_shows_one_assignment_proposed_whatever_the_table():
    """The most proposed assignment's share of all proposals: 1 when every game proposes the same one (the same
    pairs in any order), lower when proposals differ; no proposals, no figure. People's proposals follow their
    tables: none of their assignments is more than a few of them."""
    identity, shifted, swapped = ([[r, (r + k) % 8] for r in range(8)] for k in (0, 1, 2))
    copied = record("a", 0.6, proposals=(identity, identity[::-1])), record("b", 0.6, proposals=(identity,))
    assert top_proposal_share(*copied) == 1
    varied = (identity, shifted), (shifted,), (swapped,)
    assert top_proposal_share(*(record(i, 0.6, proposals=p) for i, p in zip("abc", varied, strict=True))) == 0.5
    assert top_proposal_share(record("a", 0.0), record("b", 0.0)) is None
    assert summarize(human_table(), 100, np.random.default_rng(0))["diversity"]["top_proposal_share"] < 0.05


def test_human_games_match_the_published_figures():
    humans = human_table()
    s = summarize(humans, 200, np.random.default_rng(0))
    assert s["games"] == 134
    assert s["mean_normalized_reward"]["mean"] == pytest.approx(0.921, abs=5e-4)
    assert s["optimal_share"]["mean"] == pytest.approx(0.216, abs=5e-4)
    assert s["messages_per_game"]["mean"] == pytest.approx(12.0, abs=0.05)
    assert s["words_per_game"]["mean"] == pytest.approx(175.3, abs=0.05)
    assert s["invalid_move_rate"] is None


# ---------------------------------------------------------------- ratings


def test_model_that_wins_paired_comparisons_rates_higher():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.3, 0.7, 40)
    scores = pd.DataFrame(
        {
            "weak": base,
            "strong": base + np.where(np.arange(40) < 30, 0.2, -0.1),
            "middle": base + np.where(np.arange(40) < 25, 0.05, -0.05),
        }
    )
    ratings = rate(scores, 300, rng)
    assert ratings["weak"]["rating"] == 0.0
    assert ratings["strong"]["rating"] > ratings["middle"]["rating"] > ratings["weak"]["rating"]
    lo, hi = ratings["strong"]["ci"]
    assert lo <= ratings["strong"]["rating"] <= hi and lo > 0
    assert ratings["strong"]["comparisons"] == 80  # 40 instances x 2 opponents


def test_bradley_terry_stays_finite_when_one_model_wins_everything_and_skips_unrated():
    wins = np.array([[0, 50, 0], [0, 0, 0], [0, 0, 0]], dtype=float)
    theta = bradley_terry(wins)
    assert theta[0] == 0 and np.isfinite(theta[1]) and theta[1] < 0
    assert np.isnan(theta[2])
    assert theta[1] == pytest.approx(-np.log(50.5 / 0.5))  # MLE with one virtual draw


# ---------------------------------------------------------------- the command


def invoke(args):
    return CliRunner().invoke(main, ["eval", *args], catch_exceptions=False)


def test_human_benchmark_end_to_end_with_scripted_players(tmp_path):
    out = tmp_path / "report"
    result = invoke(
        ["--backend", "scripted", "--limit-instances", "3", "-k", "1", "--out", str(out), "-q", "--bootstrap", "200"]
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    model = metrics["models"]["scripted-0.5"]
    assert model["games"] == 3 and model["instances"] == 3
    assert model["agreement_rate"]["mean"] == 1.0  # scripted players always agree
    assert metrics["humans"]["games"] == 3  # the people who played the same 3 instances
    assert metrics["minus_humans"]["scripted-0.5"]["instances"] == 3
    assert set(metrics["per_instance"]["scripted-0.5"]) == {"human-000", "human-001", "human-002"}
    assert "| humans | 3 | 3 |" in (out / "report.md").read_text()
    for name in ("reward_distribution.png", "moves_per_game.png"):
        data = (out / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 1000
    assert len((out / "games" / "scripted-0.5__scripted-0.5.jsonl").read_text().splitlines()) == 3


def test_heldout_instances_use_the_heldout_seed_range(tmp_path):
    result = invoke(
        [
            "--backend",
            "scripted",
            "--instances",
            "heldout",
            "--limit-instances",
            "2",
            "-k",
            "1",
            "--out",
            str(tmp_path),
            "-q",
            "--bootstrap",
            "100",
        ]
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert set(metrics["per_instance"]["scripted-0.5"]) == {"seed-1000000000", "seed-1000000001"}
    assert metrics["humans"] is None


@pytest.fixture(scope="module")
def cross_play_files(tmp_path_factory):
    """Scripted players that share 10% vs 90% of what they see, in all four seat pairings."""
    folder = tmp_path_factory.mktemp("cross")
    instances = [Instance.from_seed(s) for s in range(6)]

    def seat(share):
        return lambda spec, s, game, start: ScriptedPlayer(
            spec.instance, s, share=share, rng=np.random.default_rng([spec.game_index, s])
        )

    seats = {"low": seat(0.1), "high": seat(0.9)}
    files = {}
    for a, b in (("low", "low"), ("high", "high"), ("low", "high"), ("high", "low")):
        files[a, b] = asyncio.run(
            generate_games(
                folder / f"{a}-{b}.jsonl",
                instances,
                2,
                (seats[a], seats[b]),
                GameConfig("matching", Limits(max_moves=30)),
                4,
                {},
                progress=False,
            )
        )
    return files


def test_cross_play_and_ratings_from_games(tmp_path, cross_play_files):
    args = [f"{a}={f}" if a == b else f"{a},{b}={f}" for (a, b), f in cross_play_files.items()]
    result = invoke(
        [x for spec in args for x in ("--from-games", spec)] + ["--out", str(tmp_path), "--bootstrap", "200"]
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert list(metrics["models"]) == ["low", "high"]
    assert (
        metrics["models"]["high"]["mean_normalized_reward"]["mean"]
        > metrics["models"]["low"]["mean_normalized_reward"]["mean"]
    )
    (cross,) = metrics["cross_play"]
    assert cross["models"] == ["low", "high"] and cross["instances"] == 6
    assert [p["seats"] for p in cross["pairings"]] == [
        ["low", "low"],
        ["high", "high"],
        ["low", "high"],
        ["high", "low"],
    ]
    assert cross["cross_minus_self"]["low"]["instances"] == 6
    assert metrics["ratings"]["low"]["rating"] == 0.0 and metrics["ratings"]["high"]["rating"] > 0
    assert [e["iteration"] for e in metrics["iterations"]] == [0, 1]
    assert metrics["iterations"][1]["vs_previous"]["instances"] == 6
    for name in ("reward_by_iteration.png", "rating.png"):
        assert (tmp_path / name).read_bytes().startswith(PNG)
    report = (tmp_path / "report.md").read_text()
    assert "## Cross-play" in report and "## Iterations" in report


def test_append_to_builds_a_run_level_report(tmp_path, cross_play_files):
    run = tmp_path / "run"
    for i, name in enumerate(("low", "high")):
        spec = f"iter{i}={cross_play_files[name, name]}"
        result = invoke(
            ["--from-games", spec, "--out", str(tmp_path / f"it{i}"), "--append-to", str(run), "--bootstrap", "200"]
        )
        assert result.exit_code == 0, result.output
    metrics = json.loads((run / "metrics.json").read_text())
    assert [r["label"] for r in metrics["rows"]] == ["iter0", "iter1"]
    assert metrics["iterations"][1]["vs_initial"]["instances"] == 6
    assert metrics["iterations"][1]["rating"]["rating"] > 0
    assert "| 1 | 1: iter1 |" in (run / "report.md").read_text()
    for name in ("reward_by_iteration.png", "moves_by_iteration.png", "rating.png"):
        assert (run / name).read_bytes().startswith(PNG)
    assert not list(run.glob(".*.tmp"))


def test_append_to_takes_one_model(tmp_path, cross_play_files):
    result = CliRunner().invoke(
        main,
        [
            "eval",
            "--from-games",
            f"a={cross_play_files['low', 'low']}",
            "--from-games",
            f"b={cross_play_files['high', 'high']}",
            "--out",
            str(tmp_path / "e"),
            "--append-to",
            str(tmp_path / "run"),
        ],
    )
    assert result.exit_code != 0 and "adds one iteration" in result.output


@pytest.mark.parametrize("case", ["missing", "empty", "bad_line", "unknown_label"])
def test_bad_inputs_fail_with_a_clear_error(tmp_path, case):
    good = write_jsonl(tmp_path / "good.jsonl", [record("a", 1.0)])
    if case == "missing":
        args, expected = ["--from-games", str(tmp_path / "nope.jsonl")], "no such file"
    elif case == "empty":
        (tmp_path / "empty.jsonl").write_text("")
        args, expected = ["--from-games", str(tmp_path / "empty.jsonl")], "holds no games"
    elif case == "bad_line":
        bad = record("b", 1.0)
        del bad["outcome"]["normalized_reward"]
        write_jsonl(tmp_path / "bad.jsonl", [record("a", 1.0), bad])
        args, expected = (
            ["--from-games", str(tmp_path / "bad.jsonl")],
            "bad.jsonl:2: missing field 'outcome.normalized_reward'",
        )
    else:
        args, expected = ["--from-games", f"A={good}", "--from-games", f"A,C={good}"], "unknown model label 'C'"
    result = CliRunner().invoke(main, ["eval", *args, "--out", str(tmp_path / "out")])
    assert result.exit_code != 0
    assert expected in result.output


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_eval_within_moments_and_resume_completes(tmp_path, sig):
    """As for `play`: the games written so far stay whole, the exit status is 128 + the signal,
    and --resume completes the games file."""
    out = tmp_path / "report"
    args = [sys.executable, "-m", "selfplay_gen.cli", "eval", "--backend", "scripted", "--instances", "heldout"]
    args += ["--limit-instances", "100", "-k", "8", "--out", str(out), "--bootstrap", "100", "-q"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and sum(p.stat().st_size for p in out.glob("games/*.jsonl")) < 200_000:
        time.sleep(0.05)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, stderr
    assert f"stopped by {sig.name}" in stderr and "Traceback" not in stderr
    (games,) = out.glob("games/*.jsonl")
    assert 0 < len(list(read_games(games))) < 800 and not (out / "metrics.json").exists()
    done = subprocess.run([*args, "--resume"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert len({r["game_id"] for r in read_games(games)}) == 800


def test_games_of_another_game_are_refused_clearly(tmp_path):
    games = tmp_path / "n.jsonl"
    result = CliRunner().invoke(
        main, ["--backend", "scripted", "--game", "negotiation", "-n", "2", "-k", "2", "--out", str(games), "-q"]
    )
    assert result.exit_code == 0, result.output
    out = CliRunner().invoke(main, ["eval", "--from-games", str(games), "--out", str(tmp_path / "report")])
    assert out.exit_code == 2 and "is a negotiation game; evaluate it with --game negotiation" in out.output
