"""Whether a player's reviewer order follows the known values, and whether inside a group the orders
that follow them more win more (matching game, the records plans' proposals).

    python bench/analysis/order_signal.py OUT_DIR LABEL=EVAL_DIR [LABEL=EVAL_DIR ...]

A records-plan proposal lists the reviewers one line each, in the order the plan takes them, and the
order decides the plan. Per game: Kendall's tau between that order and the ranking by each reviewer's
highest known value (what the teacher's proposer knows once the first mover has stated its cells:
1 = highest value first, as `ranked-records` tends to, 0 = unrelated, as `shuffled-records`). Per
instance: Spearman's correlation of tau with the game's reward inside the group (does following the
values pay on this table?), and the best game's tau minus the group's mean (how far imitating each
group's best game moves the order). A player that learns the order raises its mean tau; a signal for
that exists where the correlation inside groups is positive. Games whose proposal does not list all
eight reviewers are counted and left out. Writes OUT_DIR/order_signal.{json,md}.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from exploration import labelled_runs
from scipy.stats import kendalltau, spearmanr

from selfplay_gen.games.matching.instance import REVIEWERS, Instance
from selfplay_gen.games.matching.scripted import known_cells
from selfplay_gen.records import read_games
from selfplay_gen.stats.metrics import mean_interval

RESAMPLES = 2000


def listed_order(game: dict) -> list[int] | None:
    """The reviewers in the order the last proposal's reasoning lists them, or None where it does not
    list each of them once."""
    proposer = next((e["player"] for e in reversed(game["events"]) if e["kind"] == "propose"), None)
    if proposer is None:
        return None
    said = [m["content"] for m in game["players"][proposer]["messages"] if m["role"] == "assistant"]
    reasoning = next((text.split("[propose]")[0] for text in reversed(said) if "[propose]" in text), "")
    names = [line.split(":")[0].strip() for line in reasoning.strip().splitlines()]
    return [REVIEWERS.index(n) for n in names] if sorted(names) == sorted(REVIEWERS) else None


def value_tau(instance: Instance, order: list[int]) -> float:
    """Kendall's tau of `order` against the ranking by highest known value (1: highest first)."""
    top = [max(cells.values(), default=-1) for cells in known_cells(instance)]
    return float(kendalltau(range(len(order)), [-top[r] for r in order]).statistic)


def games_of(eval_dir: Path) -> tuple[pd.DataFrame, int]:
    """One row per game whose proposal lists every reviewer, and the number of games left out."""
    rows, unlisted = [], 0
    for path in sorted((eval_dir / "games").glob("*.jsonl")):
        for game in read_games(path):
            order = listed_order(game)
            if order is None:
                unlisted += 1
                continue
            instance = Instance.from_dict(game["instance"])
            reward = float(game["outcome"]["rewards"][0])  # the matching game's seats share one reward
            rows.append({"instance_id": game["instance_id"], "tau": value_tau(instance, order), "reward": reward})
    if not rows:
        raise SystemExit(f"{eval_dir}/games: no game whose proposal lists every reviewer")
    return pd.DataFrame(rows), unlisted


def summary(games: pd.DataFrame, unlisted: int, rng: np.random.Generator) -> dict:
    groups = games.groupby("instance_id")
    varied = [g for _, g in groups if g["tau"].nunique() > 1 and g["reward"].nunique() > 1]
    within = np.array([spearmanr(g["tau"], g["reward"]).statistic for g in varied])
    best_shift = np.array([g["tau"].loc[g["reward"].idxmax()] - g["tau"].mean() for _, g in groups])
    return {
        "games": len(games),
        "left_out": unlisted,
        "instances": int(games["instance_id"].nunique()),
        "tau": mean_interval(groups["tau"].mean().to_numpy(float), RESAMPLES, rng),
        "groups_varied": len(varied),
        "within_group_spearman": mean_interval(within, RESAMPLES, rng) if len(varied) else None,
        "best_minus_group_tau": mean_interval(best_shift, RESAMPLES, rng),
    }


def table(results: dict[str, dict]) -> str:
    def cell(entry: dict | None) -> str:
        return "–" if entry is None else f"{entry['mean']:+.3f} [{entry['ci'][0]:+.3f}, {entry['ci'][1]:+.3f}]"

    head = [
        "player",
        "games (left out)",
        "order vs values, tau",
        "tau vs reward in a group (groups)",
        "best game's tau − group's",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, r in results.items():
        within = f"{cell(r['within_group_spearman'])} ({r['groups_varied']})"
        cells = [label, f"{r['games']} ({r['left_out']})", cell(r["tau"]), within, cell(r["best_minus_group_tau"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    labelled_runs(argv, __doc__ or "", "order_signal", lambda path, rng: summary(*games_of(path), rng), table)


if __name__ == "__main__":
    main(sys.argv[1:])
