"""GRPO's sampler: from a training job's command line, verl's sync trainer (offline: the replay trainer, a
sync one without a rollout engine) builds selfplay_gen's QuickPollReplayBuffer with every setting its
built-in ReplayBuffer gets from the same command, group filtering (DAPO) on or off, and a poll of 0.1 s
where verl's waits 2 s for the groups of each step."""

from __future__ import annotations

import shlex
import sys
import time

import pytest
from click.testing import CliRunner
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.trainer.ppo.v1.trainer_base import get_trainer_cls

import selfplay_gen.verl.online_trainer  # registers trainer.v1.trainer_mode=selfplay_online
import selfplay_gen.verl.replay_trainer  # noqa: F401  (registers trainer.v1.trainer_mode=replay)
from selfplay_gen.iterate.cli import train_command
from selfplay_gen.verl.replay_buffer import QuickPollReplayBuffer

SETTINGS = (
    "filter_groups_metric",
    "train_batch_size",
    "gen_batch_size",
    "max_inflight_gen_batches",
    "sync_refill_failed_groups",
    "max_off_policy_threshold",
    "max_off_policy_strategy",
    "trainer_mode",
)


def job_config(*args: str):
    """verl's config as its task runner resolves it, composed from a dry-run GRPO job's overrides (those
    that name files aside)."""
    common = ["--dry-run", "--model_path", "/m", "--verl.python", sys.executable, "--batch_size", "16"]
    result = CliRunner().invoke(train_command, [*common, *args])
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if "main_ppo" in line]
    words = shlex.split(line)
    overrides = [w for w in words[words.index("verl.trainer.main_ppo") + 1 :] if not w.startswith("hydra.")]
    with initialize_config_module("verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=overrides)
    OmegaConf.resolve(config)
    return config


def built_by_verl(config):
    """The sampler that the trainer of `config`'s trainer mode (selfplay_gen's replay trainer offline, its online
    trainer online, which this module's imports registered) builds, through verl's own `PPOTrainer.__init__`."""
    return get_trainer_cls(config.trainer.v1.trainer_mode)(config).replay_buffer


@pytest.mark.parametrize(
    "args",
    [
        ["--mode", "offline"],
        ["--mode", "offline", "--verl.offline_engine", "false"],
        ["--mode", "online", "--verl.filter_groups", "3"],
    ],
)
def test_verl_builds_the_quick_sampler_with_the_settings_of_its_own(args):
    config = job_config(*args)
    ours = built_by_verl(config)
    config.trainer.v1.sampler.custom_sampler.path = None  # verl's built-in sampler, from the same config
    theirs = built_by_verl(config)
    assert type(ours) is QuickPollReplayBuffer and type(theirs) is ReplayBuffer
    assert {s: getattr(ours, s) for s in SETTINGS} == {s: getattr(theirs, s) for s in SETTINGS}
    assert (ours.poll_interval, theirs.poll_interval) == (0.1, 2.0)
    if "--verl.filter_groups" in args:
        assert (ours.filter_groups_metric, ours.max_inflight_gen_batches, ours.gen_batch_size) == ("reward", 3, 1)
    else:
        assert (ours.filter_groups_metric, ours.gen_batch_size) == (None, 16)


def test_a_step_waits_a_tenth_of_a_second_between_looks_for_its_groups():
    sampler = built_by_verl(job_config("--mode", "offline"))
    started = time.perf_counter()
    sampler._wait_for_next_poll("train", last_debug_time=time.time())
    assert time.perf_counter() - started < 0.5


def test_an_asynchronous_trainer_is_told_to_use_verls_own_sampler():
    config = job_config("--mode", "online", "trainer.v1.trainer_mode=colocate_async")
    with pytest.raises(ValueError, match="serves trainer.v1.trainer_mode=sync, not 'colocate_async'"):
        built_by_verl(config)
