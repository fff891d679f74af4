"""`selfplay_replay`: train on games already played, by handing verl one seat's stored tokens.

A row written by `selfplay-convert` holds a seat's whole context (`extra_info.token_ids`), where
its initial prompt ends (`prompt_len`), which response ids the seat sampled (`response_mask`: 1 =
own, 0 = partner moves, game feedback, template) and their logprobs. This loop returns exactly
those ids and masks, without calling the inference server, with `reward_score` = the row's
`advantage`.

Why `rollout.n=1`: verl gives every dataset row its own random `uid` and GRPO normalizes within
a uid, so a dataset column cannot choose the group. The converter therefore normalizes each
group (the games of one instance) itself and stores the result as `advantage`; with n=1 each row
is a group of one, for which verl's GRPO subtracts mean 0 and divides by std 1, passing the
advantage through unchanged. With n>1 verl would replay the same row n times and compute a zero
advantage.

Nothing is truncated: a row that does not fit `data.max_prompt_length` /
`data.max_response_length` is an error naming the game, since the converter enforces limits.
"""
from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput


class ReplayError(ValueError):
    """A replay row that cannot be trained as it is; the message names the game and seat."""


def _fits(rollout_config, game: str, prompt_len: int, response_len: int) -> None:
    if prompt_len > rollout_config.prompt_length:
        raise ReplayError(f"{game}: prompt of {prompt_len} tokens exceeds data.max_prompt_length="
                          f"{rollout_config.prompt_length}; raise it or convert with a smaller prompt limit")
    if response_len > rollout_config.response_length:
        raise ReplayError(f"{game}: response of {response_len} tokens exceeds data.max_response_length="
                          f"{rollout_config.response_length}; raise it or convert with a smaller response limit")


class ReplayAgentLoop(AgentLoopBase):
    """Returns one stored perspective of one game (see the module docstring)."""

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        info = kwargs["extra_info"]
        game = f"game {info.get('game_id')!r} seat {info.get('player')}"
        try:
            token_ids = [int(t) for t in info["token_ids"]]
            prompt_len = int(info["prompt_len"])
            mask = [int(m) for m in info["response_mask"]]
            advantage = float(info["advantage"])
        except (KeyError, TypeError) as err:
            raise ReplayError(f"{game}: extra_info lacks a valid replay field ({err!r}); "
                              "was this row written by selfplay-convert?") from None
        response_ids = token_ids[prompt_len:]
        if len(mask) != len(response_ids):
            raise ReplayError(f"{game}: response_mask has {len(mask)} entries for {len(response_ids)} response ids")
        _fits(self.rollout_config, game, prompt_len, len(response_ids))
        return AgentLoopOutput(
            prompt_ids=token_ids[:prompt_len],
            response_ids=response_ids,
            response_mask=mask,
            response_logprobs=self._logprobs(info, game, mask),
            reward_score=advantage,
            num_turns=len(info.get("messages") or []),
            metrics=AgentLoopMetrics(),
            # Stored games were played before this run's first update: weight version 0.
            extra_fields={"game_id": info.get("game_id"), "normalized_reward": info.get("normalized_reward"),
                          "min_global_steps": 0, "max_global_steps": 0},
        )

    def _logprobs(self, info: dict, game: str, mask: list[int]) -> list[float] | None:
        """Stored sampling logprobs (0 on context ids) when verl wants rollout logprobs, else None,
        so that every row of a batch agrees."""
        if not self.rollout_config.calculate_log_probs:
            return None
        stored = info.get("logprobs")
        if stored is None:
            raise ReplayError(f"{game}: no stored logprobs (tokens_source={info.get('tokens_source')!r}); "
                              "replay it with actor_rollout_ref.rollout.calculate_log_probs=False")
        if len(stored) != len(mask):
            raise ReplayError(f"{game}: {len(stored)} logprobs for {len(mask)} response ids")
        return [float(lp) if own and lp is not None else 0.0 for lp, own in zip(stored, mask)]
