"""selfplay-convert end to end: games played by the runner (scripted seats, LLM seats behind a
stand-in backend, the real local model) converted by the command, and the outputs read back by
verl 0.9.1's own `RLHFDataset` and `MultiTurnSFTDataset`."""
from __future__ import annotations

import asyncio
import json
import random
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from omegaconf import OmegaConf
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset
from verl.utils.dataset.rl_dataset import RLHFDataset

from convert.cli import main
from convert.groups import EPS
from convert.rows import AGENT_NAME, DATA_SOURCE, EXTRA_INFO
from selfplay_gen.backends.base import Backend, BackendOptions, Generation, SamplingParams, backend_class
from selfplay_gen.game import Limits
from selfplay_gen.instance import Instance
from selfplay_gen.moves import render_proposal
from selfplay_gen.players import LLMPlayer, ScriptedPlayer
from selfplay_gen.records import GameWriter, read_games
from selfplay_gen.runner import plan_games, run_games

SEEDS, K = range(6), 4


class ProposerBackend(Backend):
    """Stands in for a model, token in, token out: proposes a random assignment (seeded by the
    session, so games of one instance score differently) and accepts any proposal."""

    name = model = "proposer"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    async def generate(self, prompt_ids, params, *, session, messages=None) -> Generation:
        last_user = self.tokenizer.decode(prompt_ids).rsplit("<|im_start|>user\n", 1)[-1]
        papers = random.Random(session).sample(range(8), 8)
        text = "[accept]" if "[propose]" in last_user else "[propose] " + render_proposal(list(enumerate(papers)))
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        return Generation(ids, [-0.5] * len(ids), "stop", len(prompt_ids))


def play(path: Path, seat, seeds=SEEDS, k=K, max_moves=30) -> list[dict]:
    specs = plan_games([Instance.from_seed(s) for s in seeds], k, len(seeds) * k)
    with GameWriter(path) as writer:
        asyncio.run(run_games(specs, (seat, seat), Limits(max_moves=max_moves), writer, 4, {"backend": "test"},
                              progress=False))
    return list(read_games(path))


def scripted_seat(instance, seat, game_id, k):
    return ScriptedPlayer(instance, seat, rng=np.random.default_rng([k, seat, instance.seed]))


@pytest.fixture(scope="module")
def scripted_games(tmp_path_factory):
    return play(tmp_path_factory.mktemp("scripted") / "games.jsonl", scripted_seat)


@pytest.fixture(scope="module")
def llm_games(tmp_path_factory, tokenizer):
    backend = ProposerBackend(tokenizer)
    seat = lambda inst, s, game_id, k: LLMPlayer(inst, s, backend, tokenizer, SamplingParams(), f"{game_id}#{s}")
    return play(tmp_path_factory.mktemp("llm") / "games.jsonl", seat)


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def convert(games: Path, *args: str, ok: bool = True):
    result = CliRunner().invoke(main, [str(games), *args])
    assert (result.exit_code == 0) == ok, result.output
    return result


def summary_of(games: Path) -> dict:
    return json.loads((games.parent / "convert_summary.json").read_text())


def rows(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def rlhf_dataset(path: Path, tokenizer, tmp_path: Path) -> RLHFDataset:
    config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 4096, "filter_overlong_prompts": True,
                               "filter_overlong_prompts_workers": 1, "truncation": "error",
                               "cache_dir": str(tmp_path / "verl-cache")})
    return RLHFDataset(data_files=str(path), tokenizer=tokenizer, config=config)


def expected_advantages(records: list[dict]) -> dict[str, float]:
    """mean-std advantages worked out per instance with numpy (population std)."""
    by_instance = defaultdict(list)
    for r in records:
        by_instance[r["instance_id"]].append(r)
    out = {}
    for games in by_instance.values():
        rewards = np.array([g["outcome"]["normalized_reward"] for g in games])
        spread = rewards - rewards.mean() if rewards.max() > rewards.min() else np.zeros(len(rewards))
        out.update({g["game_id"]: a for g, a in zip(games, spread / (rewards.std() + EPS))})
    return out


@pytest.mark.parametrize("which", ["scripted_games", "llm_games"])
def test_grpo_rows_arrive_through_verl_rlhf_dataset(which, request, tmp_path, tokenizer):
    records = request.getfixturevalue(which)
    games = write(tmp_path / "games.jsonl", records)
    convert(games, "--val-fraction", "0.34")
    by_id = {r["game_id"]: r for r in records}
    advantages = expected_advantages(records)
    seen = Counter()
    for split in ("train", "val"):
        dataset = rlhf_dataset(tmp_path / f"{split}.parquet", tokenizer, tmp_path)
        for i in range(len(dataset)):
            row = dataset[i]
            info = row["extra_info"]
            record = by_id[info["game_id"]]
            seat = record["players"][info["player"]]
            assert set(info) == set(EXTRA_INFO.names)
            assert row["agent_name"] == AGENT_NAME and row["data_source"] == DATA_SOURCE
            assert row["index"] == info["index"] == record["group"]
            assert row["raw_prompt"] == seat["messages"][:2] and list(info["messages"]) == seat["messages"]
            assert json.loads(row["reward_model"]["ground_truth"])["normalized_reward"] == \
                info["normalized_reward"] == record["outcome"]["normalized_reward"]
            assert info["advantage"] == pytest.approx(advantages[info["game_id"]], abs=1e-9)
            seen[info["game_id"]] += 1
    assert seen == Counter({game_id: 2 for game_id in by_id})        # two perspectives of every game
    assert any(a != 0 for a in advantages.values())                  # the groups carry signal


def test_llm_rows_hold_the_sampled_tokens(llm_games, tmp_path):
    games = write(tmp_path / "games.jsonl", llm_games)
    convert(games, "--val-fraction", "0")
    seats = {(r["game_id"], s): p for r in llm_games for s, p in enumerate(r["players"])}
    for row in rows(tmp_path / "train.parquet"):
        info = row["extra_info"]
        seat = seats[(info["game_id"], info["player"])]
        start = seat["turns"][0]["prompt_len"]
        assert info["token_ids"] == seat["token_ids"] and info["prompt_len"] == start
        response, mask = info["token_ids"][start:], np.array(info["response_mask"], bool)
        assert [t for t, own in zip(response, mask) if own] == [t for turn in seat["turns"] for t in turn["output_ids"]]
        assert np.array(info["logprobs"])[mask].tolist() == [-0.5] * mask.sum() and not np.array(info["logprobs"])[~mask].any()
        assert info["tokens_source"] == "sampled" and info["num_turns"] == len(seat["turns"])


def test_scripted_rows_are_retokenized_like_a_chat(scripted_games, tmp_path, tokenizer):
    games = write(tmp_path / "games.jsonl", scripted_games)
    convert(games, "--val-fraction", "0")
    for row in rows(tmp_path / "train.parquet"):
        info = row["extra_info"]
        messages, ids = info["messages"], info["token_ids"]
        # the whole context is the chat template of the conversation (without the last separator)
        assert tokenizer.decode(ids) == tokenizer.apply_chat_template(messages, tokenize=False)[:-1]
        prompt = tokenizer.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
        assert tokenizer.decode(ids[:info["prompt_len"]]) == prompt
        own = [t for t, m in zip(ids[info["prompt_len"]:], info["response_mask"]) if m]
        assert tokenizer.decode(own) == "".join(m["content"] + "<|im_end|>" for m in messages if m["role"] == "assistant")
        assert info["tokens_source"] == "retokenized" and info["logprobs"] is None


def test_sft_keeps_the_best_games_and_masks_exactly_the_own_turns(llm_games, tmp_path, tokenizer):
    games = write(tmp_path / "games.jsonl", llm_games)
    convert(games, "--format", "sft", "--top-fraction", "0.5", "--val-fraction", "0")
    kept = {r["extra_info"]["game_id"] for r in rows(tmp_path / "train.parquet")}
    for instance in {r["instance_id"] for r in llm_games}:
        games_of = sorted((r for r in llm_games if r["instance_id"] == instance),
                          key=lambda r: -r["outcome"]["normalized_reward"])
        best = {r["game_id"] for r in games_of[:2] if r["outcome"]["normalized_reward"] > 0}
        assert {g["game_id"] for g in games_of} & kept == best
    config = OmegaConf.create({"max_length": 4096, "truncation": "error", "pad_mode": "no_padding", "messages_key": "messages"})
    dataset = MultiTurnSFTDataset(str(tmp_path / "train.parquet"), tokenizer, config)
    assert len(dataset) == 2 * len(kept)
    for i in range(len(dataset)):
        item, messages = dataset[i], dataset.messages[i]
        trained = item["input_ids"][item["loss_mask"].bool()]
        own = "".join(m["content"] + "<|im_end|>\n" for m in messages if m["role"] == "assistant")
        assert tokenizer.decode(trained) == own


def test_dpo_pairs_best_against_worst_per_instance_and_seat(llm_games, tmp_path):
    games = write(tmp_path / "games.jsonl", llm_games)
    convert(games, "--format", "dpo", "--val-fraction", "0")
    pairs = rows(tmp_path / "train.parquet")
    rewards = pd.DataFrame([(r["instance_id"], r["outcome"]["normalized_reward"]) for r in llm_games],
                           columns=["instance", "reward"]).groupby("instance")["reward"]
    differing = set(rewards.max()[rewards.max() > rewards.min()].index)
    assert {(p["extra_info"]["instance_id"], p["extra_info"]["player"]) for p in pairs} == \
        {(i, s) for i in differing for s in (0, 1)} and len(pairs) == 2 * len(differing)
    for pair in pairs:
        info = pair["extra_info"]
        assert info["chosen_reward"] == rewards.max()[info["instance_id"]] > info["rejected_reward"] == \
            rewards.min()[info["instance_id"]]
        assert pair["prompt"][0]["role"] == "system" and pair["chosen"] and pair["rejected"]
        assert pair["chosen"][-1]["role"] == pair["rejected"][-1]["role"] == "assistant"


def test_split_keeps_instances_whole_and_is_deterministic(llm_games, tmp_path):
    games = write(tmp_path / "games.jsonl", llm_games)

    def split(seed: str, out: str) -> tuple[set, set]:
        convert(games, "--seed", seed, "--val-fraction", "0.34", "--out-dir", str(tmp_path / out))
        return tuple(frozenset(r["extra_info"]["instance_id"] for r in rows(tmp_path / out / f"{s}.parquet"))
                     for s in ("train", "val"))

    train, val = split("3", "a")
    assert not train & val and train | val == {f"seed-{s}" for s in SEEDS} and len(val) == 2
    assert split("3", "b") == (train, val)
    assert {split(str(seed), f"s{seed}")[1] for seed in range(4, 7)} != {val}     # the seed matters


def test_group_by_game_warns_and_leaves_no_signal(llm_games, tmp_path):
    games = write(tmp_path / "games.jsonl", llm_games)
    result = convert(games, "--group-by", "game", "--val-fraction", "0")
    assert "zero advantage" in result.stderr
    summary = summary_of(games)
    assert summary["groups"]["count"] == summary["groups"]["constant"] == len(llm_games)
    train = rows(tmp_path / "train.parquet")
    assert {r["extra_info"]["advantage"] for r in train} == {0.0}
    assert len({r["extra_info"]["index"] for r in train}) == len(llm_games)
    failed = convert(games, "--group-by", "game", "--drop-constant-groups", "--overwrite", ok=False)
    assert "no training rows" in failed.output


def test_constant_groups_are_counted_and_dropped(llm_games, tmp_path):
    flat = [json.loads(json.dumps(r)) for r in llm_games]
    for r in flat:
        if r["instance_id"] in ("seed-0", "seed-1"):
            r["outcome"]["normalized_reward"] = 0.5
    games = write(tmp_path / "games.jsonl", flat)
    convert(games, "--val-fraction", "0")
    assert summary_of(games)["groups"]["constant"] == 2
    assert {r["extra_info"]["advantage"] for r in rows(tmp_path / "train.parquet")
            if r["extra_info"]["instance_id"] == "seed-0"} == {0.0}
    convert(games, "--val-fraction", "0", "--drop-constant-groups", "--overwrite")
    assert summary_of(games)["groups"]["dropped_constant"] == 2
    assert {r["extra_info"]["instance_id"] for r in rows(tmp_path / "train.parquet")} == {f"seed-{s}" for s in SEEDS[2:]}


def test_group_index_stays_per_instance_when_run_files_are_concatenated(llm_games, tmp_path):
    flat = [json.loads(json.dumps(r)) for r in llm_games]
    for r in flat:
        r["group"] %= 3                     # a second run numbered its instances from 0 again
    games = write(tmp_path / "games.jsonl", flat)
    convert(games, "--val-fraction", "0")
    assert summary_of(games)["groups"]["index_from"] == "sorted key"
    index = {(r["extra_info"]["instance_id"], r["extra_info"]["index"]) for r in rows(tmp_path / "train.parquet")}
    assert sorted(index) == [(f"seed-{s}", s) for s in SEEDS]


def test_unusable_games_are_excluded_and_counted_by_reason(llm_games, tmp_path):
    flat = [json.loads(json.dumps(r)) for r in llm_games]
    flat[0]["failure"] = {"reason": "max_new_tokens", "detail": "did not end", "player": 0}
    flat[1]["outcome"]["termination"] = "backend_error"
    flat[2]["players"][1]["invariant_ok"] = False
    turn = flat[3]["players"][0]["turns"][0]
    flat[3]["players"][0]["token_ids"][turn["prompt_len"]] += 1                 # sampled id not at its offset
    flat[4]["players"][0]["turns"][0]["logprobs"].pop()                         # logprobs misaligned
    flat.append(flat[5])                                                        # the same game twice
    games = write(tmp_path / "games.jsonl", flat)
    convert(games, "--val-fraction", "0")
    summary = summary_of(games)
    assert summary["excluded"] == {"failed:max_new_tokens": 1, "failed:backend_error": 1, "token_invariant": 3,
                                   "duplicate_game_id": 1}
    assert summary["games_used"] == len(llm_games) - 5 and len(summary["excluded_examples"]) == 6
    assert len(rows(tmp_path / "train.parquet")) == 2 * (len(llm_games) - 5)


def test_length_limits_exclude_whole_games(llm_games, tmp_path):
    games = write(tmp_path / "games.jsonl", llm_games)
    prompts = [max(p["turns"][0]["prompt_len"] for p in r["players"]) for r in llm_games]
    responses = [max(len(p["token_ids"]) - p["turns"][0]["prompt_len"] for p in r["players"]) for r in llm_games]
    limit_p, limit_r = int(np.median(prompts)), int(np.median(responses))
    convert(games, "--val-fraction", "0", "--max-prompt-tokens", str(limit_p), "--max-response-tokens", str(limit_r))
    too_long_p = sum(p > limit_p for p in prompts)
    too_long_r = sum(p <= limit_p and r > limit_r for p, r in zip(prompts, responses))
    assert 0 < too_long_p < len(llm_games)
    assert summary_of(games)["excluded"] == {k: v for k, v in
                                             {"prompt_too_long": too_long_p, "response_too_long": too_long_r}.items() if v}
    for row in rows(tmp_path / "train.parquet"):
        info = row["extra_info"]
        assert info["prompt_len"] <= limit_p and len(info["token_ids"]) - info["prompt_len"] <= limit_r


def _line(record: dict) -> str:
    return json.dumps(record)


@pytest.mark.parametrize("damage, words", [
    (lambda r: "{not json", ["games.jsonl:3", "not valid JSON"]),
    (lambda r: _line({**r, "schema_version": 99}), ["games.jsonl:3", "schema_version", "99"]),
    (lambda r: _line({k: v for k, v in r.items() if k != "outcome"}), ["games.jsonl:3", "'outcome'"]),
    (lambda r: _line({**r, "players": [r["players"][0], {k: v for k, v in r["players"][1].items() if k != "token_ids"}]}),
     ["games.jsonl:3", "players[1].token_ids"]),
    (lambda r: "[1, 2]", ["games.jsonl:3", "JSON object"]),
])
def test_bad_lines_name_file_line_and_field(llm_games, tmp_path, damage, words):
    lines = [_line(r) for r in llm_games]
    lines[2] = lines[5] = damage(llm_games[2])
    games = tmp_path / "games.jsonl"
    games.write_text("\n".join(lines) + "\n")
    result = convert(games, ok=False)
    message = result.output.strip()
    assert message.startswith("Error:") and "\n" not in message and "Traceback" not in message
    assert all(w in message for w in words) and "2 invalid line(s)" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["games.jsonl"]         # nothing written, no temp files
    result = convert(games, "--skip-invalid")
    assert summary_of(games)["invalid_lines"] == 2 and summary_of(games)["games_used"] == len(llm_games) - 2
    assert "skipped 2 invalid lines" in result.stderr


def test_empty_input_is_an_error(tmp_path):
    games = tmp_path / "games.jsonl"
    games.write_text("\n")
    assert "no games (empty input)" in convert(games, ok=False).output


def test_outputs_are_never_replaced_without_overwrite(llm_games, tmp_path):
    games = write(tmp_path / "games.jsonl", llm_games)
    convert(games)
    before = (tmp_path / "train.parquet").read_bytes()
    refused = convert(games, "--seed", "9", ok=False)
    assert "already exists" in refused.output and "--overwrite" in refused.output
    assert (tmp_path / "train.parquet").read_bytes() == before
    convert(games, "--seed", "9", "--overwrite")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["convert_summary.json", "games.jsonl", "train.parquet",
                                                          "val.parquet"]


@pytest.mark.slow
def test_local_model_games_round_trip(tmp_path, tokenizer, local_model_dir):
    """Two games of the real SmolLM2 (seeded, newline-stopped turns so that they end within the
    budget): every game is either converted with its sampled ids intact or excluded by reason."""
    params = SamplingParams(max_new_tokens=32, stop_token_ids=(tokenizer.eos_token_id, tokenizer.encode("\n")[0]))

    async def go():
        async with backend_class("local")(BackendOptions(model=local_model_dir, seed=0), tokenizer) as backend:
            seat = lambda inst, s, game_id, k: LLMPlayer(inst, s, backend, tokenizer, params, f"{game_id}#{s}")
            specs = plan_games([Instance.from_seed(0)], 2, 2)
            with GameWriter(tmp_path / "games.jsonl") as writer:
                await run_games(specs, (seat, seat), Limits(max_moves=4), writer, 2, {"backend": "local"},
                                progress=False)

    asyncio.run(go())
    records = {r["game_id"]: r for r in read_games(tmp_path / "games.jsonl")}
    convert(tmp_path / "games.jsonl", "--val-fraction", "0")
    summary = summary_of(tmp_path / "games.jsonl")
    failed = Counter(f"failed:{r['failure']['reason']}" for r in records.values() if r["failure"])
    assert summary["excluded"] == dict(failed) and summary["games_used"] == len(records) - sum(failed.values()) >= 1
    for row in rows(tmp_path / "train.parquet"):
        info = row["extra_info"]
        seat = records[info["game_id"]]["players"][info["player"]]
        own = [t for t, m in zip(info["token_ids"][info["prompt_len"]:], info["response_mask"]) if m]
        assert info["token_ids"] == seat["token_ids"] and own == [t for turn in seat["turns"] for t in turn["output_ids"]]
        assert np.allclose([lp for lp, m in zip(info["logprobs"], info["response_mask"]) if m],
                           [lp for turn in seat["turns"] for lp in turn["logprobs"]], atol=1e-6)
