"""Whole-file writes that readers never see half done: a temp file beside the target, then a
rename over it (atomic on one file system)."""

from __future__ import annotations

import json
import os
from pathlib import Path


def temporary(path: Path) -> Path:
    """A hidden temp name beside `path`, distinct per process."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_atomic(path: Path, data: bytes | str) -> None:
    tmp = temporary(path)
    try:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # left only by a write that failed (a full disk)


def write_json_atomic(path: Path, data: dict, indent: int = 2) -> None:
    write_atomic(path, json.dumps(data, indent=indent) + "\n")
