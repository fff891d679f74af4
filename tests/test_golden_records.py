"""The runner plays every game through the games protocol; for the matching game its records are
those it wrote when it drove `MatchingGame` itself (tests/data/golden_matching.jsonl, written by
that runner with the same players and seeds), apart from what the protocol adds: the `game`
and `game_version` fields, the per-seat `rewards`, `own_plan_shares` and Gymnasium's ends
(`terminated`, `truncated`) of the outcome, and the schema version those ends came with. Old records
read as matching games with those rewards, shares and ends."""

from __future__ import annotations

import asyncio
import json
import zlib
from pathlib import Path

import pytest
from golden_backends import ScriptBackend
from test_convert import ProposerBackend

from selfplay_gen.backends.base import SamplingParams
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import TRUNCATIONS, Limits
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.games.matching.record import ACCEPTED
from selfplay_gen.options import load_instances
from selfplay_gen.players import LLMPlayer
from selfplay_gen.records import SCHEMA_VERSION, parse, read_games
from selfplay_gen.runner import plan_games, play_game

GOLDEN = Path(__file__).parent / "data" / "golden_matching.jsonl"


def scripted(seed: int, **knobs):
    """The scripted seats of `selfplay-gen --backend scripted --seed SEED`."""
    return lambda spec, s, game, start: game.scripted_player(
        s, seed=(seed, zlib.crc32(spec.game_id.encode()), s), **knobs
    )


def llm(backend, tokenizer, **kwargs):
    return lambda spec, s, game, start: LLMPlayer(
        s, start.system[s], backend, tokenizer, SamplingParams(), f"{spec.game_id}#{s}", **kwargs
    )


def replay(tokenizer) -> list[dict]:
    """The golden file's games, played again in its order with its players, seeds and limits."""
    cases = [
        ("share", scripted(3, policy="share", share=0.5), load_instances("random", 2, 3), Limits(), 2),
        # the plan the golden file was written with
        ("teacher", scripted(0, policy="teacher", plan="by-reviewer"), load_instances("human", 2, 0), Limits(), 2),
        ("share-human", scripted(0, policy="share", share=0.3), load_instances("human", 1, 0), Limits(max_moves=6), 2),
        (
            "llm",
            llm(ProposerBackend(tokenizer), tokenizer, response_length=2000),
            [Instance.from_seed(5)],
            Limits(max_moves=4),
            2,
        ),
        ("script", llm(ScriptBackend(tokenizer), tokenizer), [Instance.from_seed(9)], Limits(), 1),
    ]
    records = []
    for name, seat, instances, limits, k in cases:
        for spec in plan_games(instances, k, k * len(instances)):
            record = asyncio.run(play_game(spec, (seat, seat), GameConfig(limits=limits), {"case": name}))
            record = json.loads(json.dumps(record))  # as GameWriter writes it
            del record["stats"]["wall_time_s"]
            records.append(record)
    return records


@pytest.fixture(scope="module")
def golden() -> list[dict]:
    return [json.loads(line) for line in GOLDEN.read_text().splitlines()]


def test_matching_records_are_unchanged(golden, tokenizer):
    played = replay(tokenizer)
    assert [r["settings"]["case"] for r in played] == [r["settings"]["case"] for r in golden]
    for new, old in zip(played, golden):
        assert new.pop("game") == "matching" and new.pop("game_version") == 1
        assert (new.pop("schema_version"), old.pop("schema_version")) == (SCHEMA_VERSION, 1)
        outcome, termination = new["outcome"], old["outcome"]["termination"]
        assert outcome.pop("rewards") == [old["outcome"]["normalized_reward"]] * 2
        instance = Instance.from_dict(old["instance"])
        assert outcome.pop("own_plan_shares") == instance.own_plan_shares(old["outcome"]["proposal"])
        assert outcome.pop("terminated") == (termination == ACCEPTED)
        assert outcome.pop("truncated") == (termination in TRUNCATIONS)
        assert new == old, new["game_id"]


def test_old_records_read_as_matching_games_with_per_seat_rewards_and_shares(golden):
    for record in read_games(GOLDEN):
        assert record["game"] == "matching"
        assert record["outcome"]["rewards"] == [record["outcome"]["normalized_reward"]] * 2
        shares = Instance.from_dict(record["instance"]).own_plan_shares(record["outcome"]["proposal"])
        assert record["outcome"]["own_plan_shares"] == shares and (shares[0] > 0) == record["outcome"]["agreed"]
        termination = record["outcome"]["termination"]
        assert record["outcome"]["terminated"] == (termination == ACCEPTED)
        assert record["outcome"]["truncated"] == (termination in TRUNCATIONS)  # schema 1 said: stopped by the driver


def test_schema_1_ends_read_as_gymnasium_ends():
    """Schema 1 wrote `truncated` for every end the driver reported, failures included; read, a
    failed game is neither terminated nor truncated, and a limit of the rules is truncated."""
    old = json.loads(GOLDEN.read_text().splitlines()[-1])
    assert old["schema_version"] == 1
    for termination, said, ends in [
        ("backend_error", True, (False, False)),
        ("max_new_tokens", True, (False, True)),
        ("max_moves", False, (False, True)),
        ("accepted", False, (True, False)),
    ]:
        line = {**old, "outcome": {**old["outcome"], "termination": termination, "truncated": said}}
        line["outcome"].pop("rewards", None)
        read = parse(json.dumps(line).encode(), "old:1")
        assert (read["outcome"]["terminated"], read["outcome"]["truncated"]) == ends, termination
