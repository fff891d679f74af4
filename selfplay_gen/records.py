"""Game records: one JSON object per finished game, one game per line, appended and fsynced as
each game ends, so a killed run loses at most the games in flight and `--resume` completes it.

The record's schema lives here: the TypedDicts below say what a record holds, to mypy and to
`read_games` alike, which checks every line against them, values included (rewards finite and in
range, token ids int32 and non-negative, logprobs finite and <= 0). So no reader gets a NaN
reward, a negative token id or a missing field, and each rejection names the file, line, field
and value. A record names its `game`; the parts each game fills in its own way (its instance, the
details of its outcome, its events) are that game's `record` TypedDict, checked too. Records
written before games had names are of the registry's first game (`games.UNNAMED`), and each
game brings records of its earlier versions up to date (`Game.upgrade_record`).
"""

from __future__ import annotations

import json
import os
import sys
from array import array
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Literal, TypedDict, cast

import orjson

from . import games
from .atomic import temporary
from .games.base import end_of
from .locking import Lock
from .validate import Invalid, Whole, as_list, check, each, lengths, missing, no_booleans, within

UNNAMED_GAME = games.UNNAMED  # the game of records written before games had names

SCHEMA_VERSION = 2  # 2: an outcome's `terminated` and `truncated` are Gymnasium's ends (`games.base.end_of`)
READ_VERSIONS = (1, 2)
INT32_MAX = 2**31 - 1  # token ids are int32 in the parquet
_TOP_BYTES = slice(3, None, 4) if sys.byteorder == "little" else slice(0, None, 4)  # of array("I")'s 4-byte items


class RecordError(ValueError):
    """A line of a games file that is not a valid record; says file, line, field and value."""


def _schema_version(value: int) -> None:
    if value not in READ_VERSIONS:
        raise Invalid(value, f"is not {' or '.join(map(str, READ_VERSIONS))}, the schema versions this reads")


def _token_id(value: object) -> None:
    if type(value) is not int or not 0 <= value <= INT32_MAX:
        raise Invalid(value, "is not a token id")


def _token_ids(value: object) -> None:
    """Ids are most of a record, so they are checked in bulk: array() converts them in C to
    unsigned 32-bit, which refuses anything but an integer in [0, 2**32), and then the top byte
    of each must be below 0x80 (an int32, as the parquet holds them), and none a boolean. Only a list that fails is
    looked at id by id, to name the first bad one."""
    ids = as_list(value)
    try:
        fits = array("I", ids).tobytes()[_TOP_BYTES].isascii() and no_booleans(ids)
    except (TypeError, OverflowError):
        fits = False
    if not fits:
        each(ids, _token_id)


def _logprob(value: float) -> None:
    if value > 0:
        raise Invalid(value, "is not a log-probability (<= 0)")


def _logprobs(values: list[float]) -> None:
    if values and max(values) > 0:
        each(values, _logprob)


def terminations(allowed: tuple[str, ...]):
    """A rule: one of a game's terminations."""

    def rule(value: str) -> None:
        if value not in allowed:
            raise Invalid(value, f"is not a termination ({', '.join(allowed)})")

    return rule


Count = Annotated[int, within(0)]
TokenIds = Annotated[list[int], Whole(_token_ids)]
Grid = list[list[int]]


class Message(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str


class _Turn(TypedDict):
    prompt_len: Count
    output_ids: TokenIds


class Turn(_Turn, total=False):
    logprobs: Annotated[list[float], _logprobs] | None  # one per output id; None if the backend sent none
    finish_reason: str
    cached_tokens: Count
    retokenized: bool


class _Seat(TypedDict):
    kind: str  # "llm" (sampled ids), "scripted", ...
    messages: list[Message]  # the chat from this seat's view


class Seat(_Seat, total=False):
    token_ids: TokenIds  # the whole final context
    turns: list[Turn]
    invariant_ok: bool


def _sampled_seat(seat: Seat) -> None:
    """A seat that sampled tokens carries them with its chat."""
    if seat["kind"] == "llm":
        for name in ("token_ids", "turns", "invariant_ok"):
            if name not in seat:
                raise missing(name)


class Event(TypedDict):
    player: Annotated[int, within(0, 1)]
    kind: str  # a move's kind, "invalid" or "stop"
    text: str
    error: str | None


class Sampling(TypedDict, total=False):
    temperature: Annotated[float, within(0)]
    top_p: Annotated[float, within(0, 1, open_low=True)]
    max_new_tokens: Annotated[int, within(1)]


class Settings(TypedDict, total=False):
    """Also the limits, which no reader relies on."""

    sampling: Sampling
    run: dict[str, object]  # what planned the games: --resume must be given the same
    # each seat's backend and model: `selfplay-convert --seats-of` trains the seats one model played
    seat0: dict[str, Any]
    seat1: dict[str, Any]


class _Outcome(TypedDict):
    agreed: bool
    termination: str


class Outcome(_Outcome, total=False):
    """`games.base.Outcome.to_dict()`: the game's own details beside these."""

    rewards: Annotated[list[float], lengths(2)]  # per seat, what training compares; always there once read
    terminated: bool  # the rules ended the game; always there once read
    truncated: bool  # a limit ended it (neither: the driver failed, see `failure`); always there once read


class _Failure(TypedDict):
    reason: str  # backend_error, token_invariant, internal, ...


class Failure(_Failure, total=False):
    detail: str
    player: int | None


class _Stats(TypedDict):
    valid_moves: Count
    invalid_moves: Count


class Stats(_Stats, total=False):
    output_tokens: Count
    prompt_tokens: Count
    cached_tokens: Count
    wall_time_s: Annotated[float, within(0)]


class _Record(TypedDict):
    schema_version: Annotated[int, _schema_version]  # first: an old file is named as such
    game_id: str
    group: Count  # the instance's GRPO group index
    instance_id: str
    instance: dict[str, Any]  # the game's `Instance.to_dict()`
    settings: Settings
    players: Annotated[list[Annotated[Seat, _sampled_seat]], lengths(2)]
    events: list[Event]
    outcome: Outcome
    stats: Stats


class Record(_Record, total=False):
    """One game, as the runner writes it and every reader gets it."""

    game: str  # its registered name; always there once read
    game_version: Annotated[int, within(1)]  # `Game.version` of its rules and record parts (1 when absent)
    game_index: Count
    failure: Failure | None  # None for a game that ended by the rules or a limit


def _loads(raw: bytes, where: str) -> object:
    """orjson is several times faster on id-heavy lines; the standard parser takes the lines it
    refuses but json.dumps writes (NaN and Infinity), which the schema then names."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RecordError(f"{where}: not UTF-8 text (byte 0x{raw[err.start]:02x} at column {err.start + 1})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise RecordError(f"{where}: not valid JSON ({err.msg} at column {err.colno})") from None
    except (ValueError, RecursionError) as err:  # e.g. an integer of more than 4300 digits
        raise RecordError(f"{where}: not valid JSON ({err})") from None


@cache
def _game_parts(name: str) -> Any:
    """The TypedDict of the game's own record parts; `Invalid` for a name no game has."""
    try:
        return games.get(name).record
    except ValueError:
        raise Invalid(name, f"is not a registered game ({', '.join(games.names())})").at(".game") from None


def parse(raw: bytes, where: str) -> Record:
    """One line as a record, or a `RecordError` that says where and what is wrong."""
    record = _loads(raw, where)
    try:
        check(record, Record)
        named = cast(Record, record)
        check(named, _game_parts(named.setdefault("game", UNNAMED_GAME)))
    except Invalid as err:
        raise RecordError(f"{where}: {err}") from None
    games.get(named["game"]).upgrade_record(cast(dict, named))
    if named["schema_version"] < SCHEMA_VERSION or "terminated" not in named["outcome"]:
        # schema 1: `truncated` meant "stopped by the driver", failures included
        end = end_of(named["outcome"]["termination"])
        named["outcome"]["terminated"], named["outcome"]["truncated"] = end == "terminated", end == "truncated"
    return named


def read_games(path: str | Path, skip_invalid: bool = False, errors: list[str] | None = None) -> Iterator[Record]:
    """Stream the records of a games file. Bad lines raise `RecordError` naming file, line,
    field and value, or with `skip_invalid` are described in `errors` and skipped."""
    return (record for _, record in read_numbered_games(path, skip_invalid, errors))


def read_numbered_games(
    path: str | Path, skip_invalid: bool = False, errors: list[str] | None = None
) -> Iterator[tuple[int, Record]]:
    """`read_games` with each record's line number, for messages that point at a line."""
    path = Path(path)
    with path.open("rb", buffering=1 << 20) as fh:  # a game is tens of kB: read it in one piece
        for number, raw in enumerate(fh, 1):
            if raw.isspace():
                continue
            try:
                yield number, parse(raw, f"{path}:{number}")
            except RecordError as err:
                if not skip_invalid:
                    raise
                if errors is not None:
                    errors.append(str(err))


def repair_tail(path: Path) -> int:
    """Cut a torn last line (a write interrupted by a crash) and return how many bytes went."""
    with path.open("rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        start = _last_line_start(fh, size)
        fh.seek(start)
        last = fh.read()
        if last.endswith(b"\n") and _decodes(last):
            return 0
        fh.truncate(start)
        os.fsync(fh.fileno())
    return size - start


def _last_line_start(fh: BinaryIO, size: int, chunk: int = 1 << 20) -> int:
    """Where the last line begins, looking backwards a chunk at a time however long it is (a
    final newline ends that line rather than starting another)."""
    end = max(0, size - 1)
    while end:
        begin = max(0, end - chunk)
        fh.seek(begin)
        found = fh.read(end - begin).rfind(b"\n")
        if found >= 0:
            return begin + found + 1
        end = begin
    return 0


def _decodes(line: bytes) -> bool:
    try:
        _loads(line, "")
    except RecordError:
        return False
    return True


class GameWriter:
    """Appends records durably, and alone: a lock beside the file (`.NAME.lock`) is held from
    opening to closing, so a second run on the same file fails at once instead of interleaving
    its games. With `resume`, knows the games the file holds (`done`, of which `failed`) and the
    settings they were played with; `drop_failed` takes the failed ones out so that they are
    played again, keeping one record per game for every reader."""

    def __init__(self, path: str | Path, resume: bool = False):
        self.path = Path(path)
        if self.path.exists() and not self.path.is_file():
            raise OSError(f"{self.path} is not a regular file; the games go to a file (--out)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = Lock(self.path.with_name(f".{self.path.name}.lock"), str(self.path))
        try:
            self._read(resume)
            self._fd = self._append()
        except BaseException:
            self._lock.close()
            raise

    def _read(self, resume: bool) -> None:
        self.done: set[str] = set()
        self.failed: set[str] = set()
        self.settings: Settings | None = None  # of the file's first record
        self.repaired_bytes = 0
        if self.path.exists() and self.path.stat().st_size:
            if not resume:
                raise FileExistsError(
                    f"{self.path} already holds games; pass --resume to complete it or choose another --out"
                )
            self.repaired_bytes = repair_tail(self.path)
            for record in read_games(self.path):
                self.settings = self.settings or record["settings"]
                self.done.add(record["game_id"])
                if record.get("failure"):
                    self.failed.add(record["game_id"])

    def _append(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def drop_failed(self) -> int:
        """Take the failed games' records out of the file (replaced whole, never half rewritten),
        so that this run plays those games again; how many went."""
        if not self.failed:
            return 0
        tmp = temporary(self.path)
        try:
            with self.path.open("rb") as source, tmp.open("wb") as kept:
                for raw in source:  # every line was checked when the file was read
                    if raw.isspace() or not cast(dict, _loads(raw, str(self.path))).get("failure"):
                        kept.write(raw)
                kept.flush()
                os.fsync(kept.fileno())
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)
        os.close(self._fd)  # it writes to the replaced file
        self._fd = self._append()
        dropped, self.done, self.failed = len(self.failed), self.done - self.failed, set()
        return dropped

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record and fsync it. A write that fails (a full disk) is cut off again, so
        the file keeps whole records only, and the error names the file."""
        line = memoryview((json.dumps(record, separators=(",", ":")) + "\n").encode())
        end = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            while line:
                line = line[os.write(self._fd, line) :]
            os.fsync(self._fd)
        except OSError as err:
            os.ftruncate(self._fd, end)
            raise OSError(err.errno, err.strerror, str(self.path)) from None
        self.done.add(record["game_id"])

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._lock.close()

    def __enter__(self) -> GameWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
