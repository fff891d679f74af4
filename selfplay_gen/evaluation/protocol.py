"""What one game's evaluation provides, and how it is found: each game names the module of its
metrics and report (`Game.evaluation`), imported only when that game is evaluated, so this
package knows no game and a new game brings its own evaluation in its own folder."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import games as registry
from ..records import UNNAMED_GAME, Record


@dataclass(frozen=True)
class Evaluation:
    """What one game's evaluation provides: a row per game record, all metrics of a table of
    games, the report it writes, and the table printed at the end."""

    table: Callable[..., pd.DataFrame]  # (records, seats) -> one row per game
    evaluate: Callable[..., dict]  # (games, self-play models, resamples, seed) -> metrics
    write: Callable[..., list[Path]]  # (out dir, metrics, games, inputs) -> files written
    summary: Callable[[dict], str]  # metrics -> a markdown table
    append: Callable[..., dict]  # (run dir, metrics, source) -> the run-level report with this model's row


def evaluation_of(game: str) -> Evaluation:
    """The evaluation the game registered as `game` names (`Game.evaluation`, imported now)."""
    target = registry.get(game).evaluation
    module = importlib.import_module(target)
    parts = ("game_table", "evaluate", "write_report", "summary_text", "append_to_run")
    missing = [part for part in parts if not callable(getattr(module, part, None))]
    if missing:
        raise ValueError(f"the {game} game's evaluation {target} lacks {', '.join(missing)}")
    return Evaluation(*(getattr(module, part) for part in parts))


def records_table(records: Sequence[Record], seats: tuple[str, str]) -> pd.DataFrame:
    """The rows of `records` (games of one game, seats `seats`) as their game's evaluation makes
    them; an empty table for no records."""
    played = sorted({r.get("game", UNNAMED_GAME) for r in records})
    if len(played) > 1:
        raise ValueError(f"the games are of several games ({', '.join(played)}); evaluate one game at a time")
    return evaluation_of(played[0]).table(records, seats) if played else pd.DataFrame()


def game_measures(record: Record) -> dict[str, float]:
    """One game's numeric measures as its game's evaluation counts them: the scalar columns of its row
    (agreement, moves, invalid moves, cells stated, ...), for a trainer that averages them over the games of a
    step, so its curves show what the seats do and not their reward alone."""
    (row,) = records_table([record], ("model", "model")).to_dict("records")
    numbers = (bool, int, float, np.bool_, np.integer, np.floating)
    return {name: float(value) for name, value in row.items() if isinstance(value, numbers) and not pd.isna(value)}
