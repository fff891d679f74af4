"""verl's metrics per training step as a table, from its console log: what a results directory shows of a run
whose stage did not finish (a lease that ended mid-iteration leaves no train/metrics.json, only verl.log).

    python bench/analysis/steps_table.py RUN/iter_001/train/verl.log > online_steps.tsv
    python bench/analysis/steps_table.py verl.log --columns games/agreed/mean,timing_s/step --markdown

Each row is a step that logged `timing_s/step` (verl's validation before the first step logs none); a column
is a metric as verl names it (`selfplay_gen.iterate.report.console_metrics` reads them). The default columns
are an online GRPO run's: entropy, the step's games' reward and what they did (`games/<measure>/mean`),
response length and turns, the step's seconds and its parts, and the validation's reward and measures where
the step validated. Two columns are ratios of two metrics (`RATIOS`): the reward when agreed, the games' mean
reward over their agreement rate, which is the agreed games' own mean since a game without agreement scores 0.

    python bench/analysis/steps_table.py RUN/iter_001/train/verl.log --kuhn > kuhn_steps.tsv

`--kuhn`: a Kuhn Poker run's strategy at each step instead, the share of the aggressive move at each of the
twelve information sets in the step's self-play games and that strategy's exact chips a hand against the
equilibrium and its best response (`selfplay_gen.games.textarena.kuhn_strategy`), from the counts the online
trainer logs (games/kuhn_<set>_moves/mean and _aggressive/mean). The games are the policy's before the step's
update, both seats pooled, at the rollout temperature: the curve between the checkpoints, whose evaluations
against the fixed references are the readings with intervals.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from selfplay_gen.games import UNNAMED
from selfplay_gen.games.textarena.kuhn_strategy import NODES, VALUES, node_name, values
from selfplay_gen.iterate.report import console_metrics, step_strategy
from selfplay_gen.stats.report import markdown_table
from selfplay_gen.verl import STEP_MEASURES, data_source

SOURCE = data_source(UNNAMED)  # the matching game's validation rows
VALIDATION = f"val-aux/{SOURCE}"
# (short name, metric)
COLUMNS = (
    ("entropy", "actor/entropy"),
    ("score_mean", "critic/score/mean"),  # the training reward, own-plan term included where it is weighted
    ("reward", f"{STEP_MEASURES}/normalized_reward/mean"),  # the game's own reward
    ("agreed", f"{STEP_MEASURES}/agreed/mean"),
    ("agreed_reward", "agreed_reward"),
    ("invalid", f"{STEP_MEASURES}/invalid/mean"),
    ("stated_cells", f"{STEP_MEASURES}/stated_cells/mean"),
    ("proposals", f"{STEP_MEASURES}/proposals/mean"),
    ("own_plan_share", f"{STEP_MEASURES}/own_plan_share/mean"),
    ("response_length_mean", "response_length/mean"),
    ("num_turns_mean", "num_turns/mean"),
    ("step_s", "timing_s/step"),
    ("gen_s", "timing_s/gen"),
    ("update_actor_s", "timing_s/update_actor"),
    ("validation_reward", f"val-core/{SOURCE}/reward/mean@1"),
    ("validation_normalized_reward", f"{VALIDATION}/normalized_reward/mean@1"),
    ("validation_agreed", f"{VALIDATION}/agreed/mean@1"),
    ("validation_agreed_reward", "validation_agreed_reward"),
    ("validation_invalid", f"{VALIDATION}/invalid/mean@1"),
    ("validation_stated_cells", f"{VALIDATION}/stated_cells/mean@1"),
    ("validation_proposals", f"{VALIDATION}/proposals/mean@1"),
    ("validation_own_plan_share", f"{VALIDATION}/own_plan_share/mean@1"),
)


# a column that is one metric over another: (numerator, denominator)
RATIOS = {
    "agreed_reward": (f"{STEP_MEASURES}/normalized_reward/mean", f"{STEP_MEASURES}/agreed/mean"),
    "validation_agreed_reward": (f"{VALIDATION}/normalized_reward/mean@1", f"{VALIDATION}/agreed/mean@1"),
}


def table(lines: list[str], columns: tuple[tuple[str, str], ...] = COLUMNS) -> list[list[str]]:
    """The header and one row per training step: each metric to four significant digits, blank where the
    step did not log it (or, for a ratio, either part or a denominator of 0)."""
    rows = [["step", *(short for short, _ in columns)]]
    for step in console_metrics(lines):
        if "timing_s/step" not in step:
            continue
        for name, (numerator, denominator) in RATIOS.items():
            if step.get(numerator) is not None and step.get(denominator):
                step[name] = step[numerator] / step[denominator]
        cells = [f"{step[metric]:.4g}" if metric in step else "" for _, metric in columns]
        rows.append([f"{step['step']:g}", *cells])
    return rows


def kuhn_table(lines: list[str]) -> list[list[str]]:
    """The header and one row per training step that logged Kuhn Poker's counts (`report.step_strategy`): the
    strategy's four values (`kuhn_strategy.VALUES`), then its share at each information set; blank where the
    step's games never reached the set, or a set the value needs (a policy that always opens with a bet never
    shows, in self-play, what it does as the second after a check)."""
    rows = [["step", *VALUES, *(node_name(node) for node in NODES)]]
    for step in console_metrics(lines):
        strategy = step_strategy(step) if "timing_s/step" in step else None
        if strategy is not None:
            worth = values(strategy)
            shares = ["" if np.isnan(share) else f"{share:.3f}" for share in strategy]
            cells = ["" if np.isnan(worth[key]) else f"{worth[key]:.4f}" for key in VALUES]
            rows.append([f"{step['step']:g}", *cells, *shares])
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path, help="verl's console log (a stage's train/verl.log)")
    parser.add_argument(
        "--columns", help="metrics to show, comma-separated, as verl names them [default: an online GRPO run's]"
    )
    parser.add_argument("--markdown", action="store_true", help="a Markdown table instead of tab-separated values")
    parser.add_argument("--kuhn", action="store_true", help="Kuhn Poker's strategy and its worth at each step")
    args = parser.parse_args(argv)
    try:
        lines = args.log.read_text(errors="replace").splitlines()
    except OSError as error:
        parser.error(f"cannot read {args.log}: {error.strerror}")
    if args.kuhn and args.columns:
        parser.error("--kuhn shows its own columns: leave out --columns")
    columns = tuple((metric, metric) for metric in args.columns.split(",")) if args.columns else COLUMNS
    rows = kuhn_table(lines) if args.kuhn else table(lines, columns)
    if len(rows) == 1:
        logged = "Kuhn Poker's information-set counts (games/kuhn_*)" if args.kuhn else "timing_s/step"
        sys.exit(f"{args.log}: no training step logged {logged}")
    print(markdown_table(rows[0], rows[1:]) if args.markdown else "\n".join("\t".join(row) for row in rows))


if __name__ == "__main__":
    main()
