"""A defect in one game (any exception from a player) ends that game as a failed record; the other
games of the run finish and are written, and the summary counts the failure."""

import errno
import os
import threading

import numpy as np
import pytest

from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import INTERNAL
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.games.matching.scripted import ScriptedPlayer
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


def scripted(spec, s, game, start):
    """A seat factory of scripted players (share 0.5), seeded by game and seat."""
    return ScriptedPlayer(spec.instance, s, share=0.5, rng=np.random.default_rng([spec.game_index, s]))


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
        return Broken(spec.instance, s, where) if broken else scripted(spec, s, game, start)

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


async def test_records_are_written_off_the_event_loop(tmp_path):
    """A slow disk does not stall the games: while the first record's write waits, the loop
    starts and plays the next game; each record is still whole and on disk when counted."""
    next_game_started = threading.Event()

    class SlowDisk(GameWriter):
        waited: list[bool] = []

        def write(self, record):
            if not self.waited:
                self.waited.append(next_game_started.wait(timeout=10))
            super().write(record)

    def seat(spec, s, game, start):
        if spec.game_index == 1:
            next_game_started.set()
        return scripted(spec, s, game, start)

    path = tmp_path / "games.jsonl"
    with SlowDisk(path) as writer:
        summary = await run_games(
            plan_games([Instance.from_seed(1)], 2, 2), (seat, seat), GameConfig(), writer, 1, {}, progress=False
        )
    assert SlowDisk.waited == [True]  # the second game began while the first record was being written
    assert summary.games == len(list(read_games(path))) == 2


async def test_a_full_disk_keeps_whole_records_and_names_the_file(tmp_path, monkeypatch):
    """A write that fails half way (no space left) is cut off: the file holds whole records only,
    the error names the file, and no more games are written after it."""
    real, lines = os.write, []

    def full_after_three(fd, data):
        if bytes(data[:18]) == b'{"schema_version":':
            lines.append(fd)
            if len(lines) > 3:
                real(fd, data[: len(data) // 2])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", full_after_three)
    path = tmp_path / "games.jsonl"
    with GameWriter(path) as writer, pytest.raises(OSError) as full:
        specs = plan_games([Instance.from_seed(1)], 8, 8)
        await run_games(specs, (scripted, scripted), GameConfig(), writer, 8, {}, False)
    assert full.value.errno == errno.ENOSPC and full.value.filename == str(path)
    assert len(list(read_games(path))) == 3 and path.read_bytes().endswith(b"}\n")


async def test_a_halted_run_starts_no_more_games(tmp_path):
    """Once `halted` gives a reason (every server gone), no game starts; the summary says why."""
    path, started = tmp_path / "games.jsonl", set()

    def seat(spec, s, game, start):
        started.add(spec.game_id)
        return scripted(spec, s, game, start)

    with GameWriter(path) as writer:
        summary = await run_games(
            plan_games([Instance.from_seed(1)], 8, 8),
            (seat, seat),
            GameConfig(),
            writer,
            concurrency=1,
            settings={},
            progress=False,
            halted=lambda: "every server is gone" if len(started) >= 3 else None,
        )
    assert summary.games == len(list(read_games(path))) == 3
    assert summary.to_dict()["stopped"] == "every server is gone"
