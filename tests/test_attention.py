"""CUDNN_ATTENTION: whether verl's training processes let PyTorch's SDPA use cuDNN. The choice is an
environment variable of the job, which torchrun's ranks and Ray's workers inherit, and each process
applies it when it sets itself up (`selfplay_gen.verl.worker_setup`)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from selfplay_gen.iterate.cli import train_command
from selfplay_gen.verl import attention

PROBE = "import selfplay_gen.verl.worker_setup, torch; print(torch.backends.cuda.cudnn_sdp_enabled())"


def worker_sees(env: dict[str, str]) -> str:
    """cuDNN SDPA's state in a fresh process that sets itself up as a training worker does."""
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_a_worker_turns_cudnn_attention_off_only_when_the_job_says_so():
    base = {k: v for k, v in os.environ.items() if k != attention.ENV}
    assert worker_sees(base) == "True"  # PyTorch's own choice stays
    assert worker_sees({**base, attention.ENV: attention.OFF}) == "False"


@pytest.mark.parametrize("mode", ["sft", "online"])
def test_the_job_carries_the_choice_in_its_environment(mode):
    def command(*args: str) -> list[str]:
        common = ["--dry-run", "--mode", mode, "--model_path", "/m", "--verl.python", sys.executable]
        result = CliRunner().invoke(train_command, [*common, *args])
        assert result.exit_code == 0, result.output
        (line,) = [line for line in result.output.splitlines() if "sft_trainer" in line or "main_ppo" in line]
        return line.split()

    assert not any(attention.ENV in word for word in command("--verl.cudnn_attention", "true"))
    for off in (command(), command("--verl.cudnn_attention", "false")):  # off by default
        assert off[1:3] == ["env", f"{attention.ENV}={attention.OFF}"]  # after the shell's "+" prompt
