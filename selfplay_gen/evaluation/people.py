"""Games people played (`selfplay-gen view`), with the person's seat reported apart from the partner's.

Such a game has one seat of kind "human" in its record, on either seat. Its two seats are two
different players, so a self-play summary would mix them: the partner's moves into the person's
valid-move rate and wording, and in a competitive game the partner's reward into the person's.
Here each game gives one row per side, from that seat's own events and reward (plus what its
game's evaluation adds per seat, `seat_figures(record, seat)`, where it has one), and the report
has a row for the person and one for the partner.

`NAME=FILE` labels the person NAME and the partner by what played it (e.g. `scripted`);
`NAME,PARTNER=FILE` names both. The person's seat is read from each record, never from the order.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import games as registry
from ..atomic import write_atomic
from ..games.base import MAX_INVALID
from ..records import Record
from ..stats.metrics import endings, mean_interval, per_instance, ratio_interval
from ..stats.report import BOOTSTRAP_NOTE, format_interval, markdown_table

HUMAN = "human"  # a seat's kind in a record when a person played it
SCHEMA = "selfplay-gen-eval-people/1"
NOTE = (
    "Each side is one seat of every game: the person's own seat, wherever they sat, and the partner's. "
    "Reward: that seat's reward; valid moves: the share of that seat's attempted moves that were valid; "
    "ended by its invalid moves: games it ended with too many invalid moves in a row (at reward 0); "
    "messages and words: that seat's own."
)
SeatFigures = Callable[[Record, int], dict[str, float]]


def holds_people(path: Path) -> bool:
    """Whether the games file `path` holds games people played (its first record has a human seat)."""
    with path.open() as fh:
        for raw in fh:
            if raw.strip():
                try:
                    players = json.loads(raw).get("players", [])
                    return any(isinstance(p, dict) and p.get("kind") == HUMAN for p in players)
                except (ValueError, AttributeError):
                    return False  # not a record: the checked reader says why
    return False


def human_seat(record: Record) -> int:
    """The seat the person played; ValueError naming the game when there is not exactly one."""
    seats = [s for s, p in enumerate(record["players"]) if p["kind"] == HUMAN]
    if len(seats) != 1:
        kinds = " | ".join(p["kind"] for p in record["players"])
        raise ValueError(
            f"game {record['game_id']!r}: field 'players[*].kind': {kinds}: a game people played has one human "
            "seat; give games of models in another file"
        )
    return seats[0]


def partner_label(record: Record, seat: int) -> str:
    """What played `seat` as a reader names it: its kind for a scripted player, else its model."""
    kind = record["players"][seat]["kind"]
    who = dict(record.get("settings", {}).get(f"seat{seat}", {}))  # type: ignore[call-overload]
    if kind == "scripted" or not who.get("model"):
        return str(kind)
    return Path(str(who["model"]).rstrip("/")).name or str(who.get("backend") or kind)


def side_row(record: Record, seat: int, label: str, role: str, figures: SeatFigures | None) -> dict[str, Any]:
    """One seat of one game as a flat row of that seat's own figures."""
    outcome, events = record["outcome"], record["events"]
    own = [e for e in events if e["player"] == seat]
    messages = [e["text"] for e in own if e["kind"] == "message"]
    return {
        "game_id": record["game_id"],
        "instance_id": record["instance_id"],
        "label": label,
        "role": role,
        "seat": seat,
        "reward": float(outcome["rewards"][seat]),
        "agreed": bool(outcome["agreed"]),
        "moves": sum(e["kind"] not in ("invalid", "stop") for e in own),
        "invalid": sum(e["kind"] == "invalid" for e in own),
        "ended_by_invalid": outcome["termination"] == MAX_INVALID and bool(events) and events[-1]["player"] == seat,
        "messages": len(messages),
        "words": sum(len(m.split()) for m in messages),
        "termination": outcome["termination"],
        **(figures(record, seat) if figures else {}),
    }


BASE_COLUMNS = frozenset(
    ("game_id", "instance_id", "label", "role", "seat", "reward", "agreed", "moves", "invalid")
    + ("ended_by_invalid", "messages", "words", "termination")
)  # what every game's side rows hold; any other column is the game's own figure


def seat_figures(game: str) -> SeatFigures | None:
    """The game's own per-seat figures (`seat_figures` in its evaluation module), if it has them."""
    return getattr(importlib.import_module(registry.get(game).evaluation), "seat_figures", None)


def people_table(records: list[Record], names: tuple[str, str], game: str) -> pd.DataFrame:
    """Two rows per game: the person's seat (labelled `names[0]`) and the partner's (`names[1]`,
    or what played it when both names are the same)."""
    figures = seat_figures(game)
    rows = []
    for record in records:
        seat = human_seat(record)
        partner = names[1] if names[1] != names[0] else partner_label(record, 1 - seat)
        rows.append(side_row(record, seat, names[0], "person", figures))
        rows.append(side_row(record, 1 - seat, partner, "partner", figures))
    return pd.DataFrame(rows)


def summarize(rows: pd.DataFrame, resamples: int, rng: np.random.Generator) -> dict[str, Any]:
    """One side's figures over its games, with bootstrap intervals over instances."""

    def interval(column: str) -> dict:
        return mean_interval(per_instance(rows, column).to_numpy(float), resamples, rng)

    sums = rows.groupby("instance_id")[["moves", "invalid"]].sum()
    extra = [c for c in rows.columns if c not in BASE_COLUMNS]
    return {
        "role": str(rows["role"].iloc[0]),
        "games": len(rows),
        "instances": int(rows["instance_id"].nunique()),
        "games_in_seat": [int((rows["seat"] == s).sum()) for s in (0, 1)],
        "reward": interval("reward"),
        "agreement_rate": interval("agreed"),
        "valid_move_rate": ratio_interval(sums["moves"], sums["moves"] + sums["invalid"], resamples, rng),
        "invalid_moves": int(rows["invalid"].sum()),
        "ended_by_invalid": int(rows["ended_by_invalid"].sum()),
        "messages_per_game": interval("messages"),
        "words_per_game": interval("words"),
        "figures": {c: interval(c) for c in extra},
        "terminations": endings(rows),
    }


def evaluate(tables: list[pd.DataFrame], game: str, resamples: int, seed: int) -> dict[str, Any]:
    """Each side's summary (the people first, then their partners), over all the people's games given."""
    rows = pd.concat(tables, ignore_index=True)
    rng = np.random.default_rng(seed)
    order = sorted(rows["label"].unique(), key=lambda label: rows[rows["label"] == label]["role"].iloc[0] != "person")
    return {
        "schema": SCHEMA,
        "game": game,
        "bootstrap": {"resamples": resamples, "unit": "instance", "level": 0.95, "seed": seed},
        "sides": {label: summarize(rows[rows["label"] == label], resamples, rng) for label in order},
    }


def summary_text(people: dict[str, Any]) -> str:
    """The people's table: one row per side."""
    figures = sorted({k for s in people["sides"].values() for k in s["figures"]})
    head = ["side", "role", "games", "seat 0 / seat 1", "reward [95% CI]", "agreement", "valid moves"]
    head += ["ended by its invalid moves", "messages/game", "words/game", *[f"{f}/game" for f in figures]]
    rows = [
        [
            label,
            s["role"],
            str(s["games"]),
            " / ".join(map(str, s["games_in_seat"])),
            format_interval(s["reward"]),
            format_interval(s["agreement_rate"], percent=True),
            format_interval(s["valid_move_rate"], percent=True),
            str(s["ended_by_invalid"]),
            format_interval(s["messages_per_game"], digits=1),
            format_interval(s["words_per_game"], digits=1),
            *[format_interval(s["figures"].get(f), digits=1) for f in figures],
        ]
        for label, s in people["sides"].items()
    ]
    return markdown_table(head, rows)


def write_report(out_dir: Path, people: dict[str, Any], inputs: list[dict], written: list[Path]) -> list[Path]:
    """The people's section: added to the report and metrics just `written` for models' games, or
    a report of its own (metrics.json, report.md). Returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    section = [
        "## Games people played",
        "",
        *[f"- `{i['file']}`: {i['games']} games, person {i['seats'][0]}" for i in inputs],
        "",
        summary_text(people),
        "",
        NOTE,
        "",
    ]
    report, metrics_file = out_dir / "report.md", out_dir / "metrics.json"
    if report in written and metrics_file in written:
        write_atomic(report, report.read_text().rstrip("\n") + "\n\n" + "\n".join(section))
        metrics = json.loads(metrics_file.read_text())
        write_atomic(metrics_file, json.dumps({**metrics, "people": {**people, "inputs": inputs}}, indent=1) + "\n")
        return written
    head = [f"# Evaluation: {people['game']}, games people played", ""]
    head += [BOOTSTRAP_NOTE.format(resamples=people["bootstrap"]["resamples"]), ""]
    write_atomic(report, "\n".join(head + section))
    write_atomic(metrics_file, json.dumps({"people": {**people, "inputs": inputs}}, indent=1) + "\n")
    return [metrics_file, report]
