"""`selfplay_replay`: train on games already played, by handing verl the stored tokens of one
game of a group per trajectory.

A row written by `selfplay-convert --format grpo` is one GRPO group: the K games of one instance
seen from one seat (see convert/rows.py). Replay it with `actor_rollout_ref.rollout.n=K` (the
converter writes K to convert_summary.json as `rollout_n`). verl runs n trajectories of the row,
all with the same uid and the same arguments, and its own GRPO (`algorithm.adv_estimator=grpo`)
normalizes their `reward_score`s within the uid. The loop returns game j to trajectory j:

- verl's V1 trainer (the default, `trainer.use_v1=True`) sends each row to ONE agent-loop worker,
  which starts its n trajectories itself with `session_id` 0..n-1 (trainer/ppo/v1/agent_loop_tq.py,
  `_run_prompt`); the loop uses that `session_id`.
- The legacy trainer repeats each row n times, interleaved (`DataProto.repeat(n, interleave=True)`),
  then `AgentLoopManager.generate_sequences` cuts the batch into one equal, contiguous chunk per
  agent-loop worker (`DataProto.chunk`). The n copies then carry no copy number, so the loop
  counts, per process and row (`group_id`), the copies it has started and takes the count mod K.
  This is right only if the n copies of a row reach one worker: each chunk must hold whole rows,
  i.e. `data.train_batch_size` divisible by `actor_rollout_ref.rollout.agent.num_workers`
  (8 by default). run_selfplay_training.sh runs the V1 trainer, where this does not arise.

A game j >= T (the row's games without replayable tokens: too long, re-tokenized, or a seat that
never moved) returns game 0's prompt and one masked end-of-turn id with its reward: it counts in
the group's mean and std and trains nothing.

Sampling settings: the games were played with the row's `temperature` / `top_p`; training
them with other settings would mis-weigh them, so a mismatch with the `sampling_params` verl
passes is a ReplayError. Validation passes `rollout.val_kwargs` (greedy by default) and trains
nothing; the loop cannot see verl's `validate` flag, so it skips the check when the params are
exactly the val_kwargs and differ from the training ones.

Stored logprobs are returned as rollout logprobs when `rollout.calculate_log_probs` is on, so that
verl's rollout correction (`algorithm.rollout_correction.rollout_is`) can weigh these older-policy
tokens. Nothing is truncated: a game that does not fit `data.max_prompt_length` /
`data.max_response_length` is an error naming it, since the converter enforces the limits.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from ..token_context import token_context


class ReplayError(ValueError):
    """A replay row that cannot be trained as it is; the message names the group and game."""


class ReplayAgentLoop(AgentLoopBase):
    """Returns one stored game of a group (see the module docstring)."""

    started: Counter = Counter()  # legacy trainer: trajectories started per group, in this process

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        info = kwargs["extra_info"]
        group = info.get("group_id")
        try:
            game_ids, rewards = list(info["game_ids"]), [float(r) for r in info["rewards"]]
            trained = len(info["token_ids"])
            stored = (float(info["temperature"]), float(info["top_p"]))
        except (KeyError, TypeError) as err:
            raise ReplayError(
                f"group {group!r}: extra_info lacks a valid replay field ({err!r}); "
                "was this row written by selfplay-convert --format grpo?"
            ) from None
        if len(game_ids) != self.rollout_config.n:
            raise ReplayError(
                f"group {group!r} holds {len(game_ids)} games; replay it with "
                f"actor_rollout_ref.rollout.n={len(game_ids)}, not {self.rollout_config.n}"
            )
        self._check_sampling(sampling_params, stored, group)
        j = self._game_number(kwargs, group) % len(game_ids)
        where = f"group {group!r} game {game_ids[j]!r}"
        if j < trained:
            tokens = self._stored(info, j, where)
        else:
            tokens = self._masked(info)
        return AgentLoopOutput(
            **tokens,
            reward_score=rewards[j],
            num_turns=int(info["num_turns"][j]) if j < trained else 0,
            metrics=AgentLoopMetrics(),
            # Stored games were played before this run's first update: weight version 0.
            extra_fields={
                "game_id": game_ids[j],
                "normalized_reward": float(info["normalized_rewards"][j]),
                "min_global_steps": 0,
                "max_global_steps": 0,
            },
        )

    def _game_number(self, kwargs: dict, group: str) -> int:
        if "session_id" in kwargs:
            return int(kwargs["session_id"])
        number = self.started[group]
        self.started[group] += 1
        return number

    def _validating(self, sampling_params: dict) -> bool:
        rollout, val = self.rollout_config, self.rollout_config.val_kwargs
        used = (float(sampling_params["temperature"]), float(sampling_params["top_p"]))
        return used == (val.temperature, val.top_p) != (rollout.temperature, rollout.top_p)

    def _check_sampling(self, sampling_params: dict, stored: tuple[float, float], group: str) -> None:
        if self._validating(sampling_params):
            return
        for name, played in zip(("temperature", "top_p"), stored):
            used = float(sampling_params[name])
            if not math.isclose(used, played):
                raise ReplayError(
                    f"group {group!r} was played with {name}={played} but verl samples with "
                    f"{name}={used}; set actor_rollout_ref.rollout.{name}={played}"
                )

    def _stored(self, info: dict, j: int, where: str) -> dict:
        token_ids = [int(t) for t in info["token_ids"][j]]
        prompt_len = int(info["prompt_len"][j])
        mask = [int(m) for m in info["response_mask"][j]]
        response_ids = token_ids[prompt_len:]
        if len(mask) != len(response_ids):
            raise ReplayError(f"{where}: response_mask has {len(mask)} entries for {len(response_ids)} response ids")
        if prompt_len > self.rollout_config.prompt_length:
            raise ReplayError(
                f"{where}: prompt of {prompt_len} tokens exceeds data.max_prompt_length="
                f"{self.rollout_config.prompt_length}; raise it or convert with a smaller prompt limit"
            )
        if len(response_ids) > self.rollout_config.response_length:
            raise ReplayError(
                f"{where}: response of {len(response_ids)} tokens exceeds data.max_response_length="
                f"{self.rollout_config.response_length}; raise it or convert with a smaller "
                "response limit"
            )
        return {
            "prompt_ids": token_ids[:prompt_len],
            "response_ids": response_ids,
            "response_mask": mask,
            "response_logprobs": self._logprobs(info["logprobs"][j], mask, where),
        }

    def _masked(self, info: dict) -> dict:
        """A trajectory that trains nothing: game 0's prompt and one masked end-of-turn id."""
        return {
            "prompt_ids": [int(t) for t in info["token_ids"][0][: int(info["prompt_len"][0])]],
            "response_ids": [token_context(self.tokenizer).end_of_turn_id],
            "response_mask": [0],
            "response_logprobs": [0.0] if self.rollout_config.calculate_log_probs else None,
        }

    def _logprobs(self, stored, mask: list[int], where: str) -> list[float] | None:
        """Stored sampling logprobs (0 on context ids) when verl wants rollout logprobs, else None,
        so that every row of a batch agrees."""
        if not self.rollout_config.calculate_log_probs:
            return None
        if stored is None:
            raise ReplayError(
                f"{where}: no stored logprobs; replay it with actor_rollout_ref.rollout.calculate_log_probs=False"
            )
        if len(stored) != len(mask):
            raise ReplayError(f"{where}: {len(stored)} logprobs for {len(mask)} response ids")
        return [float(lp) if own and lp is not None else 0.0 for lp, own in zip(stored, mask)]
