"""What a group of games from one instance gives GRPO, by player: a model at several sampling
temperatures, or teacher plans (matching game).

    python bench/analysis/exploration.py OUT_DIR LABEL=EVAL_DIR [LABEL=EVAL_DIR ...]

GRPO learns from reward differences inside a group (one instance's games). A warm start that copies a
deterministic teacher plays the same proposal in every game, so its groups are constant and carry no
signal; temperature adds differences, but only useful ones when the games still end in a deal. For each
`selfplay-gen eval` directory (its games/*.jsonl), per instance: whether all games share one reward,
whether the agreed games reach different rewards, how many distinct proposals were agreed, the gap
between the group's best game and its median (its upside over a typical game; a gap to the mean would
also count games that broke down, which teach only not to break), and the group's best game (what
imitating each group's best would aim at); with the mean reward and agreement beside them.
Writes OUT_DIR/exploration.{json,md}.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from selfplay_gen.records import read_games
from selfplay_gen.stats.metrics import mean_interval

RESAMPLES = 2000


def games_of(eval_dir: Path) -> pd.DataFrame:
    rows = []
    for path in sorted((eval_dir / "games").glob("*.jsonl")):
        for game in read_games(path):
            outcome = game["outcome"]
            rows.append(
                {
                    "instance_id": game["instance_id"],
                    "reward": float(outcome["rewards"][0]),  # the matching game's seats share one reward
                    "agreed": bool(outcome["agreed"]),
                    "proposal": json.dumps(dict(outcome).get("proposal")) if outcome["agreed"] else None,
                }
            )
    if not rows:
        raise SystemExit(f"{eval_dir}/games: no games")
    return pd.DataFrame(rows)


def summary(games: pd.DataFrame, rng: np.random.Generator) -> dict:
    groups = games.groupby("instance_id")
    agreed = games[games["agreed"]].groupby("instance_id")

    def share(values: pd.Series) -> dict:
        return mean_interval(values.to_numpy(float), RESAMPLES, rng)

    return {
        "games": len(games),
        "instances": int(games["instance_id"].nunique()),
        "games_per_instance": float(groups.size().mean()),
        "reward": share(groups["reward"].mean()),
        "agreement": share(groups["agreed"].mean()),
        "constant_groups": share(groups["reward"].nunique() == 1),
        "groups_with_differing_deals": share(agreed["reward"].nunique().reindex(groups.size().index, fill_value=0) > 1),
        "distinct_agreed_proposals": share(agreed["proposal"].nunique().reindex(groups.size().index, fill_value=0)),
        "best_minus_median": share(groups["reward"].max() - groups["reward"].median()),
        "group_best": share(groups["reward"].max()),
    }


def table(results: dict[str, dict]) -> str:
    def cell(entry: dict, percent: bool = False) -> str:
        scale, unit = (100, "%") if percent else (1, "")
        lo, hi = entry["ci"]
        return f"{scale * entry['mean']:.3g}{unit} [{scale * lo:.3g}, {scale * hi:.3g}]"

    head = [
        "player",
        "games",
        "reward",
        "agreement",
        "constant groups",
        "groups whose deals differ",
        "distinct agreed proposals / instance",
        "best − median",
        "group's best",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, r in results.items():
        cells = [
            label,
            f"{r['instances']} x {r['games_per_instance']:g}",
            cell(r["reward"]),
            cell(r["agreement"], True),
        ]
        cells += [cell(r["constant_groups"], True), cell(r["groups_with_differing_deals"], True)]
        cells += [cell(r["distinct_agreed_proposals"]), cell(r["best_minus_median"]), cell(r["group_best"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def labelled_runs(argv: list[str], doc: str, name: str, summarise: Callable, table: Callable[[dict], str]) -> None:
    """The command line of this and order_signal.py: `OUT LABEL=GAMES...`, each games path summarised with one
    seeded generator for the bootstrap, into OUT/NAME.json and the table OUT/NAME.md (also printed); `doc`, the
    script's usage, when the arguments are not that."""
    if len(argv) < 2 or any("=" not in arg for arg in argv[1:]):
        raise SystemExit(doc)
    out = Path(argv[0])
    rng = np.random.default_rng(0)
    results = {}
    for arg in argv[1:]:
        label, path = arg.split("=", 1)
        results[label] = summarise(Path(path), rng)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / f"{name}.md").write_text(table(results))
    print(table(results))


def main(argv: list[str]) -> None:
    labelled_runs(argv, __doc__ or "", "exploration", lambda path, rng: summary(games_of(path), rng), table)


if __name__ == "__main__":
    main(sys.argv[1:])
