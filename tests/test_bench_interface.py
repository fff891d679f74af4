"""Every benchmark in bench/ has one interface (`--out DIR`, `--quick`) and writes NAME.json and
NAME.md in one format (bench/benchmark.py), naming no directory of the machine it ran on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted(p.stem for p in (REPO / "bench").glob("*.py") if p.stem != "benchmark")
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def bench(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / f"{name}.py"), *args], capture_output=True, text=True, env=ENV, cwd=REPO
    )


@pytest.mark.parametrize("name", BENCHMARKS)
def test_each_benchmark_takes_out_and_quick(name):
    done = bench(name, "--help")
    assert done.returncode == 0, done.stderr
    assert "--out DIRECTORY" in done.stdout and "--quick" in done.stdout


def test_a_quick_run_writes_json_and_markdown_in_the_shared_format(tmp_path):
    done = bench("http_pool", "--quick", "--in-flight", "8", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "http_pool.json").read_text())
    assert set(result) == {"benchmark", "command", "machine", "settings", "results"}
    assert result["benchmark"] == "http_pool" and result["settings"]["in_flight"] == 8
    assert result["command"].startswith("python bench/http_pool.py --quick")
    clients = result["results"]["clients"]
    assert set(clients) == {"httpx", "httpx, no keep-alive", "aiohttp", "backend"}
    assert all(len(rounds) == 2 and rounds[1]["peak_in_flight"] >= 1 for rounds in clients.values())
    text = (tmp_path / "http_pool.md").read_text()
    assert text.startswith("# HTTP clients") and "| aiohttp |" in text and "Machine: " in text


def test_paths_in_results_are_relative_to_the_repository():
    sys.path.append(str(REPO / "bench"))  # last: bench/convert.py must not shadow the convert package
    from benchmark import portable

    home = os.path.expanduser("~")
    value = {"out": REPO / "data" / "g.jsonl", "runs": [f"{REPO}/bench/results/x", f"{home}/.cache/m"], "n": 3}
    assert portable(value) == {"out": "data/g.jsonl", "runs": ["bench/results/x", "~/.cache/m"], "n": 3}


def test_committed_results_hold_no_lock_files_and_no_machine_directories():
    results = REPO / "bench" / "results"
    assert not list(results.rglob("*.lock"))
    machine = ("/tmp/learn", "/tmp/neg", "/tmp/site", "/tmp/smollm2", "/work/", "/root/")
    for path in results.rglob("*"):
        if path.suffix in (".json", ".md", ".log", ".txt", ".jsonl"):
            text = path.read_text(errors="replace")
            assert not [m for m in machine if m in text], path
