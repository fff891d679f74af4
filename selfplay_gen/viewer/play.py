"""A person in one seat of a game, a model or a scripted player in the other.

The person is one more `Player` (`HumanSeat`): told what the game tells that seat, exactly as a
model in it would be (its system prompt from `reset`, then what each `step` tells it), and asked
for a turn, which the page supplies. The game is played by the runner's own `play_game`, with the
partner built as `play` and `eval` build seats (`options.open_seats`), so the record is the same
record, written by `GameWriter`, with the human seat's `kind` "human" and its settings' backend
"human". `selfplay-gen eval --from-games` then reads these files like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import games
from ..games import GameConfig
from ..games.base import ChatSeat, Game, Observation, StepResult
from ..options import Seating, limits_from, open_seats
from ..records import GameWriter, Record
from ..runner import GameSpec, play_game

PARTNERS = ("scripted", "model")
HUMAN = "human"


class HumanSeat(ChatSeat):
    """A seat whose turns come from a person: `act` waits until `submit` gives the text."""

    kind = HUMAN

    def __init__(self, seat: int, system: str):
        super().__init__(seat, system)
        self._turn: asyncio.Future[str] | None = None
        self.changed = asyncio.Event()  # set whenever the seat is told something or asked to move

    def observe(self, told: Sequence[str], step: StepResult[Any] | None) -> None:
        super().observe(told, step)
        self.changed.set()

    @property
    def asked(self) -> bool:
        """Whether the game waits for this seat's turn."""
        return self._turn is not None and not self._turn.done()

    async def respond(self) -> str:
        self._turn = asyncio.get_running_loop().create_future()
        self.changed.set()
        return await self._turn

    def submit(self, text: str) -> None:
        if not self.asked:
            raise RuntimeError("it is not your turn")
        assert self._turn is not None
        self._turn.set_result(text)


@dataclass
class Session:
    """One game a person plays: the game, both seats, and the task that drives it."""

    id: str
    game_name: str
    human_seat: int
    partner: str
    out: Path
    game: Game[Any, Any] | None = None
    human: HumanSeat | None = None
    task: asyncio.Task[None] | None = None
    record: Record | None = None
    error: str | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def state(self) -> dict[str, Any]:
        """What the page shows: this seat's chat so far (what a model in it would have been
        given), what it has been told since its last turn, whose turn it is, and the end."""
        human, game = self.human, self.game
        outcome = game.outcome.to_dict() if game is not None and game.outcome is not None else None
        return {
            "id": self.id,
            "game": self.game_name,
            "grammar": games.get(self.game_name).move_grammar,
            "seat": self.human_seat,
            "partner": self.partner,
            "messages": human.messages if human else [],
            "inbox": human.inbox if human else [],
            "your_turn": bool(human and human.asked) and self.record is None,
            "done": self.record is not None or self.error is not None,
            "outcome": outcome,
            "error": self.error,
            "out": self.out.name,
            "game_id": self.record["game_id"] if self.record else None,
        }

    async def wait(self, timeout: float) -> None:
        """Until the person is asked to move or the game ends (at most `timeout` seconds)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.human is not None and not (self.human.asked or self.ended.is_set()):
            self.human.changed.clear()  # checked just above, in this same step of the loop
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.human.changed.wait(), remaining)


class Arena:
    """Every game people play in one viewer: the partners it can seat (the model is opened on
    first use and kept), the writers of the played games' files, and the sessions."""

    def __init__(self, out_dir: Path, opts: dict[str, Any]):
        self.out_dir = out_dir
        self.opts = opts
        self.sessions: dict[str, Session] = {}
        self._writers: dict[Path, GameWriter] = {}
        self._stack = contextlib.AsyncExitStack()
        self._model: Seating | None = None
        self._model_lock = asyncio.Lock()
        self._counter = itertools.count()
        self._playing: set[str] = set()  # game ids of games in play, not yet in their file
        self._disk = ThreadPoolExecutor(1, thread_name_prefix="played-games")  # one writer, as the runner has

    async def close(self) -> None:
        for session in self.sessions.values():
            if session.task is not None:
                session.task.cancel()
        await self._stack.aclose()
        self._disk.shutdown(wait=True)
        for writer in self._writers.values():
            writer.close()

    def out_file(self, game: str, partner: str) -> Path:
        """One file per game and partner, so that `eval --from-games` reads one kind of game each."""
        return self.out_dir / f"{game}-human-vs-{partner}.jsonl"

    def _writer(self, path: Path) -> GameWriter:
        if path not in self._writers:
            self._writers[path] = GameWriter(path, resume=True)
        return self._writers[path]

    async def _seating(self, partner: str, game: str) -> Seating:
        """The partner's seats: scripted ones for this game, or the model of the command line."""
        if partner == "scripted":
            async with open_seats(**{**self.opts, "game": game, "backend": "scripted", "partner_backend": None}) as s:
                return s  # scripted seats hold nothing open
        async with self._model_lock:
            if self._model is not None:
                return self._model
            opened: Seating = await self._stack.enter_async_context(open_seats(**self.opts))
            self._model = opened
            return opened

    async def start(self, game: str, seat: int, partner: str, seed: int | None, options: dict[str, Any]) -> Session:
        """Start a game of `game` (its `options`, e.g. a reward mode) on the instance of `seed`
        (a fresh one when None) with the person in `seat`; returns once the game waits for its
        first turn (the partner may move first)."""
        if partner not in PARTNERS:
            raise ValueError(f"partner must be one of {', '.join(PARTNERS)}, got {partner!r}")
        if seat not in (0, 1):
            raise ValueError(f"seat must be 0 or 1, got {seat!r}")
        config = GameConfig(game, limits_from(self.opts), options)
        seating = await self._seating(partner, game)
        if seed is None:
            seed = secrets.randbelow(2**31)
        instance = games.get(game).instance_type.from_seed(seed)
        out = self.out_file(game, partner)
        writer = self._writer(out)
        taken = writer.done | self._playing  # two people may play one instance at once
        index = next(k for k in itertools.count() if f"{instance.id}/human-{k}" not in taken)
        spec = GameSpec(f"{instance.id}/human-{index}", 0, index, instance)
        self._playing.add(spec.game_id)
        session = Session(f"{next(self._counter)}-{secrets.token_hex(4)}", game, seat, partner, out)

        def human(spec_: GameSpec, s: int, game_: Game[Any, Any], start: Observation) -> HumanSeat:
            session.game = game_
            session.human = HumanSeat(s, start.system[s])
            return session.human

        seats = [human if s == seat else seating.seats[s] for s in (0, 1)]
        settings = {**seating.settings, "run": {"game": game, **options, "instances": "seed", "seed": seed}}
        settings[f"seat{seat}"] = {"backend": HUMAN, "model": None, "base_urls": []}

        async def go() -> None:
            try:
                record = await play_game(spec, seats, config, settings)
                await asyncio.get_running_loop().run_in_executor(self._disk, writer.write, record)
                session.record = record
            except Exception as err:  # a record that cannot be written: shown on the page, the viewer goes on
                session.error = f"{type(err).__name__}: {err}"
            finally:
                self._playing.discard(spec.game_id)
                session.ended.set()
                if session.human is not None:
                    session.human.changed.set()

        session.task = asyncio.ensure_future(go())
        self.sessions[session.id] = session
        while session.human is None and not session.ended.is_set():
            await asyncio.sleep(0)  # play_game seats its players before its first await: one step
        await session.wait(timeout=300)
        return session

    def get(self, session_id: str) -> Session:
        if session_id not in self.sessions:
            raise KeyError(f"no game {session_id!r} in play")
        return self.sessions[session_id]
