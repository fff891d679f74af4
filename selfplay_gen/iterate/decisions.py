"""Every decision of a run that is not a command: whether to warm-start, which earlier checkpoint the
league puts in seat 1, which checkpoints cross-play, what a game does by default, the rows of the
run's summary. Pure functions of what the run has written, so each is tested on its own."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

WARM_START_POLICIES = ("auto", "teacher", "none")


def wants_warm_start(policy: str, agreement: float | None, below: float) -> bool:
    """teacher: always; none: never; auto: when the initial model agrees in fewer than `below` of its
    held-out games (a model that cannot finish a game gives GRPO groups of zeros). An auto run with
    no measured agreement (a dry run) warm-starts, the cautious choice."""
    if policy not in WARM_START_POLICIES:
        raise ValueError(f"warm-start policy must be one of {', '.join(WARM_START_POLICIES)}, not {policy!r}")
    if policy != "auto":
        return policy == "teacher"
    return agreement is None or agreement < below


def heldout_agreement(metrics: Path, label: str) -> float:
    """`label`'s mean agreement in an evaluation's metrics.json."""
    try:
        return float(json.loads(metrics.read_text())["models"][label]["agreement_rate"]["mean"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{metrics}: no models.{label}.agreement_rate.mean ({error})") from error


def ratings(report: Path) -> dict[str, float | None]:
    """Each label's held-out rating in a run-level report's metrics.json (rows labelled "N: label");
    nothing when the report does not exist yet."""
    if not report.exists():
        return {}
    rows = json.loads(report.read_text()).get("iterations", [])
    return {row["label"].split(": ", 1)[-1]: (row.get("rating") or {}).get("rating") for row in rows}


def league_opponent(
    labels: Sequence[str], rated: Mapping[str, float | None], iteration: int, league_size: int
) -> int | None:
    """The index in `labels` (every checkpoint so far, the current model last) of seat 1's opponent
    for `iteration`: among the last `league_size` earlier checkpoints, the one rated nearest the current
    model (a tie: the later one), or each in turn while some are unrated. None: self-play."""
    earlier = len(labels) - 1
    if league_size <= 0 or earlier <= 0:
        return None
    pool = range(max(0, earlier - league_size), earlier)
    current = rated.get(labels[-1])
    if current is not None and all(rated.get(labels[k]) is not None for k in pool):
        return min(pool, key=lambda k: (abs(float(rated[labels[k]]) - current), -k))  # type: ignore[arg-type]
    return pool[iteration % len(pool)]


def crossplay_pairings(labels: Sequence[str], warm_label: str = "warm") -> list[tuple[int, int]]:
    """(checkpoint, opponent) index pairs: each checkpoint after the initial one (the warm start when
    there is one, else base) against the initial one and against the one just before it."""
    first = 1 if len(labels) > 1 and labels[1] == warm_label else 0
    pairs = []
    for i in range(first + 1, len(labels)):
        pairs.append((i, first))
        if i - 1 != first:
            pairs.append((i, i - 1))
    return pairs


def crossplay_inputs(labels: Sequence[str], pairs: Sequence[tuple[int, int]], played: Sequence[Path]) -> list[str]:
    """The `--from-games` arguments of the cross-play report: each checkpoint's self-play first (from
    the first pairing it played in, the initial checkpoint first, so it rates 0), then both seat orders
    of every pairing."""
    own: dict[int, str] = {}
    cross: list[str] = []
    for (i, j), games in zip(pairs, played):
        a, b = labels[i], labels[j]
        cross += ["--from-games", f"{a},{b}={games}/{a}__{b}.jsonl", "--from-games", f"{b},{a}={games}/{b}__{a}.jsonl"]
        own.setdefault(i, f"{a}={games}/{a}__{a}.jsonl")
        own.setdefault(j, f"{b}={games}/{b}__{b}.jsonl")
    return [arg for k in sorted(own) for arg in ("--from-games", own[k])] + cross


def evaluation_sets(game_cls: type) -> tuple[str, ...]:
    """The instance sets every model of this game is evaluated on: held-out random instances, and the
    instances people played when the game has them (`human_games` on the game class)."""
    return ("heldout", "human") if getattr(game_cls, "human_games", 0) else ("heldout",)


def crossplays_by_default(game_cls: type) -> bool:
    """Whether checkpoints of this game play each other after the iterations by default: a competitive
    game's progress shows in wins against earlier checkpoints (`crossplay_by_default` on the class)."""
    return bool(getattr(game_cls, "crossplay_by_default", False))


SUMMARY_HEADER = ("stage", "training games", "agreement", "mean reward", "wall time (s)")


def summary_row(stage: str, games: Mapping[str, Any] | None, seconds: float) -> tuple[str, ...]:
    """A stage's row in summary.md: its training games (`Summary.to_dict` of its gen/games.jsonl,
    every game of the file, those of a run that resumed there too), their agreement and mean reward,
    and its wall time."""
    games = games or {}

    def rate(key: str) -> str:
        value = games.get(key)
        return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4f}"

    return (stage, str(games.get("games", "")), rate("agreement_rate"), rate("mean_reward"), str(round(seconds)))


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
