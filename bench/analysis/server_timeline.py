"""Where a phase's wall time went on the server's side, from SGLang's own batch log lines: the profile of
the gap between bench/generation.py's runner and its saturation flood.

SGLang logs each prefill batch, and every `decode_log_interval` decode steps, with the requests it is
running (`#running-req`). Over a phase's window (its start and wall time: generation.json's
`started_at` and `wall_s`, or given), the wall time splits into

- start: until the server first runs 1% of its peak running requests (nothing sent yet: the client
  setting games up and connecting; a phase that never gets there, like one game at a time, is all start),
- ramp: until it first runs 90% of the peak,
- full: from then until the last batch at 90% or more,
- drain: until the running requests first fall to 1% of the peak again,
- tail: the rest, a few requests at a time (for the runner, the longest games' last turns one after
  another).

The peak is the most requests the log shows running at once, the server's capacity as it ran; a phase
that never holds 90% of it (a runner with fewer games than that) has no full part, and its most running
requests say how far it got. The log
stamps whole seconds, so each part is exact to about a second; the seconds in which a window starts and
ends are left out, since their lines may belong to the phases before and after. Mean running is over the window's
seconds, each second holding the mean of its batches' running requests, or the last one seen before it.
One server's log: with several (DP > 1), read each worker's own.

`--stalls` lists instead the stalls of the whole log: a batch line with requests running and none after it
for at least `--stall-s` seconds. A busy server logs a decode batch every few seconds at most (every
`decode_log_interval` steps), so a longer silence with requests in it is time its scheduler ran nothing.

    python bench/analysis/server_timeline.py sglang.log --generation generation.json
    python bench/analysis/server_timeline.py sglang.log --window "runner=2026-11-26 08:08:27+196.8"
    python bench/analysis/server_timeline.py sglang.log --stalls
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

# "[2026-11-26 08:09:24] Decode batch, #running-req: 4085, ..." (TP/DP ranks may follow the time)
BATCH = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^\]]*\] (?:Prefill|Decode) batch.*?#running-req: (\d+)")
PHASES = ("sequential", "concurrent", "single_request", "saturation")  # generation.json's, in the order run
PARTS = ("start", "ramp", "full", "drain", "tail")


@dataclass(frozen=True)
class Batch:
    at: datetime
    running: int


@dataclass(frozen=True)
class Window:
    name: str
    start: datetime
    wall_s: float


def read_batches(lines: Iterable[str]) -> list[Batch]:
    return [Batch(datetime.fromisoformat(m.group(1)), int(m.group(2))) for line in lines if (m := BATCH.match(line))]


def split(batches: list[Batch], window: Window, peak: int) -> dict[str, float]:
    """Seconds of each part of `window` (see the module docstring), its most running requests, and its
    mean running / peak."""
    end = window.start + timedelta(seconds=window.wall_s)
    # the whole seconds of the log that lie inside the window: a line stamped with the second in which the
    # window starts or ends may belong to the phase before or after
    first = window.start.replace(microsecond=0) + timedelta(seconds=1 if window.start.microsecond else 0)
    last = end.replace(microsecond=0)
    inside = [b for b in batches if first <= b.at < last]
    above = [b.at for b in inside if b.running >= 0.01 * peak]
    full = [b.at for b in inside if b.running >= 0.9 * peak]
    busy = above[0] if above else end
    filled, emptied = (full[0], full[-1]) if full else (busy, busy)
    low = next((b.at for b in inside if b.at >= emptied and b.running < 0.01 * peak), end)
    marks = [window.start, busy, filled, emptied, low, end]  # in order: every batch inside lies after the start
    parts = {name: (b - a).total_seconds() for name, (a, b) in zip(PARTS, zip(marks, marks[1:]))}
    most = max((b.running for b in inside), default=0)
    return {**parts, "most running": most, "mean running / peak": _mean_running(inside, first, last) / peak}


def _mean_running(inside: list[Batch], start: datetime, end: datetime) -> float:
    by_second: dict[datetime, list[int]] = {}
    for b in inside:
        by_second.setdefault(b.at, []).append(b.running)
    seconds, level, total = 0, 0.0, 0.0
    at = start
    while at < end:
        if at in by_second:
            level = sum(by_second[at]) / len(by_second[at])
        total, seconds = total + level, seconds + 1
        at += timedelta(seconds=1)
    return total / max(seconds, 1)


def stalls(batches: list[Batch], min_s: float) -> list[tuple[Batch, float]]:
    """Each batch that had requests running and was followed by no batch for at least `min_s` seconds, with
    the seconds until the next one."""
    return [
        (b, gap)
        for b, after in zip(batches, batches[1:])
        if b.running > 0 and (gap := (after.at - b.at).total_seconds()) >= min_s
    ]


def stalls_table(found: list[tuple[Batch, float]]) -> str:
    lines = ["| from | seconds | running |", "|---|---:|---:|"]
    lines += [f"| {b.at:%Y-%m-%d %H:%M:%S} | {gap:.0f} | {b.running} |" for b, gap in found]
    return "\n".join(lines)


def windows_of(generation: dict) -> list[Window]:
    """The timed phases of a generation.json (results of bench/generation.py) that say when they began."""
    results = generation.get("results", generation)
    return [
        Window(name, datetime.fromisoformat(r["started_at"]), float(r["wall_s"]))
        for name in PHASES
        if isinstance(r := results.get(name), dict) and "started_at" in r and "wall_s" in r
    ]


def parse_window(text: str) -> Window:
    """NAME=YYYY-MM-DD HH:MM:SS[.fff]+SECONDS"""
    try:
        name, rest = text.split("=", 1)
        start, wall = rest.rsplit("+", 1)
        return Window(name, datetime.fromisoformat(start.strip()), float(wall))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--window {text!r}: expected NAME=YYYY-MM-DD HH:MM:SS+SECONDS, e.g. 'runner=2026-11-26 08:08:27+196.8'"
        ) from None


def table(batches: list[Batch], windows: list[Window], peak: int) -> str:
    lines = [
        f"| phase | wall s | {' | '.join(f'{p} s' for p in PARTS)} | most running | mean running / peak ({peak}) |",
        "|---|---:|" + "---:|" * (len(PARTS) + 2),
    ]
    for w in windows:
        parts = split(batches, w, peak)
        cells = " | ".join(f"{parts[p]:.0f}" for p in (*PARTS, "most running"))
        lines.append(f"| {w.name} | {w.wall_s:.1f} | {cells} | {parts['mean running / peak']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path, help="the SGLang server's log (.gz too)")
    parser.add_argument("--generation", type=Path, help="generation.json of the run on that server")
    parser.add_argument("--window", type=parse_window, action="append", default=[], help="NAME=START+SECONDS")
    parser.add_argument("--peak", type=int, help="running requests that count as full [default: the log's most]")
    parser.add_argument("--stalls", action="store_true", help="list the log's stalls instead of splitting windows")
    parser.add_argument("--stall-s", type=float, default=10.0, help="the silence that counts as a stall [10]")
    args = parser.parse_args(argv)
    with (gzip.open if args.log.suffix == ".gz" else open)(args.log, "rt", errors="replace") as log:
        batches = read_batches(log)
    if not batches:
        parser.error(f"{args.log}: no SGLang batch lines ('[time] Prefill batch, ... #running-req: N')")
    if args.stalls:
        text = stalls_table(stalls(batches, args.stall_s))
        print(text)
        return text
    windows = list(args.window)
    if args.generation:
        windows += windows_of(json.loads(args.generation.read_text()))
    if not windows:
        parser.error("no window: give --generation (a generation.json with started_at) or --window")
    peak = args.peak or max(b.running for b in batches)
    text = table(batches, windows, peak)
    print(text)
    return text


if __name__ == "__main__":
    main()
