"""verl's command lines for one training job (GRPO through `verl.trainer.main_ppo` with this
project's agent loops, or supervised fine-tuning through verl's SFT trainer), and the merge of a
saved checkpoint into a Hugging Face directory that SGLang can serve."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click

from ..verl import ONLINE_MODE, ONLINE_TRAINER, REPLAY_MODE, REPLAY_TRAINER
from .config import PolicyLoss, Sampling, TrainJob, Verl, number
from .shell import Shell, StepFailed

# A GRPO row is a prompt or a group's game ids (no image, no tokenizing work), so verl's dataloader
# reads them in the trainer's own process: with worker processes (verl's default, 8), the trainer's
# last step returns with the train iterator still prefetching, and Ray's teardown kills those workers,
# which printed "RuntimeError: DataLoader worker ... is killed by signal: Killed" after a finished run.
DATALOADER_IN_PROCESS = "data.dataloader_num_workers=0"
ROLLOUT_N_UNKNOWN = "K"  # a dry run before conversion: rollout_n of convert_summary.json
# the line verl's trainers print when their workers are up and the first step starts
VERL_READY = "Training Progress"


def trainer_mode(mode: str, module: str) -> list[str]:
    """The overrides that run verl's V1 trainer of `mode`, registered by `module`: verl looks the mode up in its
    task runner's process, which imports the module verl is told to import (VERL_USE_EXTERNAL_MODULES) through
    the Ray runtime environment verl starts its workers in."""
    return [
        f"trainer.v1.trainer_mode={mode}",
        f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES={module}",
    ]


# offline GRPO replays stored games: verl's sync trainer without a rollout engine (selfplay_gen.verl.replay_trainer)
REPLAY_TRAINER_MODE = trainer_mode(REPLAY_MODE, REPLAY_TRAINER)
# online GRPO: verl's sync trainer that also logs each step's game measures (selfplay_gen.verl.online_trainer)
ONLINE_TRAINER_MODE = trainer_mode(ONLINE_MODE, ONLINE_TRAINER)
# A replayed group is stored tokens and the rewards its games recorded: one agent-loop worker hands them over, and
# the one reward worker verl requires scores nothing. verl's default is eight of each, Ray actors that each start a
# Python importing torch and verl within the first step's wall time.
REPLAY_WORKERS = ["actor_rollout_ref.rollout.agent.num_workers=1", "reward.num_workers=1"]
# GRPO samples each step's groups through selfplay_gen.verl.replay_buffer (it looks for finished groups
# every 0.1 s, verl's own every 2 s); verl builds such a sampler without the group-filtering settings,
# so they go along as interpolations of verl's own keys, resolved before the sampler is built
SAMPLER = [
    "trainer.v1.sampler.custom_sampler.path=pkg://selfplay_gen.verl.replay_buffer",
    "trainer.v1.sampler.custom_sampler.name=QuickPollReplayBuffer",
    *(
        f"+trainer.v1.sampler.sampler_kwargs.{name}=${{{key}}}"
        for name, key in (
            ("filter_groups", "algorithm.filter_groups"),
            ("train_batch_size", "data.train_batch_size"),
            ("gen_batch_size", "data.gen_batch_size"),
            ("sync_refill_failed_groups", "trainer.v1.sampler.sync_refill_failed_groups"),
        )
    ),
]


def sft_command(job: TrainJob, verl: Verl) -> list[str]:
    """verl's SFT trainer (selfplay_gen.verl.sft_trainer: verl's, with chunked log-probs) on multi-turn
    chats, loss on the assistant turns. Without flash-attn verl's engine cannot pack sequences, so it
    pads (use_remove_padding=False), in token-budget micro-batches without torch.compile or
    recomputation, which a small model's step needs to keep its GPU busy (bench/results/learning/)."""
    if verl.nnodes > 1:
        if verl.node_rank is None or not verl.master_addr:
            raise click.UsageError(f"sft on {verl.nnodes} nodes: set NODE_RANK and MASTER_ADDR on each (see --help)")
        nodes = [
            f"--node-rank={verl.node_rank}",
            f"--master-addr={verl.master_addr}",
            f"--master-port={verl.master_port}",
        ]
    else:
        nodes = ["--standalone"]
    lora: list[str] = []
    if job.lora_rank > 0:
        alpha = job.lora_alpha if job.lora_alpha is not None else 2 * job.lora_rank
        lora = [f"model.lora_rank={job.lora_rank}", f"model.lora_alpha={alpha}"]
    max_length = verl.max_length or verl.max_prompt_length + verl.max_response_length
    steps = [f"trainer.total_training_steps={job.total_steps}"] if job.total_steps else []
    return [
        verl.python, "-m", "torch.distributed.run", *nodes, f"--nnodes={verl.nnodes}",
        f"--nproc_per_node={verl.n_gpus}", "-m", "selfplay_gen.verl.sft_trainer",
        f"data.train_files={job.train_files}", f"data.val_files={job.val_files}", "data.messages_key=messages",
        f"data.max_length={max_length}", "data.truncation=error",
        f"data.train_batch_size={job.batch_size}", f"data.micro_batch_size_per_gpu={verl.micro_batch_size}",
        f"data.max_token_len_per_gpu={verl.sft_micro_tokens}", "engine.use_torch_compile=False",
        f"model.enable_gradient_checkpointing={verl.gradient_checkpointing}",
        f"engine.strategy={verl.fsdp_strategy}",
        f"model.path={job.model}", f"model.use_remove_padding={verl.use_remove_padding}",
        f"+model.override_config.attn_implementation={verl.attn_impl}", *lora,
        f"optim.lr={job.lr}", "optim.lr_warmup_steps_ratio=0.05", "optim.lr_scheduler_type=cosine",
        verl.logger_override(), f"trainer.project_name={verl.project}", f"trainer.experiment_name={job.experiment}",
        f"trainer.n_gpus_per_node={verl.n_gpus}", f"trainer.nnodes={verl.nnodes}", "trainer.save_freq=-1",
        "trainer.test_freq=-1", f"trainer.total_epochs={job.epochs}", *steps,
        f"trainer.default_local_dir={job.out_dir / 'checkpoints'}", "trainer.resume_mode=disable",
        hydra_dir(job), *shlex.split(verl.sft_args), *job.overrides,
    ]  # fmt: skip


def starts_engine(job: TrainJob, verl: Verl) -> bool:
    """Whether the job's verl starts its rollout engine: online GRPO samples from it; offline GRPO starts it
    only with `verl.offline_engine` and not resident (else `REPLAY_TRAINER_MODE`); SFT has none."""
    return job.mode == "online" or (job.mode == "offline" and verl.offline_engine and not verl.resident)


def ppo_command(
    job: TrainJob, verl: Verl, loss: PolicyLoss, sampling: Sampling, agent_loops: str, rollout_n: str | int
) -> list[str]:
    """verl's GRPO on replayed games (offline: stored log-probs as rollout log-probs, truncated importance
    sampling; with `verl.offline_engine` false, no rollout engine) or on games its rollout engine plays
    (online: the `selfplay.*` settings of the agent loop)."""
    # rollout.name names the engine; without one, verl resolves its server class and starts none of them
    rollout, engine = ["actor_rollout_ref.rollout.name=sglang"], []
    if not starts_engine(job, verl):
        rollout += REPLAY_TRAINER_MODE
    else:
        rollout += [
            "actor_rollout_ref.rollout.mode=async",
            f"actor_rollout_ref.rollout.tensor_model_parallel_size={verl.rollout_tp}",
            f"actor_rollout_ref.rollout.gpu_memory_utilization={verl.gpu_memory_utilization}",
            f"actor_rollout_ref.rollout.enforce_eager={verl.enforce_eager}",
        ]
        engine = [
            f"+actor_rollout_ref.rollout.engine_kwargs.sglang.{kv}" for kv in (verl.sglang_engine_kwargs or "").split()
        ]
    played = {"temperature": number(sampling.temperature), "top_p": number(sampling.top_p)}
    sampled = [f"actor_rollout_ref.rollout.{key}={value}" for key, value in played.items()]
    if job.mode == "offline":
        mode = [
            *REPLAY_WORKERS,
            *sampled,
            "actor_rollout_ref.rollout.calculate_log_probs=True",
            f"algorithm.rollout_correction.rollout_is={verl.rollout_is}",
            f"algorithm.rollout_correction.rollout_is_threshold={number(verl.rollout_is_threshold)}",
        ]
    else:
        # validation samples as training and the run's evaluation do, not greedily (verl's default): a
        # greedy policy can repeat itself to the move limit in a game the sampled one settles
        mode = [
            *sampled,
            *(f"actor_rollout_ref.rollout.val_kwargs.{key}={value}" for key, value in played.items()),
            "actor_rollout_ref.rollout.val_kwargs.do_sample=True",
            f"+selfplay.max_moves={sampling.max_moves}",
            f"+selfplay.max_new_tokens={sampling.max_new_tokens}",
            *ONLINE_TRAINER_MODE,
        ]
        if verl.rollout_partner_temperature is not None:
            mode.append(f"+selfplay.partner_temperature={number(verl.rollout_partner_temperature)}")
        if verl.filter_groups:
            mode += [
                "algorithm.filter_groups.enable=True",
                "algorithm.filter_groups.metric=reward",  # each game's reward_score, as verl's rm_scores
                f"algorithm.filter_groups.max_inflight_gen_batches={verl.filter_groups}",
            ]
    if job.total_steps:
        mode.append(f"trainer.total_training_steps={job.total_steps}")
    micro = [f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={verl.micro_batch_size}"]
    if verl.ppo_micro_tokens:
        # the rollout's log-prob micro-batches follow the actor's settings (verl's config interpolates them)
        micro = [
            "actor_rollout_ref.actor.use_dynamic_bsz=True",
            f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={verl.ppo_micro_tokens}",
        ]
    algorithm, *actor_loss = loss.overrides()
    return [
        verl.python, "-m", "verl.trainer.main_ppo", algorithm, "algorithm.use_kl_in_reward=False",
        f"data.train_files={job.train_files}", f"data.val_files={job.val_files}",
        f"data.train_batch_size={job.batch_size}",
        f"data.max_prompt_length={verl.max_prompt_length}", f"data.max_response_length={verl.max_response_length}",
        "data.filter_overlong_prompts=True", "data.truncation=error", DATALOADER_IN_PROCESS,
        f"actor_rollout_ref.model.path={job.model}", f"actor_rollout_ref.actor.strategy={verl.fsdp_strategy}",
        "actor_rollout_ref.model.external_lib=selfplay_gen.verl.worker_setup",
        f"+actor_rollout_ref.model.override_config.attn_implementation={verl.attn_impl}",
        f"actor_rollout_ref.model.use_remove_padding={verl.use_remove_padding}",
        f"actor_rollout_ref.model.enable_gradient_checkpointing={verl.gradient_checkpointing}",
        f"actor_rollout_ref.actor.optim.lr={job.lr}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={job.mini_batch_size or job.batch_size}",
        *micro,
        *actor_loss,
        *rollout, f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={verl.micro_batch_size}",
        f"actor_rollout_ref.rollout.n={rollout_n}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_loops}",
        *engine, *mode, *SAMPLER,
        verl.logger_override(), f"trainer.project_name={verl.project}", f"trainer.experiment_name={job.experiment}",
        f"trainer.n_gpus_per_node={verl.n_gpus}", f"trainer.nnodes={verl.nnodes}",
        f"trainer.save_freq={verl.save_freq}", f"trainer.test_freq={verl.test_freq}", "trainer.val_before_train=False",
        f"trainer.total_epochs={job.epochs}", f"trainer.default_local_dir={job.out_dir / 'checkpoints'}",
        hydra_dir(job), *job.overrides,
    ]  # fmt: skip


def hydra_dir(job: TrainJob) -> str:
    """Hydra's run directory (the composed config verl ran with) in the job's own directory, instead
    of outputs/DATE/TIME under wherever the job was started."""
    return f"hydra.run.dir={job.out_dir / 'hydra'}"


def saved_steps(checkpoints: Path) -> list[int]:
    """The steps verl saved under `checkpoints` (global_step_N), in order."""
    if not checkpoints.is_dir():
        return []
    found = (re.fullmatch(r"global_step_(\d+)", p.name) for p in checkpoints.iterdir() if p.is_dir())
    return sorted(int(m.group(1)) for m in found if m)


def last_step(checkpoints: Path) -> int:
    """The step of verl's latest checkpoint (latest_checkpointed_iteration.txt, else the highest saved)."""
    latest = checkpoints / "latest_checkpointed_iteration.txt"
    if latest.exists() and (checkpoints / f"global_step_{latest.read_text().strip()}").is_dir():
        return int(latest.read_text().strip())
    steps = saved_steps(checkpoints)
    if not steps:
        raise StepFailed("find-checkpoint", 1, f"no checkpoint under {checkpoints}")
    return steps[-1]


def merge(shell: Shell, job: TrainJob, verl: Verl, step: int | None, target: Path) -> None:
    """Merge the checkpoint of `step` (None: the last; a dry run shows N) into `target`. GRPO saves the
    weights under actor/, SFT at the step's top. selfplay_gen.verl.merge_lora runs verl's merger in the
    checkpoint's float32 and, for a LoRA run (whose merge writes the base weights and the adapter apart), folds
    the adapter in, so `target` is the trained model."""
    checkpoints = job.out_dir / "checkpoints"
    if shell.dry_run and step is None:
        name = "global_step_N"
        local = checkpoints / name / "actor" if job.mode != "sft" else checkpoints / name
    else:
        name = f"global_step_{step if step is not None else last_step(checkpoints)}"
        local = checkpoints / name
        if (local / "actor").is_dir():
            local = local / "actor"
    shell.run("merge", [verl.python, "-m", "selfplay_gen.verl.merge_lora", "--checkpoint", str(local), str(target)])
    shell.echo(f"merged {name} -> {target}")
