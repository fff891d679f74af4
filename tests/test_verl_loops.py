"""The verl plugin inside verl's real agent-loop machinery: `AgentLoopWorker` built from verl's own
trainer config (Hydra defaults + our overrides), rows loaded by `RLHFDataset` from parquet, the
loops instantiated from the registration YAML the way the worker does, and the worker's
post-processing into a padded batch. Only the LLM server is a stand-in: the real local
SmolLM2 model (through the local backend) or a script of fixed moves.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

import hydra
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker, DictConfigWrap, ToolListWrap, _agent_loop_registry
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.workers.rollout.replica import TokenOutput

from convert.rows import RowBatch, group_rows
from selfplay_gen.backends.base import BackendOptions, SamplingParams
from selfplay_gen.backends.local import LocalBackend
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import Limits
from selfplay_gen.games.matching.instance import Instance, score
from selfplay_gen.games.matching.moves import render_proposal
from selfplay_gen.games.matching.record import TERMINATIONS
from selfplay_gen.games.negotiation import Instance as NegotiationInstance
from selfplay_gen.games.negotiation import render_share
from selfplay_gen.players import LLMPlayer
from selfplay_gen.runner import GameSpec, play_game
from selfplay_gen.seat_tokens import sampled
from selfplay_gen.verl import ONLINE_AGENT, REPLAY_AGENT, config_path
from selfplay_gen.verl.init_data import init_command, initial_messages
from selfplay_gen.verl.replay_loop import ReplayAgentLoop, ReplayError
from selfplay_gen.verl.selfplay_loop import SelfPlayAgentLoop, ServerManagerBackend

PROMPT_LENGTH, RESPONSE_LENGTH, MAX_NEW_TOKENS = 640, 512, 48


def trainer_config(model_dir: str, *overrides: str, max_new_tokens: int = MAX_NEW_TOKENS):
    with initialize_config_module("verl.trainer.config", version_base=None):
        return compose(
            "ppo_trainer",
            overrides=[
                f"actor_rollout_ref.model.path={model_dir}",
                "actor_rollout_ref.rollout.name=sglang",
                f"actor_rollout_ref.rollout.agent.agent_loop_config_path={config_path()}",
                f"data.max_prompt_length={PROMPT_LENGTH}",
                f"data.max_response_length={RESPONSE_LENGTH}",
                f"+selfplay.max_new_tokens={max_new_tokens}",
                "+selfplay.max_moves=4",
                *overrides,
            ],
        )


class LocalServerManager:
    """Stand-in for verl's `LLMServerClient.generate`, answered by the real local model; keeps
    every call so tests can check which ids each session sampled."""

    def __init__(self, engine: LocalBackend):
        self.engine, self.calls = engine, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        params = SamplingParams(
            sampling_params["temperature"],
            sampling_params["top_p"],
            sampling_params["max_tokens"],
            tuple(sampling_params.get("stop_token_ids", ())),
        )
        gen = await self.engine.generate(list(prompt_ids), params, session=request_id)
        self.calls.append((request_id, list(prompt_ids), list(gen.output_ids)))
        return TokenOutput(
            token_ids=gen.output_ids,
            log_probs=gen.logprobs if sampling_params["logprobs"] else None,
            stop_reason=gen.finish_reason,
        )


class ScriptServerManager:
    """Stand-in server that plays fixed moves per seat (request ids end in /p0, /p1), each turn
    closed by <|im_end|> as a ChatML model closes it."""

    def __init__(self, tokenizer, script: dict[int, list[str]]):
        self.tokenizer, self.script, self.calls = tokenizer, {s: list(m) for s, m in script.items()}, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        text = self.script[int(request_id[-1])].pop(0)
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [
            self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        ]
        ids = ids[: sampling_params["max_tokens"]]
        self.calls.append((request_id, list(prompt_ids), ids))
        return TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids), stop_reason="stop")


def local_backend(tokenizer, model_dir: str) -> LocalBackend:
    """The in-process engine over the real local model (weights are loaded once per process)."""
    return LocalBackend(BackendOptions(model=model_dir, max_batch=4, seed=0), tokenizer)


@pytest.fixture
async def local_engine(tokenizer, local_model_dir):
    async with local_backend(tokenizer, local_model_dir) as engine:
        yield engine


def worker_for(cfg, server_manager) -> AgentLoopWorker:
    return AgentLoopWorker(cfg, server_manager)


def make_loop(worker: AgentLoopWorker, agent_name: str):
    """Instantiate a registered loop exactly as `AgentLoopWorker._run_agent_loop` does."""
    return hydra.utils.instantiate(
        config=_agent_loop_registry[agent_name],
        trainer_config=DictConfigWrap(config=worker.config),
        server_manager=worker.llm_client,
        tokenizer=worker.tokenizer,
        processor=worker.processor,
        hf_model_type=worker.hf_model_type,
        dataset_cls=worker.dataset_cls,
        data_config=DictConfigWrap(worker.config.data),
        tools=ToolListWrap(worker.tools),
    )


def dataset(path, cfg, tokenizer) -> RLHFDataset:
    return RLHFDataset(data_files=str(path), tokenizer=tokenizer, config=cfg.data)


def batch_of(ds: RLHFDataset, rows: list[int]) -> DataProto:
    batch = DataProto.from_single_dict(collate_fn([ds[i] for i in rows]))
    batch.meta_info = {"global_steps": 1, "validate": False}
    return batch


def own_spans(calls, session_suffix: str, full_ids: list[int]) -> np.ndarray:
    """1 where `full_ids` holds an id that the server sampled for that seat's session."""
    own = np.zeros(len(full_ids), dtype=np.int8)
    for request_id, prompt, out in calls:
        if (
            request_id.endswith(session_suffix)
            and full_ids[: len(prompt)] == prompt
            and full_ids[len(prompt) : len(prompt) + len(out)] == out
        ):
            own[len(prompt) : len(prompt) + len(out)] = 1
    return own


# ---------------------------------------------------------------- registration and init data


def test_registration_yaml_resolves_both_loops():
    entries = OmegaConf.load(config_path())
    targets = {e.name: hydra.utils.get_class(e._target_) for e in entries}
    assert targets == {REPLAY_AGENT: ReplayAgentLoop, ONLINE_AGENT: SelfPlayAgentLoop}


def test_config_path_helper_prints_the_installed_yaml():
    from selfplay_gen.verl.__main__ import main

    result = CliRunner().invoke(main, ["--config-path"])
    assert result.exit_code == 0 and result.output.strip() == config_path()


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("init")
    result = CliRunner().invoke(
        init_command, ["--num-train", "3", "--num-test", "2", "--seed", "40", "--out-dir", str(out)]
    )
    assert result.exit_code == 0, result.output
    return out


def test_init_writes_one_row_per_instance_and_seat_with_disjoint_splits(init_dir, tokenizer, local_model_dir):
    cfg = trainer_config(local_model_dir)
    train, test = (
        dataset(init_dir / "train.parquet", cfg, tokenizer),
        dataset(init_dir / "test.parquet", cfg, tokenizer),
    )
    assert (len(train), len(test)) == (6, 4)
    rows = [train[i] for i in range(len(train))]
    assert [r["extra_info"]["player"] for r in rows] == [0, 1] * 3
    assert {r["agent_name"] for r in rows} == {ONLINE_AGENT}
    seeds = lambda ds: {Instance.from_json(ds[i]["extra_info"]["instance"]).seed for i in range(len(ds))}
    assert seeds(train) == {40, 41, 42} and seeds(test) == {10**9, 10**9 + 1}  # validation: development
    first = Instance.from_json(rows[0]["extra_info"]["instance"])
    game = GameConfig()
    assert rows[0]["raw_prompt"] == initial_messages(game, first, 0)
    assert rows[1]["raw_prompt"] == initial_messages(game, first, 1)
    assert len({r["index"] for r in rows}) == 6


def test_init_refuses_to_overwrite_without_flag(init_dir):
    before = (init_dir / "train.parquet").read_bytes()
    result = CliRunner().invoke(init_command, ["--num-train", "1", "--num-test", "0", "--out-dir", str(init_dir)])
    assert result.exit_code != 0 and "--overwrite" in result.output
    assert (init_dir / "train.parquet").read_bytes() == before


# ---------------------------------------------------------------- replay


async def real_games(tokenizer, model_dir: str, count: int) -> list[dict]:
    """Records of games the real model played through `ServerManagerBackend`."""
    async with local_backend(tokenizer, model_dir) as engine:
        backend = ServerManagerBackend(
            LocalServerManager(engine), {"logprobs": True, "top_k": -1}, tokenizer.eos_token_id
        )
        params = SamplingParams(1.0, 1.0, MAX_NEW_TOKENS, (tokenizer.eos_token_id,))
        seat = lambda spec, s, game, start: LLMPlayer(
            s, start.system[s], backend, tokenizer, params, f"{spec.game_id}/p{s}"
        )
        instance = Instance.from_seed(7)
        return [
            await play_game(
                GameSpec(f"{instance.id}/{k}", 0, k, instance), (seat, seat), GameConfig(limits=Limits(max_moves=4)), {}
            )
            for k in range(count)
        ]


K_REPLAY = 3


def replay_rows(records: list[dict], masked: int = 0, temperature: float = 1.0) -> pa.Table:
    """Seat-0 group rows built by selfplay-convert's own row builders: K_REPLAY games, the last
    `masked` of them without tokens (as a too-long seat), rewards 0.1, 0.2, ..."""
    rows = RowBatch()
    trained = K_REPLAY - masked
    for k, record in enumerate(records[:trained]):
        rows.add(k, record, 0, sampled(record["players"][0]))
    group = {
        "index": 0,
        "group_id": "seed-7/p0",
        "instance_id": "seed-7",
        "player": 0,
        "temperature": temperature,
        "top_p": 1.0,
        "ground_truth": '{"best_reward": 100}',
        "trained": trained,
        "game_ids": [r["game_id"] for r in records[:K_REPLAY]],
        "rewards": [0.1 * (k + 1) for k in range(K_REPLAY)],
        "normalized_rewards": [0.0] * K_REPLAY,
        "terminations": [r["outcome"]["termination"] for r in records[:K_REPLAY]],
    }
    return group_rows(pa.Table.from_batches([rows.take()]), pd.DataFrame([{"game": "matching", **group}]))


@pytest.fixture(scope="module")
def played(tokenizer, local_model_dir) -> list[dict]:
    records = asyncio.run(real_games(tokenizer, local_model_dir, K_REPLAY))
    assert all(r["players"][0]["turns"] for r in records)
    return records


def replay_parquet(tmp_path, records, **kwargs):
    path = tmp_path / "train.parquet"
    pq.write_table(replay_rows(records, **kwargs), path)
    return path


def replay_config(model_dir: str, *overrides: str):
    return trainer_config(model_dir, f"actor_rollout_ref.rollout.n={K_REPLAY}", *overrides)


@pytest.mark.slow
async def test_replay_hands_each_game_of_the_group_to_one_session(played, tmp_path, tokenizer, local_model_dir):
    """verl's V1 trainer runs the n sessions of a row with session_id 0..n-1."""
    cfg = replay_config(local_model_dir)
    row = dataset(replay_parquet(tmp_path, played, masked=1), cfg, tokenizer)[0]
    loop = make_loop(worker_for(cfg, server_manager=None), REPLAY_AGENT)  # replay never calls the server
    outs = [await loop.run(sampling(loop), session_id=j, **row) for j in range(K_REPLAY)]
    assert [o.extra_fields["game_id"] for o in outs] == [r["game_id"] for r in played]
    assert [o.reward_score for o in outs] == pytest.approx([0.1, 0.2, 0.3])
    for out, record in zip(outs[:2], played):
        seat = record["players"][0]
        start = seat["turns"][0]["prompt_len"]
        assert out.prompt_ids + out.response_ids == seat["token_ids"] and out.prompt_ids == seat["token_ids"][:start]
        own = np.asarray(out.response_mask, bool)
        assert own.any() and np.allclose(
            np.asarray(out.response_logprobs)[own], [lp for t in seat["turns"] for lp in t["logprobs"]]
        )
        assert not np.asarray(out.response_logprobs)[~own].any()
    masked = outs[2]  # counts in the group, trains nothing
    assert masked.response_mask == [0] and masked.prompt_ids == outs[0].prompt_ids


@pytest.mark.slow
async def test_replay_batch_through_the_legacy_worker_keeps_groups_whole(played, tmp_path, tokenizer, local_model_dir):
    """The legacy trainer repeats a row n times (interleaved) with identical arguments; the
    copies must still get games 0..K-1, and verl's GRPO sees the K rewards under one index."""
    cfg = replay_config(local_model_dir)
    ds = dataset(replay_parquet(tmp_path, played), cfg, tokenizer)
    ReplayAgentLoop.started.clear()
    batch = batch_of(ds, [0]).repeat(repeat_times=K_REPLAY, interleave=True)
    out = await worker_for(cfg, server_manager=None).generate_sequences(batch)
    assert list(out.non_tensor_batch["game_id"]) == [r["game_id"] for r in played]
    assert out.batch["rm_scores"].sum(-1).tolist() == pytest.approx([0.1, 0.2, 0.3])
    for i, record in enumerate(played):
        ids = record["players"][0]["token_ids"]
        n_prompt = record["players"][0]["turns"][0]["prompt_len"]
        assert out.batch["prompts"][i, -n_prompt:].tolist() == ids[:n_prompt]
        assert out.batch["responses"][i, : len(ids) - n_prompt].tolist() == ids[n_prompt:]


@pytest.mark.slow
async def test_replay_refuses_rows_that_do_not_fit_or_were_sampled_otherwise(
    played, tmp_path, tokenizer, local_model_dir
):
    ds = dataset(replay_parquet(tmp_path, played, temperature=0.7), replay_config(local_model_dir), tokenizer)
    row = ds[0]
    loop = make_loop(worker_for(replay_config(local_model_dir), None), REPLAY_AGENT)
    with pytest.raises(ReplayError, match="temperature=0.7 but verl samples with temperature=1.0"):
        await loop.run(sampling(loop), session_id=0, **row)
    greedy = {**sampling(loop), "temperature": 0, "top_p": 1.0}  # validation: not trained, not checked
    assert (await loop.run(greedy, session_id=0, **row)).response_mask
    small = make_loop(
        worker_for(
            replay_config(local_model_dir, "actor_rollout_ref.rollout.temperature=0.7", "data.max_response_length=8"),
            None,
        ),
        REPLAY_AGENT,
    )
    with pytest.raises(ReplayError, match=played[0]["game_id"] + ".*max_response_length=8"):
        await small.run(sampling(small), session_id=0, **row)
    wrong_n = make_loop(worker_for(trainer_config(local_model_dir), None), REPLAY_AGENT)
    with pytest.raises(ReplayError, match=f"rollout.n={K_REPLAY}, not 1"):
        await wrong_n.run(sampling(wrong_n), session_id=0, **row)


# ---------------------------------------------------------------- online self-play


def sampling(worker) -> dict:
    rollout = worker.rollout_config
    return {
        "temperature": rollout.temperature,
        "top_p": rollout.top_p,
        "top_k": rollout.top_k,
        "repetition_penalty": 1.0,
        "logprobs": rollout.calculate_log_probs,
    }


async def play_online(cfg, server, row: dict):
    """One online self-play rollout of `row` through a worker whose server plays `server`'s script."""
    worker = worker_for(cfg, server)
    return await make_loop(worker, ONLINE_AGENT).run(sampling(worker), **row)


@dataclass
class Trajectory:
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]


def check_seat_trajectory(out, calls, seat: int, response_length: int) -> None:
    """The mask is 1 exactly where the seat's own sampled ids sit, and the prompt is its first prompt."""
    full = out.prompt_ids + out.response_ids
    own = own_spans(calls, f"/p{seat}", full)
    assert own[: len(out.prompt_ids)].sum() == 0
    assert out.response_mask == own[len(out.prompt_ids) :].tolist()
    assert len(out.response_ids) <= response_length
    first_prompts = [p for rid, p, _ in calls if rid.endswith(f"/p{seat}")]
    if first_prompts:
        assert out.prompt_ids == first_prompts[0]
        assert out.response_mask[-1] == 1  # cut after the seat's last sampled id


async def test_online_scripted_game_trains_each_seat_on_its_own_moves(init_dir, tokenizer, local_model_dir):
    cfg = trainer_config(local_model_dir, max_new_tokens=160)
    ds = dataset(init_dir / "train.parquet", cfg, tokenizer)
    instance = Instance.from_json(ds[0]["extra_info"]["instance"])
    proposal = "[propose] " + render_proposal(instance.best_assignment)
    for seat in (0, 1):
        server = ScriptServerManager(tokenizer, {0: ["[message] Hello.", proposal], 1: ["[message] Hi.", "[accept]"]})
        out = await play_online(cfg, server, ds[seat])
        assert out.extra_fields["termination"] == "accepted" and out.reward_score == pytest.approx(1.0)
        # the game's own measures, which verl's validation averages per step
        measures = out.extra_fields["reward_extra_info"]
        assert {k: measures[k] for k in ("agreed", "optimal", "invalid", "proposals", "messages")} == {
            "agreed": 1.0, "optimal": 1.0, "invalid": 0.0, "proposals": 1.0, "messages": 2.0,
        }  # fmt: skip
        assert all(type(v) is float for v in measures.values()), measures
        check_seat_trajectory(out, server.calls, seat, RESPONSE_LENGTH)
        own = np.asarray(out.response_mask, bool)
        texts = tokenizer.decode(np.asarray(out.response_ids)[own], skip_special_tokens=True)
        expected = ["[message] Hello.", proposal] if seat == 0 else ["[message] Hi.", "[accept]"]
        assert texts == "".join(expected)
        assert np.allclose(np.asarray(out.response_logprobs)[own], -0.25)
        assert not np.asarray(out.response_logprobs)[~own].any()


async def test_online_own_plan_term_pays_each_seat_what_the_agreed_matching_is_worth_on_its_table(
    init_dir, tokenizer, local_model_dir
):
    cfg = trainer_config(local_model_dir, "+selfplay.own_plan_weight=0.5", max_new_tokens=160)
    ds = dataset(init_dir / "train.parquet", cfg, tokenizer)
    instance = Instance.from_json(ds[0]["extra_info"]["instance"])
    identity = [(i, i) for i in range(8)]
    shares = [instance.own_plan_share(seat, identity) for seat in (0, 1)]
    assert shares[0] != shares[1]  # the seats see different tables, so each is paid its own share
    for seat in (0, 1):
        script = {0: ["[message] Hello.", "[propose] " + render_proposal(identity)], 1: ["[message] Hi.", "[accept]"]}
        out = await play_online(cfg, ScriptServerManager(tokenizer, script), ds[seat])
        assert out.extra_fields["termination"] == "accepted"
        reward = out.extra_fields["normalized_reward"]
        assert reward == pytest.approx(score(instance, identity) / instance.best_reward)
        assert out.extra_fields["own_plan_term"] == pytest.approx(0.5 * shares[seat])
        assert out.reward_score == pytest.approx(reward + 0.5 * shares[seat])


async def test_online_move_credit_credits_the_tokens_of_each_valid_proposal_line(init_dir, tokenizer, local_model_dir):
    """`+selfplay.move_credit`: each token that writes a line of the trained seat's valid proposal carries that
    line's credit (`Game.move_credits`), by its index in the response; a refused proposal and a reply carry none."""
    cfg = trainer_config(local_model_dir, "+selfplay.move_credit=0.5", max_new_tokens=160)
    ds = dataset(init_dir / "train.parquet", cfg, tokenizer)
    instance = Instance.from_json(ds[0]["extra_info"]["instance"])
    body = render_proposal([(i, (i + 3) % 8) for i in range(8)]).replace("\n", "\n- ", 2)  # bullets kept apart
    refused = "[propose] Proposal:\nGLUE: Ava Li"  # one line of 8
    proposal = "[propose] " + body
    script = {0: [refused, proposal], 1: ["[message] Hi.", "[accept]"]}
    judge = GameConfig("matching").new()
    judge.reset(instance)
    lines = {credit: proposal[start:end] for start, end, credit in judge.move_credits(0, proposal)}
    assert len(lines) == 8
    out = await play_online(cfg, ScriptServerManager(tokenizer, script), ds[0])
    assert out.extra_fields["termination"] == "accepted"
    credits = out.extra_fields["move_credits"]
    runs: dict[float, list[int]] = {}
    for index, credit in credits:
        assert out.response_mask[index] == 1
        runs.setdefault(credit, []).append(index)
    assert set(runs) == set(lines)
    refused_end = len(tokenizer.encode(refused, add_special_tokens=False))
    for credit, indices in runs.items():
        assert indices == list(range(indices[0], indices[-1] + 1))  # one run of tokens a line
        written = tokenizer.decode([out.response_ids[i] for i in indices])
        assert lines[credit] in written and len(written) < len(lines[credit]) + 8  # the line, give or take a piece
        assert indices[0] > refused_end  # the refused proposal's tokens carry nothing
    answered = {0: ["[message] Hello.", proposal], 1: ["[message] Hi.", "[accept]"]}
    partner = await play_online(cfg, ScriptServerManager(tokenizer, answered), ds[1])
    assert partner.extra_fields["termination"] == "accepted" and partner.extra_fields["move_credits"] == []
    plain = trainer_config(local_model_dir, max_new_tokens=160)
    uncredited = await play_online(plain, ScriptServerManager(tokenizer, answered), ds[0])
    assert "move_credits" not in uncredited.extra_fields


class TemperatureScript(ScriptServerManager):
    """The scripted server, noting the temperature each seat's turns were requested at."""

    def __init__(self, tokenizer, script):
        super().__init__(tokenizer, script)
        self.temperatures: dict[int, set[float]] = {0: set(), 1: set()}

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        self.temperatures[int(request_id[-1])].add(sampling_params["temperature"])
        return await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)


async def test_online_partner_temperature_applies_to_the_untrained_seat_only(init_dir, tokenizer, local_model_dir):
    script = {0: ["[message] Hello.", "[propose] x"], 1: ["[message] Hi.", "[accept]"]}
    greedy_partner = trainer_config(local_model_dir, "+selfplay.partner_temperature=0")
    ds = dataset(init_dir / "train.parquet", greedy_partner, tokenizer)
    for seat in (0, 1):
        server = TemperatureScript(tokenizer, script)
        worker = worker_for(greedy_partner, server)
        await make_loop(worker, ONLINE_AGENT).run({**sampling(worker), "temperature": 0.9}, **ds[seat])
        # the trained seat samples at the rollout's temperature, its partner greedily
        assert server.temperatures == {seat: {0.9}, 1 - seat: {0.0}}
    # validation is greedy for both seats, whatever the partner's setting
    hot_partner = trainer_config(local_model_dir, "+selfplay.partner_temperature=1.5")
    server = TemperatureScript(tokenizer, script)
    worker = worker_for(hot_partner, server)
    await make_loop(worker, ONLINE_AGENT).run({**sampling(worker), "temperature": 0.0}, **ds[0])
    assert server.temperatures == {0: {0.0}, 1: {0.0}}
    # by default both seats sample alike
    server = TemperatureScript(tokenizer, script)
    worker = worker_for(trainer_config(local_model_dir), server)
    await make_loop(worker, ONLINE_AGENT).run({**sampling(worker), "temperature": 0.9}, **ds[1])
    assert server.temperatures == {0: {0.9}, 1: {0.9}}


async def test_online_game_of_a_model_whose_eos_is_not_its_end_of_turn_token(
    init_dir, eos_apart, eos_apart_dir, local_model_dir, tmp_path
):
    """A model directory whose tokenizer has eos <|endoftext|> while its template closes turns with
    <|im_end|> (the weights are the local model's: the script plays the moves)."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        (model_dir / name).symlink_to(Path(local_model_dir) / name)
    for source in eos_apart_dir.iterdir():
        (model_dir / source.name).symlink_to(source)
    cfg = trainer_config(str(model_dir), max_new_tokens=160)
    ds = dataset(init_dir / "train.parquet", cfg, eos_apart)
    proposal = "[propose] " + render_proposal(Instance.from_json(ds[0]["extra_info"]["instance"]).best_assignment)
    server = ScriptServerManager(eos_apart, {0: ["[message] Hello.", proposal], 1: ["[message] Hi.", "[accept]"]})
    out = await play_online(cfg, server, ds[0])
    assert not out.extra_fields["failed"] and out.extra_fields["termination"] == "accepted"
    assert out.reward_score == pytest.approx(1.0)
    check_seat_trajectory(out, server.calls, 0, RESPONSE_LENGTH)


async def test_online_stops_the_game_when_the_trained_seat_would_exceed_response_length(
    init_dir, tokenizer, local_model_dir
):
    cfg = trainer_config(local_model_dir, "data.max_response_length=40", max_new_tokens=160)
    ds = dataset(init_dir / "train.parquet", cfg, tokenizer)
    proposal = "[propose] " + render_proposal(Instance.from_json(ds[0]["extra_info"]["instance"]).best_assignment)
    server = ScriptServerManager(tokenizer, {0: ["[message] Hello.", proposal], 1: ["[message] Hi.", "[accept]"]})
    out = await play_online(cfg, server, ds[0])
    assert out.extra_fields["termination"] == "context_length" and out.reward_score == 0.0
    check_seat_trajectory(out, server.calls, 0, 40)


async def test_online_seat_that_never_moved_trains_nothing(init_dir, tokenizer, local_model_dir):
    cfg = trainer_config(local_model_dir, "+selfplay.max_invalid=1")
    ds = dataset(init_dir / "train.parquet", cfg, tokenizer)
    server = ScriptServerManager(tokenizer, {0: ["no tag at all"], 1: []})
    out = await play_online(cfg, server, ds[1])
    assert out.extra_fields["termination"] == "max_invalid" and out.reward_score == 0.0
    assert out.response_mask == [0] and out.response_ids == [tokenizer.eos_token_id]
    assert server.calls and all(rid.endswith("/p0") for rid, *_ in server.calls)


class AbortingServerManager(ScriptServerManager):
    """Plays seat 0's first move, then the server aborts the next request."""

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        if self.calls:
            return TokenOutput(token_ids=[], log_probs=None, stop_reason="aborted")
        return await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)


async def test_online_failed_game_trains_nothing(init_dir, tokenizer, local_model_dir):
    cfg = trainer_config(local_model_dir, "+selfplay.invalid_move_penalty=0.5")
    ds = dataset(init_dir / "train.parquet", cfg, tokenizer)
    server = AbortingServerManager(tokenizer, {0: ["[message] Hello."], 1: []})
    out = await play_online(cfg, server, ds[0])
    assert out.extra_fields["failed"] and out.extra_fields["termination"] == "backend_error"
    assert out.response_mask == [0] and out.reward_score == 0.0  # seat 0 sampled a turn, yet nothing is trained


@pytest.fixture(scope="module")
def negotiation_init_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("init_negotiation")
    args = ["--game", "negotiation", "--reward-mode", "semi-competitive", "--num-train", "2", "--num-test", "0"]
    result = CliRunner().invoke(init_command, [*args, "--seed", "5", "--out-dir", str(out)])
    assert result.exit_code == 0, result.output
    return out


async def test_online_negotiation_pays_each_seat_its_own_points(negotiation_init_dir, tokenizer, local_model_dir):
    """Init rows name the game and its reward mode; the loop plays that game, and each seat's
    trajectory carries its own points (semi-competitive), not a shared reward."""
    cfg = trainer_config(local_model_dir, max_new_tokens=160)
    ds = dataset(negotiation_init_dir / "train.parquet", cfg, tokenizer)
    rows = [ds[i] for i in range(len(ds))]
    assert {r["data_source"] for r in rows} == {"selfplay_negotiation"}
    instance = NegotiationInstance.from_dict(json.loads(rows[0]["extra_info"]["instance"]))
    game = GameConfig("negotiation", options={"reward_mode": "semi-competitive"})
    assert rows[0]["raw_prompt"] == initial_messages(game, instance, 0)
    mine = next(s for s in instance.shares() if 0 < instance.value(0, s) != instance.value(1, instance.rest(s)) > 0)
    points = [instance.value(0, mine), instance.value(1, instance.rest(mine))]  # unequal: each seat gets its own
    for seat in (0, 1):
        script = {0: ["[message] Hello.", f"[propose] {render_share(mine)}"], 1: ["[message] Hi."]}
        script[1].append(f"[propose] {render_share(instance.rest(mine))}")
        server = ScriptServerManager(tokenizer, script)
        out = await play_online(cfg, server, rows[seat])
        assert out.extra_fields["termination"] == "agreed"
        assert out.reward_score == pytest.approx(points[seat]) == out.extra_fields["normalized_reward"]
        check_seat_trajectory(out, server.calls, seat, RESPONSE_LENGTH)


@pytest.mark.slow
async def test_online_real_model_games_through_the_worker(init_dir, tokenizer, local_model_dir, local_engine):
    """verl's n sessions per row: rows (instance, seat 0) and (instance, seat 1), each repeated n=2
    times as the trainer does, play 4 real games; each trajectory trains exactly its seat's ids."""
    cfg = trainer_config(local_model_dir)
    ds = dataset(init_dir / "train.parquet", cfg, tokenizer)
    server = LocalServerManager(local_engine)
    batch = batch_of(ds, [0, 1]).repeat(repeat_times=2, interleave=True)
    result = await worker_for(cfg, server).generate_sequences(batch)
    assert result.batch["responses"].shape == (4, RESPONSE_LENGTH)
    assert result.batch["prompts"].shape == (4, PROMPT_LENGTH)
    game_ids = list(result.non_tensor_batch["game_id"])
    assert len({g.rsplit("/", 1)[0] for g in game_ids}) == 1 and len(set(game_ids)) == 4  # 4 games, 1 instance
    assert list(result.non_tensor_batch["extra_info"][i]["player"] for i in range(4)) == [0, 0, 1, 1]
    for i, game_id in enumerate(game_ids):
        seat = i // 2
        attention = result.batch["attention_mask"][i].bool()
        prompt = result.batch["prompts"][i][attention[:PROMPT_LENGTH]].tolist()
        response = result.batch["responses"][i][attention[PROMPT_LENGTH:]].tolist()
        mask = result.batch["response_mask"][i][: len(response)].tolist()
        calls = [c for c in server.calls if c[0].startswith(game_id + "/")]
        assert result.non_tensor_batch["termination"][i] in TERMINATIONS
        if any(rid.endswith(f"/p{seat}") for rid, *_ in calls):
            check_seat_trajectory(Trajectory(prompt, response, mask), calls, seat, RESPONSE_LENGTH)
            own = np.asarray(mask, bool)
            logprobs = result.batch["rollout_log_probs"][i][: len(response)].numpy()
            assert np.all(logprobs[own] <= 0) and not logprobs[~own].any()
        else:
            assert mask == [0]
    scores = result.batch["rm_scores"].sum(-1).tolist()
    assert scores == pytest.approx([float(r) for r in result.non_tensor_batch["normalized_reward"]])
    assert all(0.0 <= r <= 1.0 for r in scores)
