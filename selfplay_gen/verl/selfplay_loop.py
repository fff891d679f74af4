"""`selfplay_online`: play fresh games with the policy being trained in both seats, inside verl's
rollout, and train on them.

Mapping games onto verl's rows, sessions and GRPO groups. verl runs `rollout.n` sessions per
dataset row, each returning ONE trajectory, and GRPO groups the n sessions of a row. So
`selfplay-gen init` writes one row per (instance, seat): the same instance twice, for seat 0 and
seat 1. Each session of the row for seat s plays a whole game of that instance (the policy in
both seats, token in, token out through verl's `server_manager.generate`) and returns seat s's
trajectory with its reward in the game. A group is then n games of one instance seen from
one seat: their rewards differ from game to game, so the advantage is not zero (a group made of
the two seats of ONE game would always have zero advantage, both seats getting the same reward).
Both seats are trained because both rows exist. (Each game trains one seat; the other seat's
tokens are played but not returned.)

It plays the game the row names (`selfplay-gen init --game NAME`, with the game's options such
as a reward mode; rows without one are of `games.UNNAMED`), and each seat's reward is its own
(`outcome.rewards`). The game itself is `runner.play_game` with two `LLMPlayer`s, exactly as in
offline generation;
only the backend differs: `ServerManagerBackend` sends each turn to verl's server manager with
request id = game and seat, so every turn of a seat reaches the same server (prefix cache).

A trajectory of seat s: prompt_ids = its first prompt, response_ids = everything after it up to
its last sampled id, response_mask = 1 exactly on the ids it sampled (partner moves, feedback
and chat template are 0), response_logprobs = the sampling logprobs (0 elsewhere) when
`rollout.calculate_log_probs`. The seat's context may grow at most `data.max_response_length`
past its first prompt: the next turn that would not fit ends the game with termination
`context_length` (reward 0). A seat that never sampled (its partner ended the game first) or
whose context broke the append-only invariant returns its initial prompt and one masked
end-of-turn id: nothing of it is trained, but its game's reward still counts in its group.
A game that failed (the record has a `failure`: a backend error such as an aborted request, or
a broken token invariant) is never trained either: both seats return that fully masked
trajectory, and its reward (0: no agreement) still counts in the group's mean and std, since
verl's GRPO cannot leave one session of a group out. The reward is `selfplay_gen.reward`'s training
reward, the same as offline (`+selfplay.invalid_move_penalty`, `+selfplay.joint_weight`,
`+selfplay.own_plan_weight` and `+selfplay.misstatement_penalty`, as `selfplay-convert`'s options; the
joint-outcome and own-view terms apart in the output's `joint_term` and `own_plan_term`). The game's own
measures (its evaluation row's numbers: agreement, invalid moves, cells stated, ...) go with it as
`reward_extra_info`, which verl's validation averages per validation (val-aux/<data source>/<measure>/mean@1) and
`online_trainer` per training step (games/<measure>/mean).

`+selfplay.move_credit=W` (W > 0) adds `move_credits` to a trained trajectory's extra fields: [response index,
credit] for each token of the seat's valid moves that a part the game credits covers (`Game.move_credits`, on
the turn's decoded text; `token_credits`), which `online_trainer` adds, weighted, to those tokens' advantages.

Game settings come from the optional trainer config group `selfplay` (Hydra
`+selfplay.max_moves=30 +selfplay.max_invalid=3 +selfplay.max_new_tokens=512
+selfplay.invalid_move_penalty=0`; unset, the defaults of every run: `selfplay_gen.sampling`); sampling
(temperature, top_p, top_k, logprobs) is verl's, its `rollout.val_kwargs` during validation (greedy by
verl's default; `selfplay-gen iterate` sets them to the run's sampling).

`+selfplay.partner_temperature=T` samples the seat that is not trained at temperature T (at most
the turn's own, so a greedy validation stays greedy). With T=0 the partner answers greedily: in a group of
n games of one instance and seat, the partner's replies then follow from the trained seat's moves
alone, so the rewards' differences, and the advantages, credit the trained seat's choices rather
than the partner's sampling luck. By default both seats sample alike.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from ..backends.base import Backend, BackendError, Generation, SamplingParams
from ..evaluation.protocol import game_measures
from ..games import GameConfig
from ..games.base import Game, GameInstance, Limits, Observation
from ..players import LLMPlayer
from ..records import Record
from ..reward import RewardTerms, joint_term, own_plan_term, training_reward
from ..runner import GameSpec, play_game
from ..sampling import Sampling
from ..seat_tokens import sampled
from ..token_context import token_context
from .init_data import game_of, initial_messages


class ServerManagerBackend(Backend):
    """A `Backend` over verl's LLM server manager: token ids in, token ids and logprobs out.

    A turn ended when its last id is the chat template's end-of-turn id or a requested stop id:
    verl's servers report stop reasons differently (SGLang "stop"/"length", vLLM "completed" for
    both), and only an ended turn can be followed by a chat-template delta."""

    name = "verl"

    def __init__(self, server_manager, verl_params: dict[str, Any], end_of_turn_id: int, model: str = ""):
        self.server_manager, self.verl_params, self.end_of_turn_id, self.model = (
            server_manager,
            verl_params,
            end_of_turn_id,
            model,
        )
        self.weight_versions: list[int] = []  # trainer steps of the weights that served each turn

    def versions(self) -> dict[str, int | None]:
        """verl's V1 trainer measures staleness from the weight versions a trajectory spans."""
        seen = self.weight_versions or [0]  # a server that reports none served the initial weights
        return {"min_global_steps": min(seen), "max_global_steps": max(seen)}

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, session: str, messages: list[dict] | None = None
    ) -> Generation:
        request = {
            **self.verl_params,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_new_tokens,
        }
        if params.stop_token_ids:
            request["stop_token_ids"] = list(params.stop_token_ids)
        output = await self.server_manager.generate(request_id=session, prompt_ids=prompt_ids, sampling_params=request)
        if output.stop_reason in ("abort", "aborted"):
            raise BackendError(f"{session}: the rollout server aborted the request")
        self.weight_versions += [
            v for key in ("min_global_steps", "max_global_steps") if (v := output.extra_fields.get(key)) is not None
        ]
        ids = list(output.token_ids)
        ended = bool(ids) and (ids[-1] == self.end_of_turn_id or ids[-1] in params.stop_token_ids)
        return Generation(
            ids,
            list(output.log_probs) if output.log_probs else None,
            "stop" if ended else "length",
            len(prompt_ids),
            int(output.extra_fields.get("num_cached_tokens") or 0),
        )


class SelfPlayAgentLoop(AgentLoopBase):
    """Plays one game of the row's instance and returns the row's seat (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        settings = self.config.get("selfplay") or {}
        self.limits = Limits(
            int(settings.get("max_moves", Limits.max_moves)), int(settings.get("max_invalid", Limits.max_invalid))
        )
        self.max_new_tokens = int(settings.get("max_new_tokens", Sampling.max_new_tokens))
        self.reward_terms = RewardTerms.of(settings)  # as selfplay-convert's options set them
        self.move_credit = float(settings.get("move_credit", 0.0))  # online_trainer adds it to the advantages
        partner = settings.get("partner_temperature")
        self.partner_temperature = None if partner is None else float(partner)
        rollout = self.rollout_config
        self.max_context = (rollout.get("max_model_len") or rollout.prompt_length + rollout.response_length) - 1

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        info = kwargs["extra_info"]
        named = game_of(info)
        game = GameConfig(named.name, self.limits, named.options)
        instance = game.new().instance_type.from_dict(json.loads(info["instance"]))
        seat = int(info["player"])
        spec = GameSpec(f"{info['game_id']}/{uuid4().hex[:12]}", int(info.get("index", 0)), 0, instance)
        end_of_turn = token_context(self.tokenizer).end_of_turn_id
        backend = ServerManagerBackend(
            self.server_manager, sampling_params, end_of_turn, self.config.actor_rollout_ref.model.path
        )
        params = SamplingParams(
            float(sampling_params.get("temperature", 1.0)),
            float(sampling_params.get("top_p", 1.0)),
            self.max_new_tokens,
            (end_of_turn,),
        )
        partner_params = params
        if self.partner_temperature is not None:
            partner_params = replace(params, temperature=min(self.partner_temperature, params.temperature))

        def player(spec: GameSpec, s: int, _game: Game[Any, Any], start: Observation) -> LLMPlayer:
            budget = self.rollout_config.response_length if s == seat else None  # only the trained seat's
            return LLMPlayer(
                s,
                start.system[s],
                backend,
                self.tokenizer,
                params if s == seat else partner_params,
                f"{spec.game_id}/p{s}",
                self.max_context,
                response_length=budget,
            )

        record = await play_game(spec, (player, player), game, {"backend": backend.name, "model": backend.model})
        outcome = record["outcome"]
        credits = {}
        if self.move_credit and _trained(record, seat):
            judge = game.new()
            judge.reset(instance)
            credits["move_credits"] = token_credits(record, seat, judge, self.tokenizer)
        return AgentLoopOutput(
            **self._trajectory(record, seat, game, instance),
            reward_score=training_reward(record, seat, self.reward_terms),
            num_turns=len(record["players"][seat]["messages"]),
            metrics=AgentLoopMetrics(),
            extra_fields={
                "game_id": record["game_id"],
                "normalized_reward": outcome["rewards"][seat],  # the seat's own reward, as convert's rows
                # the training reward's joint-outcome part and its own-view part
                "joint_term": joint_term(record, self.reward_terms.joint_weight),
                "own_plan_term": own_plan_term(record, seat, self.reward_terms.own_plan_weight),
                "termination": outcome["termination"],
                "failed": bool(record["failure"]),
                # logged as val-aux/<data source>/<name>/mean@1 (validation), games/<name>/mean (training)
                "reward_extra_info": game_measures(record),
                **backend.versions(),
                **credits,
            },
        )

    def _trajectory(self, record: Record, seat: int, game: GameConfig, instance: GameInstance) -> dict:
        """Seat `seat`'s ids split into prompt and response, cut after its last sampled id."""
        log = record["players"][seat]
        if not _trained(record, seat):
            return self._untrained(game, instance, seat)
        tokens = sampled(log)
        last = log["turns"][-1]
        end = last["prompt_len"] + len(last["output_ids"]) - tokens.prompt_len
        if tokens.prompt_len > self.rollout_config.prompt_length:
            raise ValueError(
                f"{record['game_id']} seat {seat}: first prompt of {tokens.prompt_len} tokens exceeds "
                f"data.max_prompt_length={self.rollout_config.prompt_length}; it needs the system prompt "
                f"plus one partner move (selfplay.max_new_tokens={self.max_new_tokens})"
            )
        logprobs = None
        if self.rollout_config.calculate_log_probs:
            if tokens.logprobs is None:
                raise ValueError(f"{record['game_id']}: the rollout server returned no logprobs")
            logprobs = tokens.logprobs[:end].tolist()
        return {
            "prompt_ids": tokens.token_ids[: tokens.prompt_len].tolist(),
            "response_ids": tokens.token_ids[tokens.prompt_len : tokens.prompt_len + end].tolist(),
            "response_mask": tokens.own[:end].tolist(),
            "response_logprobs": logprobs,
        }

    def _untrained(self, game: GameConfig, instance: GameInstance, seat: int) -> dict:
        prompt = self.tokenizer.apply_chat_template(
            initial_messages(game, instance, seat), tokenize=False, add_generation_prompt=True
        )
        return {
            "prompt_ids": self.tokenizer.encode(prompt, add_special_tokens=False),
            "response_ids": [token_context(self.tokenizer).end_of_turn_id],
            "response_mask": [0],
            "response_logprobs": [0.0] if self.rollout_config.calculate_log_probs else None,
        }


def _trained(record: Record, seat: int) -> bool:
    """Whether `seat`'s trajectory trains: a game that did not fail, where the seat sampled with its context
    append-only."""
    log = record["players"][seat]
    return not record["failure"] and bool(log["turns"]) and bool(log["invariant_ok"])


def token_credits(record: Record, seat: int, judge: Game[Any, Any], tokenizer) -> list[list[float]]:
    """[response index, credit] of each token of `seat`'s valid turns that a span of `judge.move_credits` covers
    (a token whose decoded characters meet the span's), indices counted from the seat's first response token as
    its trajectory's `response_ids` are. `judge` is the record's game, reset to its instance."""
    log = record["players"][seat]
    acts = [event for event in record["events"] if event["player"] == seat and event["kind"] != "stop"]
    if len(acts) != len(log["turns"]):
        raise ValueError(f"{record['game_id']} seat {seat}: {len(log['turns'])} turns but {len(acts)} moves")
    start, credits = log["turns"][0]["prompt_len"], []
    for turn, act in zip(log["turns"], acts, strict=True):
        ids = turn["output_ids"]
        text = tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        spans = [] if act["kind"] == "invalid" else judge.move_credits(seat, text)
        if not spans:
            continue
        ends = _char_ends(ids, tokenizer)
        for k, (low, high) in enumerate(zip([0, *ends[:-1]], ends, strict=True)):
            credit = next((c for begin, end, c in spans if low < end and begin < high), None)
            if credit is not None:
                credits.append([turn["prompt_len"] - start + k, credit])
    return credits


def _char_ends(ids: list[int], tokenizer) -> list[int]:
    """Where each id's characters end in the decoded text of `ids` (never before the previous id's end: a byte
    of a character split over ids decodes to nothing new)."""
    ends, last = [], 0
    for k in range(1, len(ids) + 1):
        decoded = tokenizer.decode(ids[:k], skip_special_tokens=True, clean_up_tokenization_spaces=False)
        last = max(last, len(decoded.rstrip("\ufffd")))
        ends.append(last)
    return ends
