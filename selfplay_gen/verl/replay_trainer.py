"""`trainer.v1.trainer_mode=replay`: verl's synchronous V1 trainer without a rollout engine, for offline
GRPO, whose agent loop (`selfplay_replay`) hands back stored games and never samples.

verl's synchronous trainer (`trainer_mode=sync`) starts an SGLang engine on the training GPUs, captures
its CUDA graphs, and puts it to sleep and wakes it with the new weights around every step; offline GRPO
would pay for all of it and use none. verl 0.9.1 lets a trainer of its registry go without it
(verl/trainer/ppo/v1/trainer_base.py): a trainer whose `_enable_hybrid_replicas` is False gets
`Role.Actor` workers, which build the actor (and a reference where the loss asks for one) but no rollout
(`_init_resource_pool_mgr`; `ActorRolloutRefWorker.init_model` builds a rollout only for a role with
"rollout" in it), and an `LLMServerManager.create_empty()`: a load balancer with no server (`_setup`).
This trainer is that, with the sync trainer's steps; what its hooks did with the engine (weights synced
after loading and after each step, the engine put to sleep after sampling) has nothing to act on, and
syncing would fail (an actor-only worker has no rollout to load weights into).

Old log-probs are still the actor's (verl's decoupled mode); the stored sampling log-probs are the
rollout log-probs that `algorithm.rollout_correction` weighs. verl looks a trainer up by name in the
task runner's process, so the job names this module in `VERL_USE_EXTERNAL_MODULES`, which verl imports
whenever it is imported (verl/__init__.py), and passes it to its Ray workers through
`ray_kwargs.ray_init.runtime_env` (`iterate.verl_jobs.REPLAY_TRAINER_MODE`).
"""

from __future__ import annotations

from omegaconf import DictConfig, open_dict
from verl.trainer.ppo.v1.trainer_base import PPOTrainer, register_trainer

from . import REPLAY_MODE


def as_synchronous(config: DictConfig) -> None:
    """Name a trainer of this project's own mode `sync` in `config`: verl's base tells its synchronous trainer
    from the asynchronous ones by that name (the replay buffer's mode, whole dataloader batches, no
    TransferQueue checkpoint), and the trainers here are synchronous."""
    with open_dict(config):
        config.trainer.v1.trainer_mode = "sync"


@register_trainer(REPLAY_MODE)
class ReplayTrainer(PPOTrainer):
    """verl's sync PPO trainer with actor-only workers and no LLM server (see the module docstring)."""

    _enable_hybrid_replicas = False

    def __init__(self, config: DictConfig):
        as_synchronous(config)
        with open_dict(config):
            # the empty LLM server manager checks the settings of the standalone servers it would otherwise
            # start (`LLMServerManager.__init__`: rollout.nnodes > 0); it starts none
            rollout = config.actor_rollout_ref.rollout
            rollout.nnodes = max(1, rollout.nnodes)
        super().__init__(config)

    def on_step_end(self):
        """No rollout engine takes the new weights."""

    def on_sample_end(self):
        """No rollout engine to put to sleep."""
