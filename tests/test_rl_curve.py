"""bench/analysis/rl_curve.py: evaluations of offline_gpu/gpu_rl.sh become rows of reward against GPU
minutes, each paired with the warm start on the same instances."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import bench_modules
import numpy as np
import pytest

rl_curve = bench_modules.load("analysis/rl_curve.py", "rl_curve")


def metrics(path: Path, label: str, rewards: dict[str, float]) -> Path:
    """An evaluation's metrics.json, as `selfplay-gen eval` writes the fields the curve reads."""
    values = np.array(list(rewards.values()))
    summary = {
        "games": 8 * len(rewards),
        "instances": len(rewards),
        "mean_normalized_reward": {"mean": float(values.mean()), "ci": [float(values.min()), float(values.max())]},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"models": {label: summary}, "per_instance": {label: rewards}}))
    return path


def test_rows_pair_each_model_with_the_warm_start_on_its_instances(tmp_path):
    warm = {"seed-1000000000": 0.6, "seed-1000000001": 0.7, "seed-1000000002": 0.8}
    later = {"seed-1000000000": 0.7, "seed-1000000001": 0.9, "seed-1000000002": 0.8}
    lines = [
        ("online-grpo-lora", "6.50", "dev", metrics(tmp_path / "o6" / "metrics.json", "online@10", later)),
        ("warm", "0", "dev", metrics(tmp_path / "w" / "metrics.json", "warm", warm)),
        ("online-grpo-lora", "3.25", "dev", metrics(tmp_path / "o3" / "metrics.json", "online@5", warm)),
    ]
    (tmp_path / "points.tsv").write_text("".join("\t".join(map(str, line)) + "\n" for line in lines))
    rl_curve.main(tmp_path)
    rows = list(csv.DictReader((tmp_path / "rl_curve.csv").open()))
    assert [(r["trainer"], float(r["gpu_minutes"])) for r in rows] == [
        ("warm", 0.0),
        ("online-grpo-lora", 3.25),
        ("online-grpo-lora", 6.5),
    ]
    assert rows[0]["gain_vs_warm"] == ""  # the warm start is the reference
    assert float(rows[1]["gain_vs_warm"]) == pytest.approx(0.0)
    gain = float(rows[2]["gain_vs_warm"])
    assert gain == pytest.approx(np.mean([0.1, 0.2, 0.0]))
    assert float(rows[2]["gain_ci_low"]) <= gain <= float(rows[2]["gain_ci_high"])
    assert float(rows[2]["reward"]) == pytest.approx(0.8)
    assert json.loads((tmp_path / "rl_curve.json").read_text())["rows"][2]["model"] == "online@10"
    assert "| online-grpo-lora | 6.5 | dev | online@10 | 3 x 8 |" in (tmp_path / "rl_curve.md").read_text()
    assert (tmp_path / "rl_curve.png").stat().st_size > 0
    rl_curve.plot(rl_curve.read_csv(tmp_path / "rl_curve.csv"), tmp_path / "again.png")  # from the CSV alone
    assert (tmp_path / "again.png").stat().st_size > 0


def test_a_bad_line_names_file_line_and_field(tmp_path):
    (tmp_path / "points.tsv").write_text("warm\tzero\tdev\t/x/metrics.json\n")
    with pytest.raises(rl_curve.PointsError, match=r"points.tsv:1: field gpu_minutes is not a number: 'zero'"):
        rl_curve.read_points(tmp_path / "points.tsv")


def test_online_grpos_steps_are_read_from_verls_log_with_their_trends(tmp_path):
    """verl's console lines become online_steps.csv; rl_curve.md gets each quantity's slope over the steps,
    an interval below zero for a training reward that falls, and verl's validation where it ran."""
    warm = {"seed-1000000000": 0.6, "seed-1000000001": 0.7}
    (tmp_path / "points.tsv").write_text(f"warm\t0\tdev\t{metrics(tmp_path / 'w' / 'metrics.json', 'warm', warm)}\n")
    rng = np.random.default_rng(0)
    lines = ["(TaskRunner pid=1) loading the model"]
    for step in range(1, 21):
        reward = 0.8 - 0.003 * step + rng.normal(0, 0.005)
        line = f"(TaskRunner pid=1) step:{step} - critic/score/mean:{reward} - actor/entropy:0.02 - timing_s/step:14.0"
        if step % 4 == 0:
            line += f" - val-core/selfplay_matching/reward/mean@1:np.float64({0.81 + 0.001 * step})"
        lines.append(line)
    log = tmp_path / "verl.log"
    log.write_text("\n".join(lines) + "\n")
    rl_curve.main(tmp_path, log)
    steps = list(csv.DictReader((tmp_path / "online_steps.csv").open()))
    assert [int(s["step"]) for s in steps] == list(range(1, 21))
    assert float(steps[3]["validation"]) == pytest.approx(0.814) and steps[2]["validation"] == ""
    trends = {t["quantity"]: t for t in json.loads((tmp_path / "rl_curve.json").read_text())["online_trends"]}
    reward = trends["train_reward"]
    assert reward["steps"] == 20 and reward["ci"][0] <= -0.003 <= reward["ci"][1] and reward["ci"][1] < 0
    assert reward["p"] < 0.001 and reward["first"] > reward["last"]
    assert trends["validation"]["steps"] == 5 and trends["validation"]["slope"] == pytest.approx(0.001)
    assert "response_tokens" not in trends  # not logged
    text = (tmp_path / "rl_curve.md").read_text()
    assert "## Online GRPO's steps" in text and "| train_reward | 20 |" in text
    assert (tmp_path / "online_curves.png").stat().st_size > 0
    with pytest.raises(SystemExit, match="no such file"):
        rl_curve.main(tmp_path, tmp_path / "missing.log")
