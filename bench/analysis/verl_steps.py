"""Seconds a training step from verl's console logs, side by side: the ratio of one GPU's step time to
two GPUs', or of one setting's to another's, from the logs the runs left.

    python bench/analysis/verl_steps.py BASELINE.log OTHER.log... [--first 2] [--last N]

- GRPO (`verl.trainer.main_ppo`) prints `timing_s/step` with each step's metrics; its mean over the
  steps from --first to --last is the step time.
- verl's SFT trainer prints no step time; its progress bar does (`Epoch 1/E: ... N/TOTAL [MM:SS<...`:
  N steps done after MM:SS), so the step time is the elapsed time between steps --first and --last,
  over their count (the bar's whole seconds make this exact to about a second over the range). Each
  epoch's bar starts again, so the range lies in the first epoch.
Step 1 carries the warm-up (CUDA graphs, allocator, first compilations), so the default range starts
at step 2. The ratio column is the baseline's step time over each log's: the samples/s ratio when the
runs share their batch size. When every log is GRPO's, a second table says where a step goes: the mean
of each `timing_s/<part>` (gen, old_log_prob, update_actor, update_weights, ...) over the same steps.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from pathlib import Path

GRPO_LINE = re.compile(r"step:(\d+) - (.*)")  # a GRPO step's metrics, its timing_s/<part> among them
TIMING = re.compile(r"timing_s/(\w+):([0-9.]+)")
# the SFT trainer's bar of its first epoch (each epoch's bar starts again at 0)
PROGRESS = re.compile(r"Epoch 1/\d+:[^|]*\|[^|]*\| *(\d+)/(\d+) \[(?:(\d+):)?(\d+):(\d+)<")


@dataclass(frozen=True)
class Steps:
    """What one log says about its steps: where the time came from and the seconds a step."""

    kind: str  # grpo | sft
    first: int
    last: int
    seconds: float  # mean seconds a step over first..last
    parts: dict[str, float] = field(default_factory=dict)  # GRPO: mean seconds of each timing_s/<part>


def read_steps(text: str, first: int = 2, last: int | None = None) -> Steps:
    """The mean step time of the log `text` over steps first..last (None: the last it shows)."""
    timings = {int(step): dict(TIMING.findall(rest)) for step, rest in GRPO_LINE.findall(text)}
    grpo = {step: parts for step, parts in timings.items() if "step" in parts}  # the lines with a step time
    if grpo:
        end = max(grpo) if last is None else last
        chosen = [step for step in range(first, end + 1) if step in grpo]
        if not chosen:
            raise ValueError(f"no GRPO step between {first} and {end} (steps {min(grpo)}-{max(grpo)})")
        names = dict.fromkeys(name for step in chosen for name in grpo[step] if name != "step")
        # a part a step did not run (save_checkpoint, testing) counts 0 s in that step
        parts = {name: sum(float(grpo[step].get(name, 0)) for step in chosen) / len(chosen) for name in names}
        return Steps("grpo", first, end, sum(float(grpo[step]["step"]) for step in chosen) / len(chosen), parts)
    done: dict[int, int] = {}  # steps done -> seconds elapsed, as the progress bar says
    for count, _, hours, minutes, seconds in PROGRESS.findall(text):
        done.setdefault(int(count), int(hours or 0) * 3600 + int(minutes) * 60 + int(seconds))
    if not done:
        raise ValueError("neither GRPO step times (timing_s/step) nor a progress bar (N/TOTAL [MM:SS<)")
    end = max(done) if last is None else last
    if first - 1 not in done or end not in done or end < first:
        shown = f"{min(done)}-{max(done)}"
        raise ValueError(f"the progress bar does not show steps {first - 1} and {end} done (it shows {shown})")
    return Steps("sft", first, end, (done[end] - done[first - 1]) / (end - first + 1))


def table(logs: list[Path], first: int, last: int | None) -> str:
    rows = []
    for log in logs:
        try:
            rows.append((log, read_steps(log.read_text(errors="replace"), first, last)))
        except (OSError, ValueError) as error:
            raise ValueError(f"{log}: {getattr(error, 'strerror', None) or error}") from error
    baseline = rows[0][1].seconds
    lines = ["| log | kind | steps | s a step | ratio |", "|---|---|---|---:|---:|"]
    for log, steps in rows:
        ratio = baseline / steps.seconds if steps.seconds else float("inf")
        lines.append(f"| {log.name} | {steps.kind} | {steps.first}-{steps.last} | {steps.seconds:.2f} | {ratio:.2f}x |")
    if all(steps.kind == "grpo" for _, steps in rows):
        lines += ["", parts_table(rows)]
    return "\n".join(lines)


def parts_table(rows: list[tuple[Path, Steps]]) -> str:
    """Mean seconds of each GRPO part, a column a log, with the baseline's over each other log's."""
    names = list(dict.fromkeys(name for _, steps in rows for name in steps.parts))
    head = "| part (s) | " + " | ".join(log.name for log, _ in rows) + " |"
    lines = [head, "|---|" + "---:|" * len(rows)]
    for name in names:
        base = rows[0][1].parts.get(name, 0.0)
        cells = [f"{base:.2f}"]
        for _, steps in rows[1:]:
            value = steps.parts.get(name, 0.0)
            cells.append(f"{value:.2f} ({base / value:.2f}x)" if value else f"{value:.2f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", type=Path, nargs="+", help="verl console logs; the first is the baseline")
    parser.add_argument("--first", type=int, default=2, help="first step counted (step 1 is warm-up)")
    parser.add_argument("--last", type=int, default=None, help="last step counted [default: the log's last]")
    args = parser.parse_args()
    try:
        print(table(args.logs, args.first, args.last))
    except ValueError as error:
        parser.error(str(error))


if __name__ == "__main__":
    main()
