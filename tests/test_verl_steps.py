"""bench/analysis/verl_steps.py: a step's seconds from verl's console logs (GRPO's timing_s/step, the
SFT trainer's progress bar), and the ratio of runs side by side."""

from __future__ import annotations

import bench_modules
import pytest

verl_steps = bench_modules.load("analysis/verl_steps.py", "verl_steps")


def grpo_log(*seconds: float) -> str:
    """Lines as verl's GRPO trainer prints them through Ray (ANSI colours, the actor's name first)."""
    return "".join(
        f"\x1b[36m(TaskRunnerV1 pid=1)\x1b[0m step:{i} - actor/entropy:0.02 - timing_s/gen:2.1 - "
        f"timing_s/step:{s} - perf/throughput:4653.3\n"
        for i, s in enumerate(seconds, start=1)
    )


def sft_log(elapsed: list[int], total: int = 115) -> str:
    """The SFT trainer's bar (after each step, N done at MM:SS) with its metric lines, as the runbook
    keeps them (carriage returns made line ends), and another bar that is not the trainer's."""
    lines = ["Loading weights: 100%|██████████| 272/272 [00:00<00:00, 4428.84it/s]"]
    for done, seconds in enumerate(elapsed):
        clock = f"{seconds // 60:02d}:{seconds % 60:02d}"
        bar = f"Epoch 1/2:  {done}%|▏         | {done}/{total} [{clock}<04:56,  2.63s/it]"
        lines.append(bar + f"step:{done + 1} - train/loss:0.0015 - train/global_tokens:33360")
    lines.append(f"Epoch 2/2:   1%|          | 1/{total} [00:02<04:05,  2.21s/it]step:{total + 2} - train/loss:0.001")
    return "\n".join(lines)


def test_grpo_steps_are_the_mean_of_timing_s_step_from_step_two():
    steps = verl_steps.read_steps(grpo_log(28.5, 8.57, 8.93))
    assert (steps.kind, steps.first, steps.last) == ("grpo", 2, 3)
    assert steps.seconds == pytest.approx(8.75)
    assert verl_steps.read_steps(grpo_log(28.5, 8.0, 9.0, 30.0), first=1, last=2).seconds == pytest.approx(18.25)
    with pytest.raises(ValueError, match="no GRPO step between 5 and 5"):
        verl_steps.read_steps(grpo_log(1.0, 2.0), first=5, last=5)


def test_sft_steps_come_from_the_first_epochs_bar_elapsed_time():
    # 0 done at 0 s, 1 at 3 s (warm-up), then 2 s a step; an hour-long bar reads H:MM:SS
    text = sft_log([0, 3, 5, 7, 9, 11])
    steps = verl_steps.read_steps(text)
    assert (steps.kind, steps.first, steps.last, steps.seconds) == ("sft", 2, 5, 2.0)
    assert verl_steps.read_steps(text, first=1, last=1).seconds == 3.0
    hour = "Epoch 1/1: 33%|█| 2/6 [59:30<1:00:00, 1s/it]\nEpoch 1/1: 50%|█| 3/6 [1:00:00<1:00:00, 1s/it]"
    assert verl_steps.read_steps(hour, first=3, last=3).seconds == 30
    with pytest.raises(ValueError, match="does not show steps 1 and 40 done"):
        verl_steps.read_steps(text, last=40)
    with pytest.raises(ValueError, match="neither GRPO step times"):
        verl_steps.read_steps("Loading weights: 100%|██████████| 272/272 [00:00<00:00]")


def test_the_table_gives_each_run_the_baselines_step_time_over_its_own(tmp_path):
    one, two = tmp_path / "sft_gpus1.log", tmp_path / "sft_gpus2.log"
    one.write_text(sft_log([0, 3, 5, 7, 9]))  # 2 s a step
    two.write_text(sft_log([0, 2, 3, 4, 5]))  # 1 s a step
    table = verl_steps.table([one, two], first=2, last=None).splitlines()
    assert table[2] == "| sft_gpus1.log | sft | 2-4 | 2.00 | 1.00x |"
    assert table[3] == "| sft_gpus2.log | sft | 2-4 | 1.00 | 2.00x |"
    (tmp_path / "empty.log").write_text("nothing")
    with pytest.raises(ValueError, match="empty.log: neither"):
        verl_steps.table([one, tmp_path / "empty.log"], first=2, last=None)
    with pytest.raises(ValueError, match="missing.log: No such file"):
        verl_steps.table([one, tmp_path / "missing.log"], first=2, last=None)


def test_grpo_logs_also_say_where_a_step_goes(tmp_path):
    """Each timing_s/<part> is averaged over the counted steps; a part missing from a step (a checkpoint
    saved only at the end) counts 0 s there."""
    one, two = tmp_path / "grpo_gpus1.log", tmp_path / "grpo_gpus2.log"
    one.write_text(
        "step:1 - timing_s/gen:9.0 - timing_s/update_actor:9.0 - timing_s/step:30.0\n"
        "step:2 - timing_s/gen:4.0 - timing_s/update_actor:6.0 - timing_s/step:12.0\n"
        "step:3 - timing_s/gen:4.4 - timing_s/update_actor:5.0 - timing_s/save_checkpoint:1.0 - timing_s/step:12.0\n"
    )
    two.write_text(
        "step:1 - timing_s/gen:9.0 - timing_s/update_actor:9.0 - timing_s/step:30.0\n"
        "step:2 - timing_s/gen:2.0 - timing_s/update_actor:2.5 - timing_s/step:6.0\n"
        "step:3 - timing_s/gen:2.2 - timing_s/update_actor:3.0 - timing_s/step:6.0\n"
    )
    steps = verl_steps.read_steps(one.read_text())
    assert steps.parts == pytest.approx({"gen": 4.2, "update_actor": 5.5, "save_checkpoint": 0.5})
    table = verl_steps.table([one, two], first=2, last=None).splitlines()
    assert table[3] == "| grpo_gpus2.log | grpo | 2-3 | 6.00 | 2.00x |"
    assert table[5] == "| part (s) | grpo_gpus1.log | grpo_gpus2.log |"
    assert table[7:] == [
        "| gen | 4.20 | 2.10 (2.00x) |",
        "| update_actor | 5.50 | 2.75 (2.00x) |",
        "| save_checkpoint | 0.50 | 0.00 |",
    ]
