"""bench/analysis/steps_table.py: verl's per-step metrics as a table, from a console log whose stage did not
finish (no train/metrics.json)."""

from __future__ import annotations

import bench_modules
import pytest

steps_table = bench_modules.load("analysis/steps_table.py", "steps_table")

LOG = [
    "(TaskRunnerV1 pid=1) step:0 - val-core/selfplay_matching/reward/mean@1:np.float64(0.2)",  # before training
    "Training Progress:  10%|█ | 1/10 [01:30<13:37, 90.88s/it]",
    "(TaskRunnerV1 pid=1) step:1 - actor/entropy:0.53 - critic/score/mean:0.1715 - games/agreed/mean:0.25 "
    "- games/normalized_reward/mean:0.15 - timing_s/step:90.805 - timing_s/gen:37.35",
    "(TaskRunnerV1 pid=1) step:2 - actor/entropy:0.52 - critic/score/mean:0.132 - games/agreed/mean:0.21875 "
    "- timing_s/step:61.77 - val-core/selfplay_matching/reward/mean@1:np.float64(0.3397671505)",
]


def test_each_training_step_is_a_row_with_blanks_where_it_logged_nothing():
    rows = steps_table.table(LOG)
    header = rows[0]
    assert header[:5] == ["step", "entropy", "score_mean", "reward", "agreed"]
    assert len(rows) == 3  # step 0 validated only
    first, second = (dict(zip(header, row)) for row in rows[1:])
    assert (first["step"], first["agreed"], first["step_s"], first["gen_s"]) == ("1", "0.25", "90.81", "37.35")
    assert first["reward"] == "0.15" and second["reward"] == ""
    assert first["agreed_reward"] == "0.6" and second["agreed_reward"] == ""  # 0.15 / 0.25; no reward logged
    assert first["validation_reward"] == "" and second["validation_reward"] == "0.3398"
    assert second["gen_s"] == "" and second["invalid"] == ""


def test_the_command_prints_chosen_columns_and_refuses_a_log_without_steps(tmp_path, capsys):
    log = tmp_path / "verl.log"
    log.write_text("\n".join(LOG))
    steps_table.main([str(log), "--columns", "games/agreed/mean,timing_s/step", "--markdown"])
    assert capsys.readouterr().out.splitlines() == [
        "| step | games/agreed/mean | timing_s/step |",
        "|---|---|---|",
        "| 1 | 0.25 | 90.81 |",
        "| 2 | 0.2188 | 61.77 |",
    ]
    log.write_text(LOG[0])
    with pytest.raises(SystemExit, match="no training step logged timing_s/step"):
        steps_table.main([str(log)])
    with pytest.raises(SystemExit):
        steps_table.main([str(tmp_path / "gone.log")])
    assert "cannot read" in capsys.readouterr().err
