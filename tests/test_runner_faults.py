"""A defect in one game (any exception from a player) ends that game as a failed record; the other
games of the run finish and are written, and the summary counts the failure."""

import numpy as np
import pytest

from selfplay_gen.game import INTERNAL
from selfplay_gen.games import GameConfig
from selfplay_gen.instance import Instance
from selfplay_gen.players import ScriptedPlayer
from selfplay_gen.records import GameWriter, read_games
from selfplay_gen.runner import plan_games, run_games


class Broken(ScriptedPlayer):
    """A scripted player with a defect: it raises where `where` says."""

    def __init__(self, instance, seat, where):
        super().__init__(instance, seat, share=0.5, rng=np.random.default_rng(seat))
        self.where = where

    async def respond(self):
        if self.where == "act":
            raise ValueError("a player's bug")
        return await super().respond()

    def partner_moved(self, move):
        if self.where == "partner_moved":
            raise KeyError("a bug in bookkeeping")
        super().partner_moved(move)


@pytest.mark.parametrize(
    "where, error, mover",
    [
        ("act", "ValueError: a player's bug", 1),  # seat 1 raises on its own turn
        ("partner_moved", "KeyError: 'a bug in bookkeeping'", 0),
    ],
)  # seat 1 raises on seat 0's move
async def test_one_broken_game_fails_alone(tmp_path, where, error, mover):
    def seat(spec, s, game, start):
        broken = spec.game_id == "seed-1/1" and s == 1
        return (
            Broken(spec.instance, s, where)
            if broken
            else ScriptedPlayer(spec.instance, s, share=0.5, rng=np.random.default_rng([spec.game_index, s]))
        )

    path = tmp_path / "games.jsonl"
    with GameWriter(path) as writer:
        summary = await run_games(
            plan_games([Instance.from_seed(1), Instance.from_seed(2)], 4, 8),
            (seat, seat),
            GameConfig(),
            writer,
            concurrency=8,
            settings={},
            progress=False,
        )
    records = {r["game_id"]: r for r in read_games(path)}
    assert summary.games == len(records) == 8
    failed = records.pop("seed-1/1")
    assert failed["failure"] == {"reason": INTERNAL, "detail": error, "player": mover}
    assert failed["outcome"]["termination"] == INTERNAL and failed["outcome"]["normalized_reward"] == 0
    assert failed["events"][-1]["kind"] == "stop" and failed["events"][-1]["error"] == error
    assert all(r["failure"] is None and r["outcome"]["agreed"] for r in records.values())
    assert summary.to_dict()["failures"] == {INTERNAL: 1}
