"""Offline GRPO with `verl.offline_engine` false runs verl's synchronous trainer without a rollout engine
(`selfplay_gen.verl.replay_trainer`): from the command of a dry-run iteration, verl's own Hydra config,
config check, trainer registry and worker mapping give actor-only workers and no LLM server; online GRPO
(`selfplay_gen.verl.online_trainer`), and offline GRPO by default, keep the engine."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest
from click.testing import CliRunner
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from verl.trainer.ppo.utils import Role, need_critic, need_reference_policy
from verl.trainer.ppo.v1 import PPOTrainerSync, get_trainer_cls
from verl.utils.config import omega_conf_to_dataclass, validate_config
from verl.utils.import_utils import import_external_libs
from verl.workers.config import RolloutConfig
from verl.workers.rollout.llm_server import LLMServerManager
from verl.workers.rollout.replica import RolloutReplica

from selfplay_gen.iterate.cli import iterate_command
from selfplay_gen.verl.online_trainer import SelfPlayTrainer
from selfplay_gen.verl.replay_buffer import QuickPollReplayBuffer
from selfplay_gen.verl.replay_trainer import ReplayTrainer

EXTERNAL_MODULES = "VERL_USE_EXTERNAL_MODULES"


class EmptyServers(LLMServerManager):
    """verl's LLM server manager, its server class named (verl's hook for recipes) rather than imported from
    the engine, which this machine lacks; an empty one uses it for nothing."""

    rollout_replica_class = RolloutReplica


ENGINE_SETTINGS = ("gpu_memory_utilization", "enforce_eager", "tensor_model_parallel_size", "engine_kwargs")


def verl_overrides(tmp_path, trainer: str, *more: str) -> list[str]:
    """The Hydra overrides of the verl job of a dry-run iteration of `trainer` with `more` settings (the run
    directory's aside)."""
    args = ["--dry-run", "--initial_model", "/m0", "--run_dir", str(tmp_path / "run"), "--num_iterations", "1"]
    args += ["--verl.python", sys.executable, "--trainer", trainer, "--warm.policy", "none", *more]
    result = CliRunner().invoke(iterate_command, args)
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if "-m verl.trainer.main_ppo" in line]
    words = shlex.split(line)
    return [w for w in words[words.index("verl.trainer.main_ppo") + 1 :] if not w.startswith("hydra.")]


def verl_config(overrides: list[str]):
    """verl's config as its entry point checks it and its task runner resolves it."""
    with initialize_config_module("verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=overrides)
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    OmegaConf.resolve(config)
    return config


def trainer_of(config):
    """The trainer verl's task runner builds for `config`: the class its trainer mode names, in a process that
    imported the modules the job's Ray runtime environment tells verl to import."""
    env = config.ray_kwargs.ray_init.runtime_env.get("env_vars", {})
    import_external_libs(env[EXTERNAL_MODULES].split(",") if EXTERNAL_MODULES in env else None)
    return get_trainer_cls(config.trainer.v1.trainer_mode)(config)


def test_offline_grpo_without_its_engine_trains_with_actor_only_workers(tmp_path):
    overrides = verl_overrides(tmp_path, "grpo", "--verl.offline_engine", "false")
    assert not [o for o in overrides if any(setting in o for setting in ENGINE_SETTINGS)]
    config = verl_config(overrides)
    trainer = trainer_of(config)
    assert type(trainer) is ReplayTrainer and trainer._enable_hybrid_replicas is False  # LLMServerManager.create_empty
    # a synchronous trainer wherever verl asks: whole batches of groups from its dataloader, the quick sampler
    assert trainer.trainer_mode == "sync" and type(trainer.replay_buffer) is QuickPollReplayBuffer
    assert trainer.replay_buffer.gen_batch_size == config.data.train_batch_size
    trainer._init_resource_pool_mgr()
    assert set(trainer.role_worker_mapping) == {Role.Actor}  # a worker that builds no rollout
    EmptyServers(config=trainer.config)  # what _setup builds LLMServerManager.create_empty() with
    # what the agent loops read of the rollout's settings: the replayed groups' size and sampling
    rollout = omega_conf_to_dataclass(config.actor_rollout_ref.rollout, dataclass_type=RolloutConfig)
    assert (rollout.n, rollout.temperature, rollout.calculate_log_probs) == (8, 0.7, True)


@pytest.mark.parametrize("name", ["grpo-online", "grpo"])
def test_online_grpo_and_offline_by_default_keep_verls_sync_trainer_and_its_rollout_engine(tmp_path, name):
    """Offline GRPO by default runs verl's own sync trainer; online GRPO runs it too, as the subclass that logs
    each step's game measures (`selfplay_gen.verl.online_trainer`)."""
    overrides = verl_overrides(tmp_path, name)
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.4" in overrides
    assert "actor_rollout_ref.rollout.enforce_eager=False" in overrides
    trainer = trainer_of(verl_config(overrides))
    assert type(trainer) is (SelfPlayTrainer if name == "grpo-online" else PPOTrainerSync)
    assert isinstance(trainer, PPOTrainerSync) and trainer.trainer_mode == "sync"
    trainer._init_resource_pool_mgr()
    assert set(trainer.role_worker_mapping) == {Role.ActorRollout}


@pytest.mark.parametrize(
    ("trainer", "registered"),
    [
        (["grpo", "--verl.offline_engine", "false"], "selfplay_gen.verl.replay_trainer.ReplayTrainer"),
        (["grpo-online"], "selfplay_gen.verl.online_trainer.SelfPlayTrainer"),
    ],
)
def test_verl_registers_the_projects_trainers_in_each_process_the_job_starts(tmp_path, trainer, registered):
    """A Ray worker of the job (verl's task runner among them) starts with the runtime environment's variables
    and imports verl; the trainer mode is then known there, as verl imports the module it is told to."""
    config = verl_config(verl_overrides(tmp_path, *trainer))
    env = {**os.environ, **config.ray_kwargs.ray_init.runtime_env.env_vars}
    probe = (
        f"from verl.trainer.ppo.v1 import get_trainer_cls; print(get_trainer_cls({config.trainer.v1.trainer_mode!r}))"
    )
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert registered in result.stdout


@pytest.mark.parametrize("hook", ["on_init_end", "on_step_end", "on_sample_end"])
def test_the_replay_trainers_hooks_leave_the_absent_rollout_alone(hook):
    trainer = ReplayTrainer.__new__(ReplayTrainer)  # no checkpoint manager: a hook that synced weights would fail
    assert getattr(trainer, hook)() is None


def test_offline_grpo_replays_through_one_agent_loop_worker_and_one_reward_worker(tmp_path):
    """Replayed groups need no more workers than one of each: verl starts each worker of its default eight as a
    Ray actor in the first step. Online GRPO plays its games in those workers and keeps verl's number."""
    config = verl_config(verl_overrides(tmp_path, "grpo"))
    assert (config.actor_rollout_ref.rollout.agent.num_workers, config.reward.num_workers) == (1, 1)
    online = verl_config(verl_overrides(tmp_path / "online", "grpo-online"))
    assert online.actor_rollout_ref.rollout.agent.num_workers > 1 and online.reward.num_workers > 1
