"""League arms side by side after their first iteration: each candidate's promotion match against the
previous checkpoint (self-play cooperation of both, paired by instance, and the decided-game win share per
seat order) and what it trained on (groups that differ, rows, optimizer steps, entropy, KL loss, time).

    python bench/analysis/league_arms.py RESULTS ARM [ARM ...] [--iteration N]

RESULTS/ARM is one run's folder as `bench/results/negotiation/` keeps it: crossplay_iter_N__PREVIOUS/
metrics.json (the promotion match), iter_00N/{promotion.json, convert_summary.json, train_metrics.json,
timings.json}. A match whose metrics did not come back shows its decision's win share alone (stderr names the
file). Markdown tables go to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def span(share: dict, scale: float = 100, sign: str = "") -> str:
    lo, hi = share["ci"]
    return f"{scale * share['mean']:{sign}.1f} [{scale * lo:{sign}.1f}, {scale * hi:{sign}.1f}]"


def read(path: Path) -> dict | list:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise SystemExit(f"{path}: {error}") from None


def match_row(arm: Path, n: int) -> str:
    """The promotion match of iteration `n`'s candidate: cooperation of both, paired, and win shares."""
    decision = read(arm / f"iter_{n:03d}" / "promotion.json")
    candidate, previous = decision["candidate"], decision["previous"]
    if decision["promoted"]:
        verdict = "promoted"
    else:
        verdict = "kept out: cooperation" if decision["ci"] and decision["ci"][0] > 0.5 else "kept out: win share"
    match_metrics = arm / f"crossplay_{candidate}__{previous}" / "metrics.json"
    if not match_metrics.exists():  # the match's games did not come back: its decision holds the win share
        print(f"{match_metrics}: missing; the row shows {candidate}'s decision alone", file=sys.stderr)
        both = span({"mean": decision["win_share"], "ci": decision["ci"]})
        return f"| `{arm.name}` | – | – | – | – | – | – | **{both}** | {verdict} |"
    metrics = read(match_metrics)
    ours, theirs = metrics["models"][candidate], metrics["models"][previous]
    (paired,) = [p for p in metrics["paired_self_play"] if p["models"] == [candidate, previous]]
    (match,) = [c for c in metrics["cross_play"] if c["models"] == [candidate, previous]]
    win = [span(match[order]["decided_win_share"]) for order in ("seat0", "seat1", "both")]
    agreement = f"{100 * ours['agreement_rate']['mean']:.1f} / {100 * theirs['agreement_rate']['mean']:.1f}"
    return (
        f"| `{arm.name}` | {span(ours['joint_share'])} | {span(theirs['joint_share'])} | "
        f"{span(paired['joint_share'], sign='+')} | {agreement} | {win[0]} | {win[1]} | **{win[2]}** | {verdict} |"
    )


def training_row(arm: Path, n: int) -> str:
    """What iteration `n` trained on and how long it took."""
    stage = arm / f"iter_{n:03d}"
    summary = read(stage / "convert_summary.json")
    steps = [s for s in read(stage / "train_metrics.json") if "actor/entropy" in s]
    timings = read(stage / "timings.json")["steps"]
    (train,) = [t for t in timings if t["step"].startswith("train")]
    grpo, split = summary["grpo"], summary["split"]
    kl = steps[-1].get("actor/kl_loss")
    return (
        f"| `{arm.name}` | {summary['records']} | {grpo['rows'] + grpo['beyond_max_groups']} / {grpo['constant']} | "
        f"{split['train']['rows']} + {split['val']['rows']} | {len(steps)} | "
        f"{steps[0]['actor/entropy']:.4f} → {steps[-1]['actor/entropy']:.4f} | {'–' if kl is None else f'{kl:.4f}'} | "
        f"{train['startup_s']:.0f} + {train['work_s']:.0f} | {sum(t['startup_s'] + t['work_s'] for t in timings):.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("arms", nargs="+")
    parser.add_argument("--iteration", type=int, default=1)
    args = parser.parse_args()
    arms, n = [args.results / arm for arm in args.arms], args.iteration
    print(
        "| arm | joint share, candidate | joint share, previous | paired (points) | agreement % (candidate / previous) "
        "| decided-game win share, candidate in seat 0 | in seat 1 | both | decision |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for arm in arms:
        print(match_row(arm, n))
    print()
    print(
        "| arm | training games | groups that differ / constant | rows train + val | steps | entropy (nats a token) "
        "| KL loss, last step | verl start-up + training (s) | iteration's steps (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for arm in arms:
        print(training_row(arm, n))


if __name__ == "__main__":
    main()
