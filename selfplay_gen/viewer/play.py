"""A person in one seat of a game, a model or a scripted player in the other.

The person is one more `Player` (`HumanSeat`): told what the game tells that seat, exactly as a
model in it would be (its system prompt from `reset`, then what each `step` tells it), and asked
for a turn, which the page supplies. The game is played by the runner's own `play_game`, with the
partner built as `play` and `eval` build seats (`options.open_seats`), so the record is the same
record, written by `GameWriter`, with the human seat's `kind` "human" and its settings' backend
"human". `selfplay-gen eval --from-games` then reads these files like any other.

A viewer may be left running, so what people start is bounded (`PlayLimits`): a game nobody has
asked about for `idle_s` expires (its task is cancelled and nothing is recorded), a finished game
is forgotten after the same time (its record is in its file), at most `max_games` games are in
progress at once (`TooManyGames` past it), and a move is at most `max_move_chars` characters.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import games
from ..games import GameConfig
from ..games.base import ChatSeat, Game, Observation, StepResult
from ..options import Seating, limits_from, open_seats
from ..records import GameWriter, Record
from ..runner import GameSpec, play_game
from .replay import invalid_seat

PARTNERS = ("scripted", "model")
HUMAN = "human"


@dataclass(frozen=True)
class PlayLimits:
    """What the games people play in one viewer may take."""

    idle_s: float = 30 * 60.0  # a game nobody asked about for this long expires (finished: is forgotten)
    max_games: int = 16  # games in progress at once
    max_move_chars: int = 2000  # characters of one move

    def __post_init__(self) -> None:
        if self.idle_s <= 0 or self.max_games < 1 or self.max_move_chars < 1:
            raise ValueError(f"play limits must be positive, got {self}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class TooManyGames(RuntimeError):
    """As many games are in progress as the viewer plays at once."""


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
    seen: float = 0.0  # when a request last asked about it (the Arena's clock)

    @property
    def done(self) -> bool:
        return self.record is not None or self.error is not None

    def invalid_by_seat(self) -> list[int]:
        """Invalid moves each seat made so far."""
        events = self.game.events() if self.game is not None else []
        return [sum(e["kind"] == "invalid" and e["player"] == s for e in events) for s in (0, 1)]

    def state(self) -> dict[str, Any]:
        """What the page shows: this seat's chat so far (what a model in it would have been
        given), what it has been told since its last turn, whose turn it is, and the end."""
        human, game = self.human, self.game
        outcome = game.outcome.to_dict() if game is not None and game.outcome is not None else None
        your_turn = bool(human and human.asked) and self.record is None
        invalid_left = game.limits.max_invalid - game.invalid_streak if game is not None and your_turn else None
        private = games.get(self.game_name).seat_view(game.instance, self.human_seat) if game is not None else None
        return {
            "id": self.id,
            "game": self.game_name,
            "grammar": games.get(self.game_name).move_grammar,
            "seat": self.human_seat,
            "partner": self.partner,
            "messages": human.messages if human else [],
            "inbox": human.inbox if human else [],
            "your_turn": your_turn,
            "invalid_left": invalid_left,  # invalid moves in a row this seat may still make
            "private": private,  # this seat's private information, as the page draws it
            "done": self.done,
            "outcome": outcome,
            "invalid_by_seat": self.invalid_by_seat(),
            "invalid_seat": invalid_seat(outcome, game.events()) if game is not None and outcome else None,
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

    def __init__(
        self,
        out_dir: Path,
        opts: dict[str, Any],
        limits: PlayLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.out_dir = out_dir
        self.opts = opts
        self.limits = limits or PlayLimits()
        self.clock = clock
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

    @property
    def in_progress(self) -> int:
        return sum(not s.ended.is_set() for s in self.sessions.values())

    def sweep(self) -> None:
        """Expire the games nobody has asked about for `limits.idle_s` (cancelled, not recorded)
        and forget the finished ones as old, or the oldest of them past as many as `max_games`
        (their records are in their files)."""
        oldest = self.clock() - self.limits.idle_s
        for session in [s for s in self.sessions.values() if s.seen < oldest]:
            if session.task is not None and not session.task.done():
                session.task.cancel()
            del self.sessions[session.id]
        finished = sorted((s for s in self.sessions.values() if s.ended.is_set()), key=lambda s: s.seen)
        for session in finished[: len(finished) - self.limits.max_games]:
            del self.sessions[session.id]

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
        self.sweep()
        if self.in_progress >= self.limits.max_games:
            raise TooManyGames(
                f"{self.in_progress} games are in progress, the most this viewer plays at once: finish one, "
                f"or wait until one left alone for {self.limits.idle_s / 60:g} minutes expires"
            )
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
        session = Session(f"{next(self._counter)}-{secrets.token_hex(4)}", game, seat, partner, out, seen=self.clock())

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
        """The game `session_id`, seen now (so it does not expire while someone plays it)."""
        self.sweep()
        if session_id not in self.sessions:
            raise KeyError(
                f"no game {session_id!r} in play (a game left alone for {self.limits.idle_s / 60:g} minutes expires)"
            )
        session = self.sessions[session_id]
        session.seen = self.clock()
        return session
