"""Where a profiled training step's time goes, from the Chrome trace torch's profiler writes.

    python bench/analysis/trace_summary.py TRACE.json[.gz] [--top N]

verl writes such a trace with `profiler.enable=True profiler.tool=torch trainer.profile_interval=[A,B]`
(offline_gpu/gpu_speed.sh `sft-profile`). A trace of one step is tens of megabytes; this prints what
decides the step's time in a few dozen lines:
- the span of the trace, the share of it in which the GPU ran at least one kernel (the union of the
  kernels' intervals), and the number of kernels and CPU operators;
- the CPU operators, the labelled ranges (`record_function`: a trainer's micro-batches, FSDP's hooks)
  and the GPU kernels with the most total time, with their counts.
A step that is mostly GPU idle and many short kernels is bound by launches and Python, not arithmetic;
the ranges say whose Python (FSDP's hooks once per wrapped module and micro-batch, for example).
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import pandas as pd

KERNEL_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
NAME_WIDTH = 110  # kernel names of templated code run to thousands of characters


def load_events(path: Path) -> pd.DataFrame:
    """The trace's complete events (`ph: X`) as rows of category, name, start and duration (µs)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        trace = json.load(handle)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    rows = [
        (str(e.get("cat", "")), str(e.get("name", "")), float(e["ts"]), float(e.get("dur", 0.0)))
        for e in events
        if e.get("ph") == "X" and "ts" in e
    ]
    return pd.DataFrame(rows, columns=["cat", "name", "ts", "dur"])


def busy_us(intervals: pd.DataFrame) -> float:
    """The length of the union of [ts, ts + dur) intervals: time with at least one of them running."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(zip(intervals["ts"], intervals["ts"] + intervals["dur"])):
        if start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def top(events: pd.DataFrame, n: int) -> pd.DataFrame:
    """Names by total duration: total ms, count, mean µs."""
    grouped = events.groupby("name")["dur"].agg(["sum", "count", "mean"]).sort_values("sum", ascending=False)
    grouped["sum"] = grouped["sum"] / 1000
    grouped.index = [name if len(name) <= NAME_WIDTH else name[: NAME_WIDTH - 1] + "…" for name in grouped.index]
    return grouped.head(n).rename(columns={"sum": "total ms", "count": "count", "mean": "mean µs"}).round(1)


def summary(events: pd.DataFrame, n: int = 15) -> str:
    kernels = events[events["cat"].isin(KERNEL_CATEGORIES)]
    operators = events[events["cat"] == "cpu_op"]
    ranges = events[events["cat"] == "user_annotation"]
    span = (events["ts"] + events["dur"]).max() - events["ts"].min() if len(events) else 0.0
    busy = busy_us(kernels) if len(kernels) else 0.0
    lines = [
        f"span {span / 1000:.1f} ms; GPU busy {busy / 1000:.1f} ms ({busy / span if span else 0:.0%}); "
        f"{len(kernels)} kernels, {len(operators)} CPU operators",
        "",
        "CPU operators by total time (nested operators count in their parents too):",
        top(operators, n).to_string(),
        "",
        "Labelled ranges (record_function) by total time:",
        top(ranges, n).to_string() if len(ranges) else "(none)",
        "",
        "GPU kernels by total time:",
        top(kernels, n).to_string(),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", type=Path, help="a Chrome trace (.json or .json.gz) of torch's profiler")
    parser.add_argument("--top", type=int, default=15, help="rows of each table")
    args = parser.parse_args()
    print(summary(load_events(args.trace), args.top))


if __name__ == "__main__":
    main()
