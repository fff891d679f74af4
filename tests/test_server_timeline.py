"""bench/analysis/server_timeline.py: a phase's wall time split by how full SGLang's batches were, from
the server's own log lines, for the windows bench/generation.py records."""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timedelta

import bench_modules
import pytest

server_timeline = bench_modules.load("analysis/server_timeline.py", "server_timeline")

T0 = datetime(2026, 11, 26, 8, 8, 0)


def stamp(second: int) -> str:
    return (T0 + timedelta(seconds=second)).strftime("%Y-%m-%d %H:%M:%S")


def decode(second: int, running: int, rank: str = "") -> str:
    """A decode line as SGLang 0.5 logs it."""
    return (
        f"[{stamp(second)}{rank}] Decode batch, #running-req: {running}, #token: 605, token usage: 0.00, "
        f"cuda graph: True, gen throughput (token/s): 694.85, #queue-req: 0"
    )


def prefill(second: int, running: int) -> str:
    return (
        f"[{stamp(second)}] Prefill batch, #new-seq: 9, #new-token: 2211, #cached-token: 4389, token usage: 0.25, "
        f"#running-req: {running}, #queue-req: 4096, #pending-token: 3248138, cuda graph: True"
    )


def runner_log() -> list[str]:
    """Idle until second 10, ramp to second 14, full until 40, drain until 50, two requests until 60;
    unrelated lines (the server's own start) in between."""
    lines = ["[2026-11-26 08:07:55] INFO: Uvicorn running on http://127.0.0.1:30100"]
    lines += [prefill(10, 100), decode(12, 2000), prefill(14, 4000)]
    lines += [decode(s, 4090) for s in range(15, 41, 5)]
    lines += [decode(44, 2000), decode(50, 30), decode(55, 2, " TP0"), decode(60, 1)]
    return lines


def window(start_s: float, wall_s: float, name: str = "runner") -> object:
    return server_timeline.Window(name, T0 + timedelta(seconds=start_s), wall_s)


def test_a_phase_splits_into_start_ramp_full_drain_and_tail():
    batches = server_timeline.read_batches(runner_log())
    assert len(batches) == 13 and batches[0].running == 100  # the start-up line is not a batch
    parts = server_timeline.split(batches, window(0.4, 60.0), peak=4096)
    assert [parts[p] for p in server_timeline.PARTS] == pytest.approx([9.6, 4.0, 26.0, 10.0, 10.4])
    assert sum(parts[p] for p in server_timeline.PARTS) == pytest.approx(60.0)
    assert 0.4 < parts["mean running / peak"] < 0.6 and parts["most running"] == 4090


def test_a_phase_that_never_fills_the_server_is_all_start():
    batches = server_timeline.read_batches([decode(s, 1) for s in range(0, 10)])
    parts = server_timeline.split(batches, window(0.0, 9.5, "one at a time"), peak=4096)
    assert parts["start"] == pytest.approx(9.5) and parts["full"] == parts["tail"] == 0.0


@pytest.mark.parametrize("name", ["sglang.log", "sglang_batches.log.gz"])  # as committed under bench/results
def test_windows_come_from_generation_json_and_the_table_names_each(tmp_path, name):
    log = tmp_path / name
    text = "\n".join(runner_log()) + "\n"
    log.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    results = {
        "sequential": {"started_at": "2026-11-26 08:07:58.000", "wall_s": 2.0},
        "concurrent": {"started_at": "2026-11-26 08:08:00.400", "wall_s": 60.0},
        "saturation": {"requests": 9, "in_flight": 2, "error": "server gone"},  # a failed flood: no window
        "single_request": None,
    }
    generation = tmp_path / "generation.json"
    generation.write_text(json.dumps({"results": results}))
    text = server_timeline.main([str(log), "--generation", str(generation)])
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()[2:]}
    assert set(rows) == {"sequential", "concurrent"}
    assert rows["concurrent"].startswith("| concurrent | 60.0 | 10 | 4 | 26 | 10 | 10 | 4090 |")
    assert "mean running / peak (4090)" in text  # the log's own peak


def test_a_bad_window_or_a_log_without_batches_says_what_it_expected(tmp_path, capsys):
    log = tmp_path / "sglang.log"
    log.write_text("[2026-11-26 08:07:55] INFO: Uvicorn running\n")
    with pytest.raises(SystemExit):
        server_timeline.main([str(log), "--window", "runner=08:08+5"])
    assert "expected NAME=YYYY-MM-DD HH:MM:SS+SECONDS" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        server_timeline.main([str(log), "--window", "runner=2026-11-26 08:08:00+5"])
    assert f"{log}: no SGLang batch lines" in capsys.readouterr().err


def test_stalls_are_silences_with_requests_running(tmp_path):
    """The runner's log has none (its longest silence with requests running is 6 s); one where the scheduler ran
    nothing for 106 s with 248 requests in it has one, and an idle server's silence is none."""
    batches = server_timeline.read_batches(runner_log())
    assert server_timeline.stalls(batches, 10.0) == []
    log = tmp_path / "sglang.log"
    log.write_text("\n".join([*runner_log(), decode(65, 0), prefill(200, 5), decode(201, 248), decode(307, 260)]))
    text = server_timeline.main([str(log), "--stalls"])
    assert text.splitlines()[2:] == ["| 2026-11-26 08:11:21 | 106 | 248 |"]
