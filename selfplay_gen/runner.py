"""Plays many games of any registered game concurrently and writes each record as soon as its
game ends.

Every game is its own asyncio task; a semaphore keeps `concurrency` games in flight so that a
server always has that many requests to batch. Games never share state, so a failing game is
recorded with its reason and the others go on: whatever a player or a backend raises ends that
game as a record (`failure.reason` backend_error, token_invariant, or internal for a defect).
Records are written by one thread, in the order games end, so the loop never waits on a disk.
"""

from __future__ import annotations

import asyncio
import math
import signal
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from tqdm.auto import tqdm

from . import records
from .backends.base import BackendError
from .games import GameConfig
from .games.base import BACKEND_ERROR, FAILURES, INTERNAL, Game, GameInstance, Observation, Player
from .players import GameStop
from .records import SCHEMA_VERSION, GameWriter, Record, Settings, read_games

T = TypeVar("T")


@dataclass(frozen=True)
class GameSpec:
    game_id: str
    group: int  # GRPO group: the games of one instance share it
    game_index: int  # k-th game of its instance
    instance: GameInstance  # of the run's game
    game: GameConfig | None = None  # the game this one plays, in a mix of games (None: the run's)


# (spec, seat, the game just reset, what it showed first) -> the player for that seat of that game
SeatFactory = Callable[[GameSpec, int, Game[Any, Any], Observation], Player]


def plan_games(
    instances: Sequence[GameInstance], games_per_instance: int, num_games: int, first_index: int = 0
) -> list[GameSpec]:
    """`num_games` games, `games_per_instance` per instance, in instance order; an instance's games are
    numbered from `first_index` (the games of one instance played by several runs keep distinct ids)."""
    specs = [
        GameSpec(f"{inst.id}/{k}", group, k, inst)
        for group, inst in enumerate(instances)
        for k in range(first_index, first_index + games_per_instance)
    ]
    return specs[:num_games]


def instances_needed(num_games: int, games_per_instance: int) -> int:
    return math.ceil(num_games / games_per_instance)


def recorded_settings(settings: dict, config: GameConfig) -> dict:
    """The settings each record of a run carries."""
    return {**settings, "limits": asdict(config.limits)}


class SettingsChanged(ValueError):
    """--resume with settings other than those the file's games were played with."""


def check_same_settings(path: object, old: Settings | dict, new: dict) -> None:
    """Refuse to add games played otherwise to a file, naming each setting and both values.
    Server URLs may change (a server restarted elsewhere serves the same model)."""

    def flat(settings: dict, prefix: str = "") -> dict:
        names: dict = {}
        for key, value in settings.items():
            if isinstance(value, dict):
                names |= flat(value, f"{prefix}{key}.")
            elif key != "base_urls":
                names[prefix + key] = value
        return names

    a, b = flat(dict(old)), flat(new)
    changed = [f"{k}={a.get(k)!r} (now {b.get(k)!r})" for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)]
    if changed:
        raise SettingsChanged(
            f"--resume: {path} was played with other settings: {'; '.join(changed)}; "
            "resume with the same settings, or choose another --out"
        )


async def play(game: Game[Any, Any], players: Sequence[Player], start: Observation) -> records.Failure | None:
    """Drive a reset game to its end with `players` (one per seat), telling each what the game
    says: the one game loop, for runs and for the online trainer alike. A limit a player hits
    (`GameStop`) and whatever a player or a backend raises end the game through `stop`; the
    result is the failure (reason, detail, seat) when the driver failed, None otherwise."""
    for seat, player in enumerate(players):
        player.observe(start.told[seat], None)
    failure: records.Failure | None = None
    while not game.done:
        mover = game.to_move
        await asyncio.sleep(0)  # a turn for the loop (signals, other games) even when players answer at once
        try:
            step = game.step(mover, await players[mover].act())
            for seat, player in enumerate(players):
                player.observe(step.told[seat], step)
        except GameStop as stop:
            reason, detail = stop.reason, stop.detail
        except BackendError as err:
            reason, detail = BACKEND_ERROR, str(err)
        except Exception as err:  # a defect (in a player, a backend, the game): this game fails, the run goes on
            reason, detail = INTERNAL, f"{type(err).__name__}: {err}"
        else:
            continue
        game.stop(reason, mover, detail)
        if reason in FAILURES:
            failure = {"reason": reason, "detail": detail, "player": mover}
    return failure


async def play_game(spec: GameSpec, seats: Sequence[SeatFactory], config: GameConfig, settings: dict) -> Record:
    """Play one game to its end and return its record: the one record type that the writer,
    `selfplay-convert` and the online trainer read."""
    started = time.perf_counter()
    game = (spec.game or config).new()
    start = game.reset(spec.instance)
    players = [seats[s](spec, s, game, start) for s in range(game.seats)]
    failure = await play(game, players, start)
    assert game.outcome is not None  # play runs until the game has ended
    logs = [p.log() for p in players]
    turns = [t for log in logs for t in log.get("turns", [])]
    record: Record = {
        "schema_version": SCHEMA_VERSION,
        "game": game.name,
        "game_version": game.version,
        "game_id": spec.game_id,
        "group": spec.group,
        "game_index": spec.game_index,
        "instance_id": spec.instance.id,
        "instance": spec.instance.to_dict(),
        "settings": cast(Settings, recorded_settings(settings, config)),
        "players": cast(list[records.Seat], logs),
        "events": cast(list[records.Event], game.events()),
        "outcome": cast(records.Outcome, game.outcome.to_dict()),
        "failure": failure,
        "stats": {
            "valid_moves": game.valid_moves,
            "invalid_moves": game.invalid_moves,
            "output_tokens": sum(len(t["output_ids"]) for t in turns),
            "prompt_tokens": sum(t["prompt_len"] for t in turns),
            "cached_tokens": sum(t["cached_tokens"] for t in turns),
            "wall_time_s": round(time.perf_counter() - started, 4),
        },
    }
    return record


@dataclass
class Summary:
    games: int = 0
    agreed: int = 0
    reward_sums: list[float] = field(default_factory=lambda: [0.0, 0.0])  # per seat
    output_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    wall_time_s: float = 0.0
    terminations: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)  # failed games by failure reason
    stopped: str | None = None  # why the run started no more games (every server gone)

    def add(self, record: Mapping[str, Any]) -> None:
        self.games += 1
        if record["failure"]:
            self.failures[record["failure"]["reason"]] += 1
        self.agreed += record["outcome"]["agreed"]
        for seat, reward in enumerate(record["outcome"]["rewards"]):
            self.reward_sums[seat] += reward
        self.terminations[record["outcome"]["termination"]] += 1
        for key in ("output_tokens", "prompt_tokens", "cached_tokens"):
            setattr(self, key, getattr(self, key) + record["stats"][key])

    @classmethod
    def of_file(cls, path: Path) -> Summary:
        """The summary of every game in a records file, those of earlier (resumed) runs included;
        no wall time, so no rates."""
        summary = cls()
        for record in read_games(path):
            summary.add(record)
        return summary

    def to_dict(self) -> dict:
        games = max(self.games, 1)
        return {
            "games": self.games,
            "agreement_rate": self.agreed / games,
            "mean_rewards": [total / games for total in self.reward_sums],  # per seat
            "mean_reward": sum(self.reward_sums) / len(self.reward_sums) / games,
            "terminations": dict(self.terminations),
            "failures": dict(self.failures),
            "output_tokens": self.output_tokens,
            "output_tokens_per_s": self.output_tokens / self.wall_time_s if self.wall_time_s else 0.0,
            "games_per_s": self.games / self.wall_time_s if self.wall_time_s else 0.0,
            "cache_hit_rate": self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0,
            "wall_time_s": round(self.wall_time_s, 3),
            **({"stopped": self.stopped} if self.stopped else {}),
        }


async def run_games(
    specs: Sequence[GameSpec],
    seats: Sequence[SeatFactory],
    config: GameConfig,
    writer: GameWriter,
    concurrency: int,
    settings: dict,
    progress: bool = True,
    summary: Summary | None = None,
    halted: Callable[[], str | None] = lambda: None,
) -> Summary:
    """Play every spec not already in `writer`, `concurrency` at a time, writing each record.
    A file being resumed must hold games played with the same settings (`SettingsChanged`).
    `summary` (a new one if not given) counts each game once its record is on disk, so a caller
    whose run is cancelled still has the count of what was written. Once `halted()` says why
    (every server gone), no more games start and `summary.stopped` says it."""
    if writer.settings is not None:
        check_same_settings(writer.path, writer.settings, recorded_settings(settings, config))
    todo = [s for s in specs if s.game_id not in writer.done]
    summary = summary if summary is not None else Summary()
    gate = asyncio.Semaphore(max(1, concurrency))
    bar = tqdm(total=len(specs), initial=len(specs) - len(todo), desc="games", unit="game", disable=not progress)
    started = time.perf_counter()
    disk = ThreadPoolExecutor(1, thread_name_prefix="game-writer")  # one thread: records in the order games end

    def save(record: Record) -> None:
        writer.write(record)
        summary.add(record)
        summary.wall_time_s = time.perf_counter() - started
        stats = summary.to_dict()
        bar.set_postfix(
            agree=f"{stats['agreement_rate']:.2f}",
            reward=f"{stats['mean_reward']:.3f}",
            tok_s=f"{stats['output_tokens_per_s']:.0f}",
            refresh=False,
        )
        bar.update()

    async def one(spec: GameSpec) -> None:
        async with gate:
            summary.stopped = summary.stopped or halted()
            if summary.stopped:
                return
            record = await play_game(spec, seats, config, settings)
        await asyncio.get_running_loop().run_in_executor(disk, save, record)

    tasks: list[asyncio.Future] = []
    try:
        for spec in todo:
            tasks.append(asyncio.ensure_future(one(spec)))
            # a turn of the loop per game started: the games already set up send their first requests
            # while the others build their prompts, instead of the server waiting until all have
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:  # after a failed write (a full disk) the others would fail alike
            task.cancel()
        disk.shutdown(wait=True, cancel_futures=True)  # a record being written is finished
        bar.close()
        summary.wall_time_s = time.perf_counter() - started
    return summary


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def until_signalled(work: Awaitable[T]) -> tuple[T | None, signal.Signals | None]:
    """Await `work`; SIGINT or SIGTERM cancels it within moments (games in flight end unrecorded,
    backends close, every finished game is already in its file). (result, None), or (None, the signal).
    Signals reach only the main thread: elsewhere (a CLI invoked from a worker thread) `work` just runs."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    caught: list[signal.Signals] = []

    def stop(sig: signal.Signals) -> None:
        caught.append(sig)
        task.cancel()

    handled = threading.current_thread() is threading.main_thread()
    for sig in STOP_SIGNALS if handled else ():
        loop.add_signal_handler(sig, stop, sig)
    try:
        return await task, None
    except asyncio.CancelledError:
        if not caught:
            raise
        return None, caught[0]
    finally:
        for sig in STOP_SIGNALS if handled else ():
            loop.remove_signal_handler(sig)
