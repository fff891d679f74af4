"""Every reading of the test split kept under bench/results/: which model, where, how many instances
and games, and the figure, as a markdown table (the list `bench/results/TEST_SPLIT.md` has to cover).

    python bench/analysis/test_readings.py [RESULTS_DIR] [--dates]

The test split (seeds from 2 x 10**9, `selfplay_gen.evaluation.splits.TEST`) is read once per final
model and never to choose a setting; a ledger of those readings only holds if nothing escapes it.
What counts as a reading:

- a matching evaluation (`metrics.json`) whose instances are test seeds (its `per_instance` keys);
- a negotiation evaluation (`metrics.json`, which keeps no per-instance seeds), or a run's report of its
  stages' evaluations (`selfplay-gen-run`), in a folder named `test`;
- a row of an `rl_curve.json` on the `test` split (a curve can carry a reading whose evaluation was
  not kept);
- any other kept file about test games: named `*test*` (a run report, an analysis), or lying in a
  folder named `test` beside its evaluation (`proposer_lines.json`).

`--dates` adds the day each file entered the repository (`git log`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from selfplay_gen.evaluation.splits import TEST

RESULTS = Path(__file__).resolve().parents[1] / "results"
# files a test folder holds beside its evaluation that are the evaluation itself, not a reading of their own
COMPANIONS = {"report.md", "metrics.json"}
KEPT_SUFFIXES = {".json", ".md", ".tsv", ".csv"}  # not the games themselves (.jsonl)
# this audit's own folder: its listing of the readings and its development evaluations are none
AUDIT = "test_split_hygiene"


@dataclass(frozen=True)
class Reading:
    """One figure read on the test split, and the file that keeps it (relative to the results folder)."""

    path: str
    model: str
    size: str  # instances x games per instance, as the file says it
    figure: str


def seed_of(key: str) -> int | None:
    """The seed of a `per_instance` key (`seed-2000000007`), None for a named instance (`human-012`)."""
    prefix, _, number = key.partition("-")
    return int(number) if prefix == "seed" and number.isdigit() else None


def on_test(keys: list[str]) -> bool:
    """Whether instance keys are all test seeds (and there is at least one)."""
    seeds = [seed_of(key) for key in keys]
    return bool(seeds) and all(seed in TEST for seed in seeds)


def span(share: dict, scale: float = 1.0, digits: int = 3) -> str:
    low, high = share["ci"]
    return f"{scale * share['mean']:.{digits}f} [{scale * low:.{digits}f}, {scale * high:.{digits}f}]"


def size_of(summary: dict) -> str:
    instances, games = summary.get("instances"), summary.get("games")
    return f"{instances} x {games // instances}" if instances and games else "?"


def headline(summary: dict) -> str:
    """A model's main figure: matching's mean normalized reward, negotiation's self-play joint share."""
    if summary.get("mean_normalized_reward"):
        return f"reward {span(summary['mean_normalized_reward'])}"
    return f"self-play joint share {span(summary['joint_share'], 100, 1)}%"


def from_metrics(path: Path, name: str) -> list[Reading]:
    """The test readings of one evaluation's metrics.json (none when it is not on the test split)."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        return []  # a trainer's step log, which verl also names metrics.json
    schema = str(data.get("schema", ""))
    models: dict = data.get("models") or {}
    if schema.startswith("selfplay-gen-eval-negotiation/"):
        if "test" not in path.parent.parts:
            return []
        out = []
        out = [Reading(name, label, size_of(summary), headline(summary)) for label, summary in models.items()]
        for match in data.get("cross_play") or []:
            first, second = match["models"]
            both = match.get("both") or {}
            if both.get("decided_win_share"):
                figure = f"{first} wins {span(both['decided_win_share'], 100, 1)}% of decided games against {second}"
                out.append(Reading(name, f"{first} vs {second}", f"{both.get('games', '?')} games", figure))
        return out
    if schema.startswith("selfplay-gen-run/"):
        if "test" not in path.parent.parts:
            return []  # a run's report on other instances
        return [Reading(name, row["label"], size_of(row["summary"]), headline(row["summary"])) for row in data["rows"]]
    if not schema.startswith("selfplay-gen-eval/"):
        return []
    per_instance = data.get("per_instance") or {}
    return [
        Reading(name, label, size_of(summary), headline(summary))
        for label, summary in models.items()
        if on_test(list(per_instance.get(label, {})))
    ]


def from_curve(path: Path, name: str) -> list[Reading]:
    """The test rows of a reward-against-GPU-minutes curve (bench/analysis/rl_curve.py)."""
    out = []
    for row in json.loads(path.read_text()).get("rows", []):
        if row.get("split") != "test":
            continue
        size = f"{row['instances']} x {row['games'] // row['instances']}"
        figure = f"reward {row['reward']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
        if row.get("gain_vs_warm") is not None:
            gain = f"{row['gain_vs_warm']:+.3f} [{row['gain_ci_low']:+.3f}, {row['gain_ci_high']:+.3f}]"
            figure += f", paired vs warm {gain}"
        out.append(Reading(name, f"{row['trainer']}: {row['model']}", size, figure))
    return out


def readings(results: Path = RESULTS) -> list[Reading]:
    """Every test reading under `results`, in path order."""
    out: list[Reading] = []
    for path in sorted(p for p in results.rglob("*") if p.is_file() and p.suffix in KEPT_SUFFIXES):
        name = path.relative_to(results).as_posix()
        if name.startswith(f"{AUDIT}/"):
            continue
        in_test_folder = "test" in path.relative_to(results).parent.parts
        if path.name == "metrics.json":
            out += from_metrics(path, name)
        elif path.name == "rl_curve.json":
            out += from_curve(path, name)
        elif path.name != "README.md" and ("test" in path.name or (in_test_folder and path.name not in COMPANIONS)):
            out.append(Reading(name, "", "", "(a report or analysis of test games)"))
    return out


def added_on(path: Path) -> str:
    """The day `path` entered the repository, from git; '?' where git does not know it."""
    result = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%ad", "--date=short", "--", path.name],
        cwd=path.parent, capture_output=True, text=True,
    )  # fmt: skip
    days = result.stdout.split()
    return days[-1] if result.returncode == 0 and days else "?"


def table(found: list[Reading], results: Path, dates: bool) -> str:
    head = "| file | model | instances x games | figure |" + (" added |" if dates else "")
    lines = [head, "|" + "---|" * (5 if dates else 4)]
    for r in found:
        row = f"| `{r.path}` | {r.model} | {r.size} | {r.figure} |"
        lines.append(row + (f" {added_on(results / r.path)} |" if dates else ""))
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    dates = "--dates" in argv
    paths = [a for a in argv if a != "--dates"]
    results = Path(paths[0]) if paths else RESULTS
    if not results.is_dir():
        raise SystemExit(f"{results}: no such results folder")
    found = readings(results)
    print(table(found, results, dates))
    print(f"\n{len(found)} readings in {len({r.path for r in found})} files")


if __name__ == "__main__":
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__.strip())
        sys.exit(0)
    main(sys.argv[1:])
