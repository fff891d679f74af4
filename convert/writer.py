"""Outputs appear whole or not at all: each is written under a temporary name in its own
directory and renamed into place only when every output of the run is complete. A run that fails
or is stopped (a full disk, SIGTERM) removes its temporary files, even when closing them fails."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from selfplay_gen.atomic import temporary

SPILL = ".spill"  # the spill of output X is the temporary of X.spill
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.tmp")  # selfplay_gen.atomic.temporary's names


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale(directory: Path, names: Iterable[str]) -> list[Path]:
    """Remove the temporaries of `names` (outputs, and their spills) that a convert killed with no
    chance to clean up (SIGKILL, a power cut) left in `directory`: those of processes that no
    longer run. Called while holding the directory's lock, so no other convert is writing there.
    Returns the files removed."""
    wanted = set(names)
    removed = []
    for path in sorted(Path(directory).glob(".*.tmp")):
        found = _TEMPORARY.fullmatch(path.name)
        if found and found["name"] in wanted and int(found["pid"]) != os.getpid() and not _alive(int(found["pid"])):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


class Spill:
    """A temporary Arrow IPC stream next to the outputs: written once, read back once in order,
    then removed. Uncompressed IPC is near memcpy speed both ways; lz4 cost more CPU than it
    saved in I/O (the id and logprob buffers hardly compress). The spill is about half the
    input's size on disk."""

    def __init__(self, near: Path, schema: pa.Schema):
        self.path = temporary(near.with_name(near.name + SPILL))
        self._file = pa.OSFile(str(self.path), "wb")
        self._writer = pa.ipc.new_stream(self._file, schema)

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def batches(self):
        self._writer.close()
        self._file.close()
        with pa.OSFile(str(self.path)) as source:
            yield from pa.ipc.open_stream(source)

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc) -> None:
        try:
            if not self._file.closed:
                self._writer.close()
                self._file.close()
        finally:
            self.path.unlink(missing_ok=True)


class ParquetOutput:
    """Streams record batches into a parquet file; `commit` renames it into place, `discard`
    (or leaving a `with` block by an exception) removes it."""

    def __init__(self, path: Path, schema: pa.Schema):
        self.path, self.tmp, self.rows = Path(path), temporary(Path(path)), 0
        # Dictionary encoding and statistics cost more than the rest of the write on token-id lists.
        self._writer = pq.ParquetWriter(self.tmp, schema, use_dictionary=False, write_statistics=False)

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        if batch.num_rows:
            self._writer.write(batch)
            self.rows += batch.num_rows

    def commit(self) -> None:
        self._writer.close()
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        try:
            self._writer.close()
        finally:
            self.tmp.unlink(missing_ok=True)

    def __enter__(self) -> ParquetOutput:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            self.discard()
