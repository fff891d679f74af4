"""What the viewer may show: the one games file it was given, or the games files and report
directories under the one folder it was given, and nothing else.

Every path the page asks for is relative to that root and resolved here (`Library.resolve`), so
`..`, absolute paths, hidden files and folders (`.ssh/`, lock files) and symbolic links that lead
out are refused in one place; given a single file, that file is all there is. Games files are
read through `records.parse`, the checked reader every other part uses: a malformed or truncated
line becomes an error naming the file and line, listed beside the good games instead of ending
the page. Each file is indexed once (byte offset and a short summary per line) and indexed again
only when it changes, so opening game 900 of a file does not parse the 899 before it again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records import UNNAMED_GAME, Record, RecordError, parse

GAMES_SUFFIX = ".jsonl"
REPORT_FILE = "report.md"
MIN_TAIL = 3


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") and part not in (".", "..") for part in relative.parts)


class OutsideRoot(PermissionError):
    """A path that is not under the viewer's root (or not there at all)."""


@dataclass(frozen=True)
class GameSummary:
    """One line of a games file, as the game lists show it."""

    line: int
    game_id: str
    game: str
    instance_id: str
    seats: tuple[str, ...]  # each seat's kind: llm, scripted, human, ...
    rewards: tuple[float, ...]
    agreed: bool
    termination: str
    moves: int
    invalid: int
    failed: bool

    @classmethod
    def of(cls, line: int, record: Record) -> GameSummary:
        return cls(
            line,
            record["game_id"],
            record.get("game", UNNAMED_GAME),
            record["instance_id"],
            tuple(p["kind"] for p in record["players"]),
            tuple(record["outcome"]["rewards"]),
            record["outcome"]["agreed"],
            record["outcome"]["termination"],
            record["stats"]["valid_moves"],
            record["stats"]["invalid_moves"],
            bool(record.get("failure")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "seats": list(self.seats), "rewards": list(self.rewards)}


@dataclass
class GamesIndex:
    """Where each line of a games file starts, what it holds, and which lines are not records."""

    path: Path
    name: str  # as the page names it: relative to the root
    stamp: tuple[int, int]  # (size, mtime_ns) when indexed
    offsets: dict[int, int] = field(default_factory=dict)  # line -> byte offset
    games: list[GameSummary] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)  # {"line", "error"}

    @classmethod
    def build(cls, path: Path, name: str) -> GamesIndex:
        stat = path.stat()
        index = cls(path, name, (stat.st_size, stat.st_mtime_ns))
        with path.open("rb") as fh:
            offset = 0
            for number, raw in enumerate(fh, 1):
                start, offset = offset, offset + len(raw)
                if raw.isspace():
                    continue
                index.offsets[number] = start
                try:
                    index.games.append(GameSummary.of(number, parse(raw, f"{name}:{number}")))
                except RecordError as err:
                    index.errors.append({"line": number, "error": str(err)})
                except (KeyError, TypeError, ValueError) as err:  # a record the reader took but a summary cannot use
                    index.errors.append({"line": number, "error": f"{name}:{number}: {type(err).__name__}: {err}"})
        return index

    def record(self, line: int) -> Record:
        """The record on `line`; `RecordError` naming file and line for a line that is none."""
        if line not in self.offsets:
            raise RecordError(f"{self.name}:{line}: no such line (the file has {len(self.offsets)} records)")
        with self.path.open("rb") as fh:
            fh.seek(self.offsets[line])
            return parse(fh.readline(), f"{self.name}:{line}")


class Library:
    """The games files and reports under `root` (a directory, or one games file)."""

    def __init__(self, path: str | Path):
        path = Path(path).resolve()
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist; give a games file, a report directory or a run directory")
        self.single = path if path.is_file() else None
        self.root = path.parent if path.is_file() else path
        self._indexes: dict[Path, GamesIndex] = {}

    def resolve(self, name: str) -> Path:
        """The path `name` (relative to the root) names; `OutsideRoot` for anything the viewer does
        not show: outside the root once resolved (`..`, absolute paths, links out), hidden (a part
        of its name starts with a dot, before or after links are followed), absent, or, when the
        viewer was given one file, any other path."""
        if not name or "\x00" in name:
            raise OutsideRoot(f"no such path {name!r}")
        path = (self.root / name).resolve()
        if not self.serves(path) or _hidden(Path(name)):
            raise OutsideRoot(f"no such path under the viewed {'file' if self.single else 'directory'}: {name!r}")
        return path

    def serves(self, path: Path) -> bool:
        """Whether `path` (resolved) is one the viewer shows: the single file it was given, or an
        existing path under its folder that is not hidden."""
        if self.single is not None:
            return path == self.single
        return path.is_relative_to(self.root) and path.exists() and not _hidden(path.relative_to(self.root))

    def name(self, path: Path) -> str:
        return path.resolve().relative_to(self.root).as_posix()

    def _walk(self) -> list[Path]:
        """Every file under the root the viewer shows: hidden files and folders (e.g. lock files)
        and links that lead out of the root or nowhere are left out."""
        found: list[Path] = []
        for folder, dirs, files in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            paths = (Path(folder) / f for f in sorted(files) if not f.startswith("."))
            found.extend(p for p in paths if self.serves(p.resolve()))
        return found

    def games_files(self) -> list[str]:
        """Games files under the root (JSONL files other than summaries)."""
        if self.single is not None:
            return [self.name(self.single)]
        return [self.name(p) for p in self._walk() if p.name.endswith(GAMES_SUFFIX)]

    def games_in(self, folder: Path) -> list[str]:
        """The games files of a report directory's games/ folder that the viewer shows."""
        return sorted(self.name(p) for p in folder.glob("games/*" + GAMES_SUFFIX) if self.serves(p.resolve()))

    def reports(self) -> list[str]:
        """Report directories under the root: those holding a `report.md` (evaluations, run reports),
        a run's own (RUN_DIR/report/...) first."""
        if self.single is not None:
            return []
        found = [self.name(p.parent) or "." for p in self._walk() if p.name == REPORT_FILE]
        return sorted(found, key=lambda name: (not name.startswith("report/"), name))  # a run's own reports first

    def index(self, name: str) -> GamesIndex:
        """The index of the games file `name`, built again when the file changed."""
        path = self.resolve(name)
        if not path.is_file():
            raise OutsideRoot(f"{name!r} is not a file")
        stat = path.stat()
        index = self._indexes.get(path)
        if index is None or index.stamp != (stat.st_size, stat.st_mtime_ns):
            index = self._indexes[path] = GamesIndex.build(path, self.name(path))
        return index

    def same_instance(self, instance_id: str, game: str) -> list[dict[str, Any]]:
        """Every game of `instance_id` (of `game`) in every games file: what to put side by side."""
        found: list[dict[str, Any]] = []
        for name in self.games_files():
            for summary in self.index(name).games:
                if summary.instance_id == instance_id and summary.game == game:
                    found.append({"file": name, **summary.to_dict()})
        return found

    def locate(self, source: str, near: Path) -> Path | None:
        """A directory a report names (an iteration's evaluation, written as an absolute path on
        the machine that ran it), found under the root: the path itself if it is under the root,
        else its longest tail that exists under the report's folder `near` or one of its parents up
        to the root (a run directory copied elsewhere: RUN_DIR/report/heldout names
        RUN_DIR/iter_001/eval/heldout)."""
        path = Path(source)
        if path.is_absolute() and path.resolve().is_relative_to(self.root) and path.resolve().is_dir():
            return path.resolve()
        bases = [near.resolve(), *near.resolve().parents]
        bases = bases[: bases.index(self.root) + 1] if self.root in bases else [self.root]
        parts = [p for p in path.parts if p not in (path.anchor, "..", ".")]
        # tails of at least stage/eval/kind: a shorter one ("heldout") would find the report itself
        for start in range(max(1, len(parts) - MIN_TAIL + 1)):
            for base in bases:
                candidate = (base / Path(*parts[start:])).resolve()
                if candidate.is_relative_to(self.root) and candidate.is_dir():
                    return candidate
        return None
