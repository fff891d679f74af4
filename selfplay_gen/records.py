"""Game records: one JSON object per finished game, one game per line, appended and fsynced as
each game ends, so a killed run loses at most the games in flight and `--resume` completes it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import orjson

SCHEMA_VERSION = 1
REQUIRED = (
    "schema_version",
    "game_id",
    "group",
    "instance_id",
    "instance",
    "settings",
    "players",
    "events",
    "outcome",
    "stats",
)
OUTCOME_FIELDS = ("agreed", "termination", "raw_reward", "best_reward", "normalized_reward")
# A seat that sampled tokens carries them with its chat; each turn says where its ids sit.
LLM_SEAT_FIELDS = ("token_ids", "turns", "invariant_ok")
TURN_FIELDS = ("prompt_len", "output_ids")


class RecordError(ValueError):
    """A line of a games file that is not a valid record; says file, line and field."""


def check(record: object, where: str) -> dict:
    """Validate the parts of a record that every consumer relies on."""
    if not isinstance(record, dict):
        raise RecordError(f"{where}: expected a JSON object, got {type(record).__name__}")
    version = record.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RecordError(f"{where}: field 'schema_version' is {version!r}; this version reads {SCHEMA_VERSION}")
    for name in REQUIRED:
        if name not in record:
            raise RecordError(f"{where}: missing field '{name}'")
    for name in OUTCOME_FIELDS:
        if name not in record["outcome"]:
            raise RecordError(f"{where}: missing field 'outcome.{name}'")
    if not isinstance(record["players"], list) or len(record["players"]) != 2:
        raise RecordError(f"{where}: field 'players' must list the 2 seats")
    for s, seat in enumerate(record["players"]):
        _check_seat(seat, f"players[{s}]", where)
    return record


def _check_seat(seat: object, name: str, where: str) -> None:
    if not isinstance(seat, dict):
        raise RecordError(f"{where}: field '{name}' must be an object, got {type(seat).__name__}")
    if not isinstance(seat.get("messages"), list):
        raise RecordError(f"{where}: field '{name}.messages' must be a list of chat messages")
    if seat.get("kind") != "llm":
        return
    for field in LLM_SEAT_FIELDS:
        if field not in seat:
            raise RecordError(f"{where}: missing field '{name}.{field}'")
    if not isinstance(seat["token_ids"], list) or not isinstance(seat["turns"], list):
        raise RecordError(f"{where}: fields '{name}.token_ids' and '{name}.turns' must be lists")
    for t, turn in enumerate(seat["turns"]):
        for field in TURN_FIELDS:
            if not isinstance(turn, dict) or field not in turn:
                raise RecordError(f"{where}: missing field '{name}.turns[{t}].{field}'")


def _loads(raw: bytes) -> object:
    """orjson is several times faster on id-heavy lines; the standard parser takes the lines it
    refuses but json.dumps writes (NaN and Infinity, e.g. a -inf logprob)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def read_games(path: str | Path, skip_invalid: bool = False, errors: list[str] | None = None) -> Iterator[dict]:
    """Stream the records of a games file. Bad lines raise `RecordError` naming file, line and
    field, or with `skip_invalid` are described in `errors` and skipped."""
    path = Path(path)
    with path.open("rb", buffering=1 << 20) as fh:  # a game is tens of kB: read it in one piece
        for number, raw in enumerate(fh, 1):
            if raw.isspace():
                continue
            where = f"{path}:{number}"
            try:
                try:
                    record = _loads(raw)
                except json.JSONDecodeError as err:
                    raise RecordError(f"{where}: not valid JSON ({err.msg} at column {err.colno})") from None
                yield check(record, where)
            except RecordError as err:
                if not skip_invalid:
                    raise
                if errors is not None:
                    errors.append(str(err))


def repair_tail(path: Path, window: int = 1 << 23) -> int:
    """Cut a torn last line (a write interrupted by a crash) and return how many bytes went."""
    size = path.stat().st_size
    with path.open("rb+") as fh:
        fh.seek(max(0, size - window))
        tail = fh.read()
        start = tail.rfind(b"\n", 0, len(tail) - 1) + 1  # where the last line begins
        last = tail[start:]
        try:
            whole = last.endswith(b"\n") and json.loads(last) is not None
        except json.JSONDecodeError:
            whole = False
        if whole:
            return 0
        keep = size - len(tail) + start
        fh.truncate(keep)
        os.fsync(fh.fileno())
    return size - keep


class GameWriter:
    """Appends records durably. With `resume`, knows which games the file already holds."""

    def __init__(self, path: str | Path, resume: bool = False):
        self.path = Path(path)
        self.done: set[str] = set()
        self.repaired_bytes = 0
        if self.path.exists() and self.path.stat().st_size:
            if not resume:
                raise FileExistsError(
                    f"{self.path} already holds games; pass --resume to complete it or choose another --out"
                )
            self.repaired_bytes = repair_tail(self.path)
            self.done = {r["game_id"] for r in read_games(self.path)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")

    def write(self, record: dict) -> None:
        self._fh.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.done.add(record["game_id"])

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> GameWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
