"""Random legal play (`--scripted-policy random`, `Game.random_player`): the games a format warm start
imitates. Every move is valid and every kind of move appears, so a model learns the grammar; the
choices are random, so the matching game's accepted plans score the random-matching floor and there is
no strategy to learn from them."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main
from selfplay_gen.games.matching.grounding import grounding
from selfplay_gen.games.matching.metrics import random_matching_reward
from selfplay_gen.records import read_games


def play_random(tmp_path, game: str, games: int, seed: int = 7) -> list[dict]:
    out = tmp_path / f"{game}-{seed}.jsonl"
    args = ["--game", game, "--backend", "scripted", "--scripted-policy", "random", "-n", str(games), "-k", "1"]
    result = CliRunner().invoke(main, [*args, "--seed", str(seed), "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    return list(read_games(out))


def move_kinds(records: list[dict]) -> Counter:
    return Counter(event["kind"] for record in records for event in record["events"])


def test_random_matching_play_is_valid_varied_and_scores_the_random_floor(tmp_path):
    records = play_random(tmp_path, "matching", 200)
    kinds = move_kinds(records)
    assert kinds["invalid"] == 0 and all(r["stats"]["invalid_moves"] == 0 for r in records)
    assert {"message", "propose", "accept", "reject"} <= set(kinds)
    assert all(r["players"][s]["policy"] == "random" for r in records for s in (0, 1))
    accepted = [r for r in records if r["outcome"]["agreed"]]
    assert len(accepted) > 0.8 * len(records)  # an even-odds accept ends most games well within 30 moves
    rewards = np.array([r["outcome"]["normalized_reward"] for r in accepted])
    floors = np.array([random_matching_reward(r["instance"]["table"], r["outcome"]["best_reward"]) for r in accepted])
    # a uniformly random assignment's expected reward is the floor: the mean difference is noise (sd about 0.1
    # a game, so about 0.007 over some 190 games), and far from the +0.2 of the no-talk own-view plan
    assert abs(rewards.mean() - floors.mean()) < 0.03
    # its messages state cells of its own table exactly as the table shows them
    stated, grounded = np.array([grounding(r) for r in records]).sum(axis=0)
    assert stated > 0 and grounded == stated


def test_random_negotiation_play_is_valid_and_makes_some_deals(tmp_path):
    records = play_random(tmp_path, "negotiation", 120)
    kinds = move_kinds(records)
    assert kinds["invalid"] == 0 and {"message", "propose"} <= set(kinds)
    agreed = sum(r["outcome"]["agreed"] for r in records) / len(records)
    assert 0.1 < agreed < 0.9  # a reply keeps the offer on the table at even odds: deals, and failed ones


@pytest.mark.parametrize("game", ["matching", "negotiation"])
def test_random_play_is_reproducible_and_differs_by_seed(tmp_path, game):
    first, again, other = (play_random(tmp_path / str(i), game, 6, seed) for i, seed in enumerate((3, 3, 4)))

    def texts(records):
        return json.dumps([[e["text"] for e in r["events"]] for r in records])

    assert texts(first) == texts(again) and texts(first) != texts(other)
