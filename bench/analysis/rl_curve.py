"""Reward against GPU minutes for each trainer, from offline_gpu/gpu_rl.sh's evaluations.

    python bench/analysis/rl_curve.py RESULTS          # RESULTS/points.tsv -> rl_curve.{csv,json,md,png}
    python bench/analysis/rl_curve.py RESULTS --online-log VERL_LOG   # and online GRPO's steps
    python bench/analysis/rl_curve.py --plot CSV PNG   # the plot again from a curve's CSV

points.tsv has one evaluation a line: trainer, GPU minutes, split (dev, test or human), and the path of
`selfplay-gen eval`'s metrics.json. Each becomes a row with the mean normalized reward and its 95%
bootstrap interval over instances, and the paired difference against the warm start (trainer `warm`,
minute 0) on the same instances of the same split: the trainers started from it, so the pairing removes
the instances' own difficulty. Trainers are compared at equal GPU minutes by reading the curves, not
at equal steps: a step of online GRPO and an iteration of filtered BC cost different GPU time.

With --online-log (verl's console log of the online GRPO run), its steps go to online_steps.csv and
online_curves.png, and rl_curve.md gets each quantity's trend over the steps: the least-squares slope
a step with its 95% interval and p-value. The training reward is the rollouts' own, on training
instances at the rollout temperature: it shows whether training moves the policy between the few
checkpoints that are evaluated.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from selfplay_gen.iterate.report import console_metrics, plot_curves
from selfplay_gen.stats.metrics import paired_difference

RESAMPLES, SEED = 2000, 0
FIELDS = ("trainer", "gpu_minutes", "split", "model", "instances", "games", "reward", "ci_low", "ci_high")
PAIRED = ("gain_vs_warm", "gain_ci_low", "gain_ci_high")
# online_steps.csv's columns: verl's metric for each
ONLINE = {
    "train_reward": "critic/score/mean",
    "entropy": "actor/entropy",
    "ppo_kl": "actor/ppo_kl",
    "clip_fraction": "actor/pg_clipfrac",
    "grad_norm": "actor/grad_norm",
    "response_tokens": "response_length/mean",
    "step_s": "timing_s/step",
    "rollout_s": "timing_s/gen",
}
TRENDS = ("train_reward", "entropy", "response_tokens", "validation")


class PointsError(ValueError):
    """A line of points.tsv that cannot be read."""


def read_points(path: Path) -> list[dict]:
    """The evaluations of points.tsv, each with its metrics.json read."""
    points = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 4:
            raise PointsError(f"{path}:{number}: expected 4 tab-separated fields, got {len(fields)}: {line!r}")
        trainer, minutes, split, metrics = fields
        try:
            gpu_minutes = float(minutes)
        except ValueError:
            raise PointsError(f"{path}:{number}: field gpu_minutes is not a number: {minutes!r}") from None
        data = json.loads(Path(metrics).read_text())
        ((model, summary),) = data["models"].items()
        rewards = pd.Series(data["per_instance"][model], dtype=float)
        points.append(dict(trainer=trainer, gpu_minutes=gpu_minutes, split=split, model=model, summary=summary,
                           rewards=rewards))  # fmt: skip
    return points


def curve_rows(points: list[dict]) -> list[dict]:
    """One row per evaluation, by trainer then GPU minutes, with the paired gain over the warm start."""
    warm = {p["split"]: p["rewards"] for p in points if p["trainer"] == "warm"}
    rng = np.random.default_rng(SEED)
    rows = []
    for p in sorted(points, key=lambda p: (p["trainer"] != "warm", p["trainer"], p["gpu_minutes"], p["split"])):
        reward = p["summary"]["mean_normalized_reward"]
        row = {
            "trainer": p["trainer"],
            "gpu_minutes": p["gpu_minutes"],
            "split": p["split"],
            "model": p["model"],
            "instances": p["summary"]["instances"],
            "games": p["summary"]["games"],
            "reward": reward["mean"],
            "ci_low": reward["ci"][0],
            "ci_high": reward["ci"][1],
        }
        gain = None
        if p["trainer"] != "warm" and p["split"] in warm:
            gain = paired_difference(p["rewards"], warm[p["split"]], RESAMPLES, rng)
        row.update(dict(zip(PAIRED, [gain["mean"], *gain["ci"]] if gain else [None, None, None])))
        rows.append(row)
    return rows


def online_steps(steps: list[dict[str, float]]) -> pd.DataFrame:
    """verl's console metrics of an online GRPO run as one row a step: the columns of ONLINE, and
    `validation`, verl's own validation reward, at the steps where it ran."""
    rows = []
    for step in steps:
        row: dict = {"step": int(step["step"]), **{column: step.get(name) for column, name in ONLINE.items()}}
        row["validation"] = next(
            (value for name, value in step.items() if name.startswith("val-core/") and name.endswith("reward/mean@1")),
            None,
        )
        rows.append(row)
    return pd.DataFrame(rows, columns=["step", *ONLINE, "validation"])


def trend(frame: pd.DataFrame, column: str) -> dict | None:
    """The least-squares slope of `column` against the step, its 95% interval and p-value, and its mean over
    the first and the last quarter of the steps where it was logged; None below three such steps."""
    data = frame[["step", column]].dropna()
    if len(data) < 3:
        return None
    fit = stats.linregress(data["step"].astype(float), data[column].astype(float))
    half = float(stats.t.ppf(0.975, len(data) - 2) * fit.stderr)
    quarter = max(1, len(data) // 4)
    return {
        "quantity": column,
        "steps": len(data),
        "first": float(data[column].iloc[:quarter].mean()),
        "last": float(data[column].iloc[-quarter:].mean()),
        "slope": float(fit.slope),
        "ci": [float(fit.slope) - half, float(fit.slope) + half],
        "p": float(fit.pvalue),
    }


def trends_markdown(trends: list[dict]) -> str:
    lines = [
        "## Online GRPO's steps (verl's log: online_steps.csv, online_curves.png)\n",
        "| quantity | steps | first quarter | last quarter | slope a step [95% CI] | p |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for t in trends:
        slope = f"{t['slope']:+.3g} [{t['ci'][0]:+.3g}, {t['ci'][1]:+.3g}]"
        lines.append(
            f"| {t['quantity']} | {t['steps']} | {t['first']:.4g} | {t['last']:.4g} | {slope} | {t['p']:.3g} |"
        )
    return "\n".join(lines) + "\n"


def markdown(rows: list[dict]) -> str:
    def cell(value: float | None) -> str:
        return "" if value is None else f"{value:+.3f}"

    lines = [
        "| trainer | GPU min | split | model | instances x games | reward [95% CI] | paired gain vs warm start |",
        "|---|---:|---|---|---|---|---|",
    ]
    for r in rows:
        gain = "" if r["gain_vs_warm"] is None else (
            f"{cell(r['gain_vs_warm'])} [{cell(r['gain_ci_low'])}, {cell(r['gain_ci_high'])}]"
        )  # fmt: skip
        size = f"{r['instances']} x {r['games'] // max(r['instances'], 1)}"
        reward = f"{r['reward']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        lines.append(
            f"| {r['trainer']} | {r['gpu_minutes']:.1f} | {r['split']} | {r['model']} | {size} | {reward} | {gain} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    """Dev reward (interval bars) against GPU minutes, a line per trainer, the warm start at minute 0 of
    each; test readings as open markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    warm = [r for r in rows if r["trainer"] == "warm"]
    for trainer in dict.fromkeys(r["trainer"] for r in rows if r["trainer"] != "warm"):
        for split, style in (("dev", "o-"), ("test", "s")):
            mine = [r for r in [*warm, *rows] if r["split"] == split and r["trainer"] in ("warm", trainer)]
            mine = sorted({id(r): r for r in mine}.values(), key=lambda r: r["gpu_minutes"])
            if split == "test":
                mine = [r for r in mine if r["trainer"] == trainer]
            if not mine:
                continue
            x = np.array([r["gpu_minutes"] for r in mine])
            y = np.array([r["reward"] for r in mine])
            err = [y - np.array([r["ci_low"] for r in mine]), np.array([r["ci_high"] for r in mine]) - y]
            ax.errorbar(x, y, yerr=err, fmt=style, capsize=3, label=f"{trainer} ({split})",
                        mfc="none" if split == "test" else None)  # fmt: skip
    ax.set_xlabel("GPU minutes (training, start-up included)")
    ax.set_ylabel("mean normalized reward")
    ax.set_title("reward against GPU time, from the same warm start")
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def read_csv(path: Path) -> list[dict]:
    numeric = {"gpu_minutes", "reward", "ci_low", "ci_high", *PAIRED}
    rows = []
    for row in csv.DictReader(path.open()):
        out: dict = {k: (float(v) if v else None) if k in numeric else v for k, v in row.items()}
        out["instances"], out["games"] = int(row["instances"]), int(row["games"])
        rows.append(out)
    return rows


def main(results: Path, online_log: Path | None = None) -> None:
    points = results / "points.tsv"
    if not points.exists():
        sys.exit(f"{points}: no evaluations yet (offline_gpu/gpu_rl.sh writes it)")
    rows = curve_rows(read_points(points))
    with (results / "rl_curve.csv").open("w", newline="") as sink:
        writer = csv.DictWriter(sink, fieldnames=[*FIELDS, *PAIRED])
        writer.writeheader()
        writer.writerows(rows)
    summary: dict = {"rows": rows}
    text = "# Reward against GPU minutes\n\n" + markdown(rows)
    if online_log is not None:
        if not online_log.exists():
            sys.exit(f"{online_log}: no such file (verl's console log of the online GRPO run)")
        steps = console_metrics(online_log.read_text(errors="replace").splitlines())
        frame = online_steps(steps)
        frame.to_csv(results / "online_steps.csv", index=False)
        summary["online_trends"] = [t for t in (trend(frame, c) for c in TRENDS) if t]
        text += "\n" + trends_markdown(summary["online_trends"])
        try:
            plot_curves(steps, results / "online_curves.png")
        except ImportError:
            pass
    (results / "rl_curve.json").write_text(json.dumps(summary, indent=1))
    (results / "rl_curve.md").write_text(text)
    try:
        plot(rows, results / "rl_curve.png")
    except ImportError:
        print("matplotlib is not installed: no plot (run with --plot CSV PNG where it is)", file=sys.stderr)
    print(text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument("results", nargs="?", type=Path, help="gpu_rl.sh's ROOT/results, holding points.tsv")
    parser.add_argument("--online-log", type=Path, help="verl's console log of the online GRPO run")
    parser.add_argument("--plot", nargs=2, type=Path, metavar=("CSV", "PNG"), help="the plot again from a curve's CSV")
    args = parser.parse_args()
    if args.plot:
        plot(read_csv(args.plot[0]), args.plot[1])
    elif args.results:
        main(args.results, args.online_log)
    else:
        parser.error("give RESULTS or --plot CSV PNG")
