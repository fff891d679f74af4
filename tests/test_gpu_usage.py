"""selfplay_gen/iterate/gpu_usage.py: nvidia-smi's utilization samples while a step runs become one
figure per step, the samples of a trainer's start-up apart; without nvidia-smi there is none."""

from __future__ import annotations

import time

from selfplay_gen.iterate import report
from selfplay_gen.iterate.gpu_usage import GpuUsage


def fake_nvidia_smi(tmp_path, body: str, ids: str = ""):
    """An executable that answers nvidia-smi's looping query with `body` (bash) and checks its arguments."""
    path = tmp_path / "nvidia-smi"
    expected = "--query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 50" + (f" -i {ids}" if ids else "")
    path.write_text(f'#!/usr/bin/env bash\n[[ "$*" == "{expected}" ]] || exit 7\n' + body)
    path.chmod(0o755)
    return str(path)


def test_the_mean_of_every_gpus_samples_and_the_working_part_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # two GPUs: idle samples first, then nothing for 0.4 s (a start-up), then 40% and 80%; a GPU without
    # the figure says [N/A]. Each sampling round is one write, as nvidia-smi's is, so no cut-off splits it.
    command = fake_nvidia_smi(
        tmp_path,
        "end=$((SECONDS + 30))\n"
        "printf '0\\n0\\n%.0s' 1 2 3 4 5 6 7 8; sleep 0.4\n"
        "while ((SECONDS < end)); do printf '40\\n80\\n[N/A]\\n'; sleep 0.05; done\n",
    )
    with GpuUsage(command=command, interval_ms=50) as usage:
        time.sleep(1.2)
    assert usage.samples and usage._process is not None and usage._process.poll() is not None  # stopped with the block
    overall = usage.mean_percent()
    assert overall is not None and 0 < overall < 60
    assert usage.mean_percent(after_s=0.8) == 60.0  # past the idle start: only 40s and 80s


def test_only_the_visible_gpus_are_sampled(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    command = fake_nvidia_smi(tmp_path, "while true; do echo 90; sleep 0.05; done\n", ids="2,3")
    with GpuUsage(command=command, interval_ms=50) as usage:
        time.sleep(0.3)
    assert usage.mean_percent() == 90.0  # the stand-in answers only when asked for GPUs 2 and 3


def test_no_figure_without_nvidia_smi_or_when_disabled(tmp_path):
    with GpuUsage(command=str(tmp_path / "absent")) as usage:
        pass
    assert usage.mean_percent() is None
    command = fake_nvidia_smi(tmp_path, "echo 50\n")
    with GpuUsage(enabled=False, command=command, interval_ms=50) as off:
        time.sleep(0.2)
    assert off.mean_percent() is None and off._process is None


def test_the_wall_time_table_shows_the_figure_and_reads_rows_written_before_it(tmp_path):
    stage = tmp_path / "iter_001"
    stage.mkdir()
    (stage / report.TIMINGS_FILE).write_text('{"steps": [{"step": "convert", "startup_s": 0.0, "work_s": 2.0}]}')
    report.add_timing(stage, report.Timing("train (sft)", 61.0, 110.4, 23.6))
    report.write_row(stage, ("iter_1", "2048", "0.99", "0.81", "233"))
    text = report.write_summary(tmp_path)
    assert "| stage | step | start-up (s) | work (s) | GPU utilization while working (%) |" in text
    assert "| iter_1 | convert | 0 | 2 |  |" in text and "| iter_1 | train (sft) | 61 | 110 | 24 |" in text
