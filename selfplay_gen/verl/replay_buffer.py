"""`QuickPollReplayBuffer`: verl's synchronous replay buffer, looking for a step's finished groups every
0.1 s instead of every 2 s.

verl's V1 trainer (`trainer.v1.trainer_mode=sync`) spends a step's `gen` in `ReplayBuffer.sample`, which
waits for the step's groups by polling the TransferQueue every `poll_interval` seconds: 2.0, with no
config key. A replayed game is ready at once, so with that sampler every offline GRPO step waits a whole
interval, on one GPU or two (bench/results/two_gpu_h100_2026-11-26/); an online step waits up to an
interval past its last game.

verl builds the sampler that `trainer.v1.sampler.custom_sampler.{path,name}` names with the built-in
one's arguments except the group-filtering ones (DAPO's `algorithm.filter_groups`), which only the
built-in class gets. The job's command line (`iterate.verl_jobs.SAMPLER`) hands them over in
`trainer.v1.sampler.sampler_kwargs` as interpolations of verl's own keys, and this class derives them
as verl's `_build_replay_buffer` does (tests/test_replay_buffer.py holds the two side by side).
"""

from __future__ import annotations

from typing import Any

from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

POLL_INTERVAL_S = 0.1


class QuickPollReplayBuffer(ReplayBuffer):
    def __init__(self, *, sampler_kwargs: Any, trainer_mode: str, **kwargs: Any) -> None:
        if trainer_mode != "sync":  # the async trainers sample through verl's ReplayBufferAsync
            raise ValueError(
                f"selfplay_gen's replay buffer serves trainer.v1.trainer_mode=sync, not {trainer_mode!r}; "
                "add trainer.v1.sampler.custom_sampler.path=null to sample through verl's own"
            )
        options = sampler_kwargs or {}
        filter_groups = options.get("filter_groups") or {}
        metric = filter_groups.get("metric") if filter_groups.get("enable", False) else None
        refill = bool(options.get("sync_refill_failed_groups", False))
        batch = options.get("train_batch_size")
        super().__init__(
            sampler_kwargs=sampler_kwargs,
            poll_interval=float(options.get("poll_interval_s", POLL_INTERVAL_S)),
            filter_groups_metric=metric,
            sync_refill_failed_groups=refill,
            train_batch_size=batch,
            gen_batch_size=1 if metric is not None or refill else (options.get("gen_batch_size") or batch),
            max_inflight_gen_batches=filter_groups.get("max_inflight_gen_batches", 1) if metric is not None else 1,
            trainer_mode=trainer_mode,
            **kwargs,
        )
