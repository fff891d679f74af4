"""Exclusive locks that make a second writer fail at once instead of silently interleaving with,
or replacing, the first one's output. `flock` locks belong to an open file, so they go away with
the process however it ends (a killed run never leaves a stale lock behind)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class Busy(OSError):
    """Another process holds the lock; the message names what it is writing."""


class Lock:
    """Holds an exclusive lock on `path` (a file, created if missing, or a directory) until closed. With
    `wait`, a second holder waits for the first instead of failing: for work that is the same whoever
    does it, done once (a cache entry)."""

    def __init__(self, path: Path, what: str, wait: bool = False):
        self.path = Path(path)
        flags = os.O_RDONLY if self.path.is_dir() else os.O_RDWR | os.O_CREAT
        self._fd = os.open(self.path, flags, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(self._fd)
            raise Busy(f"{what} is being written by another process (locked); wait for it to end") from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the last descriptor releases the lock
            self._fd = -1

    def __enter__(self) -> Lock:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
