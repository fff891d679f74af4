"""How closely a warm-started model's matching games follow the teacher it imitated.

For each records file: games, agreed games, the share of games that agreed on exactly the matching the
teacher (`--plan`) proposes on the same instance, and among agreed games the mean reward minus the
teacher's. Example:
  python bench/analysis/teacher_fidelity.py RUN_DIR/iter_002/eval/human/games/*.jsonl --plan by-score --out f.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import numpy as np

from selfplay_gen.atomic import write_json_atomic
from selfplay_gen.games import GameConfig
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.games.matching.scripted import TeacherPlayer
from selfplay_gen.records import read_games
from selfplay_gen.runner import GameSpec, play_game


async def teacher_outcome(instance: Instance, plan: str) -> tuple[list[tuple[int, int]], float]:
    seat = lambda spec, s, game, start: TeacherPlayer(spec.instance, s, plan)
    record = await play_game(GameSpec(f"{instance.id}/0", 0, 0, instance), (seat, seat), GameConfig(), {})
    return sorted(map(tuple, record["outcome"]["proposal"])), record["outcome"]["normalized_reward"]


async def fidelity(path: Path, plan: str) -> dict:
    games = agreed = same = 0
    gaps = []
    teacher: dict[str, tuple[list[tuple[int, int]], float]] = {}  # per instance: its games share one teacher game
    for record in read_games(path):
        if record["instance_id"] not in teacher:
            teacher[record["instance_id"]] = await teacher_outcome(Instance.from_dict(record["instance"]), plan)
        pairs, reward = teacher[record["instance_id"]]
        games += 1
        if record["outcome"]["agreed"]:
            agreed += 1
            same += sorted(map(tuple, record["outcome"]["proposal"])) == pairs
            gaps.append(record["outcome"]["normalized_reward"] - reward)
    return {
        "games": games,
        "agreed": agreed,
        "teachers_matching": same / games if games else 0.0,
        "agreed_reward_minus_teacher": float(np.mean(gaps)) if gaps else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("games", nargs="+", type=Path, help="records files (JSONL) of matching games")
    parser.add_argument("--plan", choices=TeacherPlayer.PLANS, default="by-reviewer", help="the teacher's plan")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    results = {str(path): asyncio.run(fidelity(path, args.plan)) for path in args.games}
    for path, row in results.items():
        print(path, json.dumps(row))
    if args.out:
        write_json_atomic(args.out, {"plan": args.plan, "files": results})


if __name__ == "__main__":
    main()
