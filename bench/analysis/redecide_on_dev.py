"""The settings that test-split (or human-instance) readings helped choose, decided again from the
development readings kept beside them (bench/results/test_split_hygiene/).

    python bench/analysis/redecide_on_dev.py [RESULTS_DIR] > bench/results/test_split_hygiene/redecide.md
    python bench/analysis/redecide_on_dev.py --widths [RESULTS_DIR] > .../test_split_hygiene/interval_widths.md

For each choice, every committed pair of development evaluations that bears on it, as a paired
difference over the instances both played (B minus A, 95% bootstrap interval over instances, as
`paired.py` computes it); and for the promotion rule, every committed promotion match on development
instances judged by the rule as it is (paired by instance) and as it was before (intervals side by
side). Nothing here plays a game: it reads what `bench/results/` keeps.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from selfplay_gen.evaluation.splits import DEV
from selfplay_gen.league.promotion import promote
from selfplay_gen.stats.metrics import paired_difference

RESULTS = Path(__file__).resolve().parents[1] / "results"
RESAMPLES = 2000


@dataclass(frozen=True)
class Pair:
    """B against A on the development instances both evaluations played."""

    what: str
    a: str  # metrics.json of A, relative to the results folder
    b: str


@dataclass(frozen=True)
class Choice:
    title: str
    pairs: tuple[Pair, ...]


CHOICES = (
    Choice(
        "Default trainer (TRAINER=filtered-bc, commit c1f1366): GRPO minus filtered BC",
        (
            Pair(
                "135M, embedded by-reviewer warm start, one iteration each: offline GRPO - filtered BC",
                "learning/h100_2026-11-22_s4/fbc_lr1e-3/iter_001/eval/heldout/metrics.json",
                "learning/h100_2026-11-22_s4/grpo/iter_001/eval/heldout/metrics.json",
            ),
            Pair(
                "135M records warm start, 16 GPU min each: online GRPO step 29 - filtered BC iter 4",
                "rl_equal_time_h100x4_2026-11-27/fbc/iter_004/dev/metrics.json",
                "rl_equal_time_h100x4_2026-11-27/online/step_29/dev/metrics.json",
            ),
            Pair(
                "135M shuffled warm start, 8 GPU min each (FBC at lr 3e-5 by mistake): online step 8 - FBC iter 2",
                "rl_x4_h100_2026-11-27/fbc/iter_002/dev/metrics.json",
                "rl_x4_h100_2026-11-27/online/step_8/dev/metrics.json",
            ),
            Pair(
                "Qwen round 1, 10 GPU min each: offline GRPO iter 1 - filtered BC iter 1",
                "qwen_rl_h100x4_2026-11-27/fbc/iter_001/dev/metrics.json",
                "qwen_rl_h100x4_2026-11-27/grpo/iter_001/dev/metrics.json",
            ),
            Pair(
                "Qwen round 1: online GRPO step 4 - filtered BC iter 1",
                "qwen_rl_h100x4_2026-11-27/fbc/iter_001/dev/metrics.json",
                "qwen_rl_h100x4_2026-11-27/online/step_4/dev/metrics.json",
            ),
            Pair(
                "Qwen round 2: offline GRPO iter 1 - filtered BC iter 2",
                "qwen_rl2_h100x4_2026-11-27/fbc/iter_002/dev/metrics.json",
                "qwen_rl2_h100x4_2026-11-27/grpo/iter_001/dev/metrics.json",
            ),
            Pair(
                "Qwen round 2: online GRPO step 6 - filtered BC iter 2",
                "qwen_rl2_h100x4_2026-11-27/fbc/iter_002/dev/metrics.json",
                "qwen_rl2_h100x4_2026-11-27/online/step_6/dev/metrics.json",
            ),
        ),
    ),
    Choice(
        "Warm-start teacher plans for the 135M model (default by-reviewer-records; README ranks five on test): "
        "each plan's warm start - the by-reviewer-records warm start",
        tuple(
            Pair(plan, "records_h100_2026-11-25/warm_eval/dev/metrics.json", path)
            for plan, path in (
                ("shuffled-records", "shuffled_h100_2026-11-27/warm_eval/dev/metrics.json"),
                ("ranked-records", "rl_x2_h100_2026-11-27b/ranked_warm/dev/metrics.json"),
                ("sorted-records", "rl_x4_h100_2026-11-27/sorted_warm/dev/metrics.json"),
                ("chained-records", "rl_x4_h100_2026-11-27/chained_warm/dev/metrics.json"),
            )
        )
        + (
            Pair(
                "by-reviewer (plain lines; the embedded warm start before commit 63d1bfa)",
                "records_h100_2026-11-25/warm_eval/dev/metrics.json",
                "rl_h100_2026-11-25/warm_eval/dev/metrics.json",
            ),
        ),
    ),
    Choice(
        "Qwen's teacher plan and warm start (chosen on the human instances)",
        (
            Pair(
                "scripted teachers: by-score - by-reviewer (commit e1d0b33 cites human 0.888 against 0.820)",
                "qwen1.5b_by_score_h100_2026-11-24/teacher/by-reviewer/heldout/metrics.json",
                "qwen1.5b_by_score_h100_2026-11-24/teacher/by-score/heldout/metrics.json",
            ),
            Pair(
                "the same teachers on 128 development instances (played for this audit, on the CPU)",
                "test_split_hygiene/teacher_dev/by-reviewer/metrics.json",
                "test_split_hygiene/teacher_dev/by-score/metrics.json",
            ),
            Pair(
                "Qwen warm starts on 4,096 games: sampled-by-score - by-score (human 0.877 against 0.871)",
                "qwen_x4_h100_2026-11-27/qwen_byscore_warm/dev/metrics.json",
                "qwen_x4_h100_2026-11-27/qwen_sampled_warm/dev/metrics.json",
            ),
        ),
    ),
    Choice(
        "Qwen's start of each round (round 2 from round 1's filtered BC, round 3 from round 2's), "
        "by the human readings: the other arms - filtered BC",
        (
            Pair(
                "round 1: offline GRPO - filtered BC (the start chosen for round 2)",
                "qwen_rl_h100x4_2026-11-27/fbc/iter_001/dev/metrics.json",
                "qwen_rl_h100x4_2026-11-27/grpo/iter_001/dev/metrics.json",
            ),
            Pair(
                "round 1: online GRPO - filtered BC",
                "qwen_rl_h100x4_2026-11-27/fbc/iter_001/dev/metrics.json",
                "qwen_rl_h100x4_2026-11-27/online/step_4/dev/metrics.json",
            ),
            Pair(
                "round 2: filtered BC iter 1 - iter 2 (iter 2 chosen for round 3)",
                "qwen_rl2_h100x4_2026-11-27/fbc/iter_002/dev/metrics.json",
                "qwen_rl2_h100x4_2026-11-27/fbc/iter_001/dev/metrics.json",
            ),
            Pair(
                "round 2: offline GRPO - filtered BC iter 2",
                "qwen_rl2_h100x4_2026-11-27/fbc/iter_002/dev/metrics.json",
                "qwen_rl2_h100x4_2026-11-27/grpo/iter_001/dev/metrics.json",
            ),
            Pair(
                "round 2: online GRPO - filtered BC iter 2",
                "qwen_rl2_h100x4_2026-11-27/fbc/iter_002/dev/metrics.json",
                "qwen_rl2_h100x4_2026-11-27/online/step_6/dev/metrics.json",
            ),
        ),
    ),
)

# promotion matches played on development instances whose metrics pair the two self-plays by instance
PROMOTION_MATCHES = (
    ("negotiation/qwen_self_play_h100x4_2026-11-28/qself35/crossplay_iter_1__warm/metrics.json", "iter_1", "warm"),
    ("negotiation/qwen_self_play_h100x4_2026-11-28/qself35kl/crossplay_iter_1__warm/metrics.json", "iter_1", "warm"),
    ("negotiation/qwen_self_play_h100x4_2026-11-28/qself35lo/crossplay_iter_1__warm/metrics.json", "iter_1", "warm"),
    ("negotiation/qwen_self_play_h100x4_2026-11-28/qself100/crossplay_iter_1__warm/metrics.json", "iter_1", "warm"),
    ("negotiation/qwen_league_iter3_h200x2_2026-11-28/qself35/crossplay_iter_3__warm/metrics.json", "iter_3", "warm"),
    (
        "negotiation/qwen_league_iter3_h200x2_2026-11-28/qself35past/crossplay_iter_3__warm/metrics.json",
        "iter_3",
        "warm",
    ),
)


# one model read at two sizes: development (64 x 8 or 32 x 8) and test (256 x 4)
SAME_MODEL_TWO_SIZES = (
    (
        "135M by-reviewer-records warm start",
        "records_h100_2026-11-25/warm_eval/dev",
        "records_h100_2026-11-25/warm_eval/test",
    ),
    (
        "135M ranked-records warm start",
        "rl_x2_h100_2026-11-27b/ranked_warm/dev",
        "rl_x2_h100_2026-11-27b/ranked_warm/test",
    ),
    (
        "135M sorted-records warm start",
        "rl_x4_h100_2026-11-27/sorted_warm/dev",
        "rl_x4_h100_2026-11-27/sorted_warm/test",
    ),
    (
        "135M chained-records warm start",
        "rl_x4_h100_2026-11-27/chained_warm/dev",
        "rl_x4_h100_2026-11-27/chained_warm/test",
    ),
    (
        "135M filtered BC, iteration 4",
        "rl_equal_time_h100x4_2026-11-27/fbc/iter_004/dev",
        "rl_equal_time_h100x4_2026-11-27/fbc/iter_004/test",
    ),
    (
        "Qwen 1.5B round 2's filtered BC",
        "qwen_rl2_h100x4_2026-11-27/fbc/iter_002/dev",
        "qwen_rl3_h100x4_2026-11-28/start/test",
    ),
    (
        "Qwen 1.5B round 3's filtered BC",
        "qwen_rl3_h100x4_2026-11-28/fbc/iter_001/dev",
        "qwen_rl3_h100x4_2026-11-28/fbc/iter_001/test",
    ),
)


def on_dev(key: str) -> bool:
    """Whether a `per_instance` key names a development seed (`seed-1000000007`)."""
    prefix, _, number = key.partition("-")
    return prefix == "seed" and number.isdigit() and int(number) in DEV


def per_instance(path: Path) -> tuple[str, dict, pd.Series]:
    """(label, summary, per-instance rewards) of a one-model development evaluation."""
    data = json.loads(path.read_text())
    ((label, summary),) = data["models"].items()
    rewards = pd.Series(data["per_instance"][label], dtype=float)
    outside = [key for key in rewards.index if not on_dev(key)]
    if outside:
        raise SystemExit(f"{path}: field per_instance holds {outside[0]!r}, not a development instance")
    return label, summary, rewards


def interval(share: dict, digits: int = 3, sign: str = "") -> str:
    low, high = share["ci"]
    return f"{share['mean']:{sign}.{digits}f} [{low:{sign}.{digits}f}, {high:{sign}.{digits}f}]"


def pair_row(results: Path, pair: Pair) -> str:
    (_, a_summary, a), (_, b_summary, b) = per_instance(results / pair.a), per_instance(results / pair.b)
    diff = paired_difference(b, a, RESAMPLES, np.random.default_rng(0))
    if diff is None:
        raise SystemExit(f"{pair.a} and {pair.b}: no development instance in common")
    low, high = diff["ci"]
    verdict = "B ahead" if low > 0 else "A ahead" if high < 0 else "no difference"
    size = f"{diff['instances']} x {b_summary['games'] // b_summary['instances']}"
    return (
        f"| {pair.what} | {interval(a_summary['mean_normalized_reward'])} | "
        f"{interval(b_summary['mean_normalized_reward'])} | {size} | {interval(diff, sign='+')} | {verdict} |"
    )


def choice_table(results: Path, choice: Choice) -> str:
    lines = [
        f"## {choice.title}",
        "",
        "| B against A | A on dev | B on dev | instances x games | B - A, paired | by its interval |",
        "|---|---|---|---|---|---|",
    ]
    lines += [pair_row(results, pair) for pair in choice.pairs]
    files = sorted({p for pair in choice.pairs for p in (pair.a, pair.b)})
    return "\n".join([*lines, "", "Files: " + ", ".join(f"`{f}`" for f in files)])


def side_by_side(metrics: dict) -> dict:
    """The metrics without their instance pairing: promotion then compares the two intervals side by
    side, the rule before commit 95be622."""
    return {key: value for key, value in metrics.items() if key != "paired_self_play"}


def promotion_table(results: Path) -> str:
    lines = [
        "## Promotion's cooperation check (commit 95be622): the rule paired by instance against intervals side by side",
        "",
        "| match (development instances) | decided-game win share | joint share: candidate / previous | "
        "paired change | paired rule | side-by-side rule |",
        "|---|---|---|---|---|---|",
    ]
    for name, candidate, previous in PROMOTION_MATCHES:
        metrics = json.loads((results / name).read_text())
        now, before = promote(metrics, candidate, previous), promote(side_by_side(metrics), candidate, previous)
        models = metrics["models"]
        ((diff, instances),) = [
            (p["joint_share"], p["instances"])
            for p in metrics["paired_self_play"]
            if set(p["models"]) == {candidate, previous}
        ]
        if metrics["paired_self_play"][0]["models"][0] != candidate:
            diff = {"mean": -diff["mean"], "ci": [-diff["ci"][1], -diff["ci"][0]]}
        shares = f"{interval(models[candidate]['joint_share'])} / {interval(models[previous]['joint_share'])}"
        win = f"{now.win_share:.3f} [{now.ci[0]:.3f}, {now.ci[1]:.3f}]" if now.ci else "-"
        lines.append(
            f"| `{name}` ({candidate} vs {previous}, {instances} instances) | {win} | {shares} | "
            f"{interval(diff, sign='+')} | {'promoted' if now.promoted else 'kept out'} | "
            f"{'promoted' if before.promoted else 'kept out'} |"
        )
    return "\n".join(lines)


def widths_table(results: Path) -> str:
    """How much narrower an interval gets from the smaller reading to the larger one of the same model,
    beside what more instances alone and more games alone would give (the square roots of the ratios)."""
    lines = [
        "# What sets an interval's width: instances, not games",
        "",
        "The same model read at two sizes. If an interval's width followed the games, widening from the small",
        "reading to the large one would be the square root of the games' ratio; if it followed the instances, of",
        "the instances' ratio (games of one instance are alike, so more of them add little).",
        "",
        "| model | small: size, width | large: size, width | width ratio | sqrt(instances ratio) | sqrt(games ratio) |",
        "|---|---|---|---:|---:|---:|",
    ]
    for model, small, large in SAME_MODEL_TWO_SIZES:
        read = []
        for folder in (small, large):
            data = json.loads((results / folder / "metrics.json").read_text())
            ((_, summary),) = data["models"].items()
            low, high = summary["mean_normalized_reward"]["ci"]
            read.append((summary["instances"], summary["games"], high - low))
        (n_small, g_small, w_small), (n_large, g_large, w_large) = read
        by_instances, by_games = (n_large / n_small) ** 0.5, (g_large / g_small) ** 0.5
        lines.append(
            f"| {model} | {n_small} x {g_small // n_small}: {w_small:.3f} | {n_large} x {g_large // n_large}: "
            f"{w_large:.3f} | {w_small / w_large:.2f} | {by_instances:.2f} | {by_games:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if "--widths" in argv:
        paths = [a for a in argv if a != "--widths"]
        print(widths_table(Path(paths[0]) if paths else RESULTS))
        return
    results = Path(argv[0]) if argv else RESULTS
    print("# Choices made with test or human readings, decided again on development instances\n")
    print(f"Written by `python bench/analysis/redecide_on_dev.py` from the evaluations under `{RESULTS.name}/`.")
    print("B - A is paired by instance over the development instances both played (95% bootstrap interval")
    print(f"over instances, {RESAMPLES} resamples, seed 0); 'no difference': the interval holds zero.\n")
    for choice in CHOICES:
        print(choice_table(results, choice) + "\n")
    print(promotion_table(results))


if __name__ == "__main__":
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__.strip())
        sys.exit(0)
    main(sys.argv[1:])
