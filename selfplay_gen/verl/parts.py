"""The parts of a resident trainer's training rows (`verl.resident`): the loop writes part k once iteration
k's games are converted, the trainer's dataset (`arriving_rows.ArrivingRows`) reads it when its steps reach
it. This module holds what both sides agree on (the spec file, the part files, how a part is filled) and
imports nothing from verl, since the loop may run where verl is not installed."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..atomic import temporary, write_atomic

SPEC_SUFFIX = ".arriving.json"


@dataclass(frozen=True)
class Spec:
    """Where the parts arrive, how many there are (one per iteration) and how many rows each holds (the
    steps of an iteration times the rows of a step)."""

    parts_dir: str
    parts: int
    rows_per_part: int

    def part(self, k: int) -> Path:
        """Part k's file (k from 1: iteration k's rows)."""
        return Path(self.parts_dir) / f"part_{k:03d}.parquet"

    @classmethod
    def read(cls, path: str | Path) -> Spec:
        try:
            fields = json.loads(Path(path).read_text())
            return cls(str(fields["parts_dir"]), int(fields["parts"]), int(fields["rows_per_part"]))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path}: not a spec of arriving rows ({error!r})") from None

    def write(self, path: Path) -> None:
        write_atomic(path, json.dumps(asdict(self), indent=2) + "\n")


def is_spec(data_files: Any) -> bool:
    """Whether verl's data files name a spec of arriving rows (one file whose name ends in SPEC_SUFFIX)."""
    files = [data_files] if isinstance(data_files, str | Path) else list(data_files)
    return len(files) == 1 and str(files[0]).endswith(SPEC_SUFFIX)


def fill(rows_file: Path, spec: Spec, k: int, epochs: int, seed: int) -> int:
    """Write part k from an iteration's converted rows: `epochs` passes over them, each in its own order
    (seeded, as verl's shuffling sampler would draw them), repeated while too few, cut at the part's size.
    Written whole (a rename), so the trainer never reads half a part. Returns the iteration's row count."""
    import numpy as np
    import pyarrow.parquet as pq

    table = pq.read_table(rows_file)
    if table.num_rows == 0:
        raise ValueError(f"{rows_file}: no rows for part {k}")
    rng = np.random.default_rng(seed)
    passes = max(epochs, -(-spec.rows_per_part // table.num_rows))
    order = np.concatenate([rng.permutation(table.num_rows) for _ in range(passes)])[: spec.rows_per_part]
    path = spec.part(k)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary(path)
    try:
        pq.write_table(table.take(order), tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return table.num_rows
