"""The efficacy benchmark's table, plot and JSON, from runs of run_selfplay_iteration.sh.

    python bench/analysis/learning.py ROOT OUT

ROOT holds one run directory per trainer or setting (offline_gpu/gpu_learning.sh makes ROOT/grpo and
ROOT/fbc from the same base model and warm start; any ROOT/NAME with a report/ is read). For every
stage of every run (base, warm, iter_1, ...) it takes the run-level evaluation rows (RUN/report/heldout
and RUN/report/human) and reports the mean normalized reward with its 95% bootstrap interval over
instances beside the random-matching baseline of the same instances, the paired differences against
the previous stage and against the warm start, agreement, valid moves, grounding, and the stage's wall
time. The runs' last stages are also compared with each other, pair by pair, paired by instance.
Writes OUT/learning.md, OUT/learning.json and OUT/learning.png. Runs of another game (a negotiation
run's report rows hold points, not rewards beside random matching) are left out of that table; a
run with cross-play of its checkpoints (RUN/report/crossplay) gets its win rates and ratings in
learning.md and its report copied to OUT/NAME_crossplay/.
"""

from __future__ import annotations

import itertools
import json
import shutil
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from selfplay_gen.games.negotiation.evaluation import cross_play_table, ratings_table
from selfplay_gen.stats.metrics import paired_difference

RUNS = {"grpo": "GRPO", "fbc": "filtered BC"}  # names of gpu_learning.sh's runs; others are shown as named
SETS = ("heldout", "human")
NO_TALK, HUMANS = 0.837, 0.921  # the ladder of held-out seeds and the humans' 134 games
RESAMPLES, SEED = 2000, 0


def interval(stat: dict | None, digits: int = 3) -> str:
    if not stat or stat.get("mean") is None:
        return "–"
    lo, hi = stat["ci"]
    return f"{stat['mean']:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def signed(stat: dict | None) -> str:
    if not stat or stat.get("mean") is None:
        return "–"
    lo, hi = stat["ci"]
    return f"{stat['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def share(stat: dict | None) -> str:
    return "–" if not stat or stat.get("mean") is None else f"{100 * stat['mean']:.1f}%"


def stage_times(run: Path) -> dict[str, str]:
    table = run / "summary.tsv"
    if not table.exists():
        return {}
    rows = pd.read_csv(table, sep="\t", dtype=str)
    return dict(zip(rows["stage"], rows["wall time (s)"]))


def load(root: Path) -> dict:
    """Per matching run and instance set: the stages in order with summary and per-instance rewards."""
    runs = {}
    for name in sorted(p.name for p in root.iterdir() if (p / "report").is_dir()):
        sets = {}
        for kind in SETS:
            path = root / name / "report" / kind / "metrics.json"
            report = json.loads(path.read_text()) if path.exists() else {}
            if report.get("game", "matching") == "matching" and report:
                rows = report["rows"]
                sets[kind] = {
                    r["label"]: {"summary": r["summary"], "per_instance": pd.Series(r["per_instance"], dtype=float)}
                    for r in rows
                }
        if sets:
            runs[name] = {"sets": sets, "times": stage_times(root / name)}
    return runs


def crossplay(root: Path, out: Path) -> list[str]:
    """learning.md's sections for the runs whose checkpoints played each other (a competitive game's
    evidence: each checkpoint's wins against the initial and the previous one, ratings), each run's
    report copied to OUT/NAME_crossplay/."""
    lines = []
    for report in sorted(root.glob("*/report/crossplay/metrics.json")):
        name = report.parents[2].name
        shutil.copytree(report.parent, out / f"{name}_crossplay", dirs_exist_ok=True)
        metrics = json.loads(report.read_text())
        lines += [f"## {name}: cross-play of its checkpoints (`{name}_crossplay/report.md`)", ""]
        lines += [cross_play_table(metrics), "", ratings_table(metrics), ""]
        if (report.parent / "rating.png").exists():
            lines += [f"![{name}: rating per checkpoint]({name}_crossplay/rating.png)", ""]
    return lines


def stage_rows(runs: dict, rng: np.random.Generator) -> list[dict]:
    rows = []
    for name, run in runs.items():
        for kind, stages in run["sets"].items():
            labels = list(stages)
            for i, label in enumerate(labels):
                stage = stages[label]
                s = stage["summary"]
                previous = stages[labels[i - 1]]["per_instance"] if i else None
                warm = stages["warm"]["per_instance"] if "warm" in stages and label not in ("base", "warm") else None
                rows.append(
                    {
                        "trainer": RUNS.get(name, name),
                        "set": kind,
                        "stage": label,
                        "reward": s.get("mean_normalized_reward"),
                        "random": s.get("random_matching_reward"),
                        "minus_random": s.get("minus_random"),
                        "vs_previous": paired_difference(stage["per_instance"], previous, RESAMPLES, rng)
                        if i
                        else None,
                        "vs_warm": paired_difference(stage["per_instance"], warm, RESAMPLES, rng)
                        if warm is not None
                        else None,
                        "agreement": s.get("agreement_rate"),
                        "valid": s.get("valid_move_rate"),
                        "grounding": s.get("grounding_rate"),
                        "games": s.get("games"),
                        "wall_time_s": run["times"].get(label),
                    }
                )
    return rows


def head_to_head(runs: dict, rng: np.random.Generator) -> list[dict]:
    """Every pair of runs: their last stages, paired by instance."""
    out = []
    for first, second in itertools.combinations(runs, 2):
        for kind in SETS:
            stages = [runs[name]["sets"].get(kind) for name in (first, second)]
            if not all(stages):
                continue
            (a_label, a), (b_label, b) = [list(s.items())[-1] for s in stages]
            out.append(
                {
                    "set": kind,
                    "runs": [RUNS.get(first, first), RUNS.get(second, second)],
                    "stages": [a_label, b_label],
                    "difference": paired_difference(a["per_instance"], b["per_instance"], RESAMPLES, rng),
                }
            )
    return out


def markdown(rows: list[dict], versus: list[dict]) -> str:
    lines = []
    for kind, title in (
        ("heldout", "Held-out instances (seeds from 10**9, never trained on)"),
        ("human", f"The 134 human instances (humans scored {HUMANS})"),
    ):
        chosen = [r for r in rows if r["set"] == kind]
        if not chosen:
            continue
        lines += [
            f"## {title}",
            "",
            "| trainer | stage | games | mean normalized reward [95% CI] | random matching (same instances) | "
            "− previous stage (paired) | − warm start (paired) | agreement | valid moves | grounding | "
            "stage wall time (s) |",
            "|" + "---|" * 11,
        ]
        for r in chosen:
            lines.append(
                f"| {r['trainer']} | {r['stage']} | {r['games']} | {interval(r['reward'])} | "
                f"{interval(r['random'])} | {signed(r['vs_previous'])} | {signed(r['vs_warm'])} | "
                f"{share(r['agreement'])} | {share(r['valid'])} | {share(r['grounding'])} | "
                f"{r['wall_time_s'] or '–'} |"
            )
        lines.append("")
    for v in versus:
        (a, b), (a_stage, b_stage) = v["runs"], v["stages"]
        lines.append(f"{a} ({a_stage}) − {b} ({b_stage}) on {v['set']} instances, paired: {signed(v['difference'])}")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, kind in zip(axes, SETS):
        chosen = [r for r in rows if r["set"] == kind and r["reward"] and r["reward"]["mean"] is not None]
        trainers = list(dict.fromkeys(r["trainer"] for r in chosen))
        for offset, trainer in zip(np.linspace(-0.1, 0.1, len(trainers)), trainers):
            mine = [r for r in chosen if r["trainer"] == trainer]
            if not mine:
                continue
            x = np.arange(len(mine)) + offset
            means = np.array([r["reward"]["mean"] for r in mine])
            lo, hi = np.array([r["reward"]["ci"] for r in mine]).T
            ax.errorbar(x, means, yerr=[means - lo, hi - means], marker="o", capsize=3, label=trainer)
            if len(mine) > len(ax.get_xticks()) or trainer == trainers[0]:  # the longest run names the stages
                ax.set_xticks(np.arange(len(mine)), [r["stage"] for r in mine])
        randoms = [r["random"]["mean"] for r in chosen if r["random"] and r["random"]["mean"] is not None]
        if randoms:
            ax.axhline(np.mean(randoms), color="grey", linestyle=":", label="random matching")
        ax.axhline(
            NO_TALK if kind == "heldout" else HUMANS,
            color="black",
            linestyle="--",
            label="no-talk plan (0.837)" if kind == "heldout" else "humans (0.921)",
        )
        ax.set_title("held-out instances" if kind == "heldout" else "human instances")
        ax.set_ylabel("mean normalized reward")
        ax.legend(fontsize=8)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main(root: Path, out: Path) -> None:
    runs = load(root)
    out.mkdir(parents=True, exist_ok=True)
    crossed = crossplay(root, out)
    if not runs and not crossed:
        sys.exit(f"no run directories (NAME/report/) under {root}")
    rng = np.random.default_rng(SEED)
    rows, versus = stage_rows(runs, rng), head_to_head(runs, rng)
    text = markdown(rows, versus) if runs else ""
    (out / "learning.md").write_text("# Efficacy benchmark\n\n" + text + "\n".join(crossed))
    (out / "learning.json").write_text(json.dumps({"stages": rows, "head_to_head": versus}, indent=1, default=float))
    if runs:
        plot(rows, out / "learning.png")
    print((out / "learning.md").read_text())


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
