"""selfplay-convert end to end: games played by the runner (scripted seats, LLM seats behind a
stand-in backend, the real local model) converted by the command, and the outputs read back by
verl 0.9.1's own `RLHFDataset` and `MultiTurnSFTDataset`."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
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
from convert.pipeline import EXIT_NO_ROWS
from convert.rows import AGENT_NAME, GROUP_INFO
from convert.summary import main as summary_main
from selfplay_gen.atomic import write_json_atomic
from selfplay_gen.backends.base import Backend, BackendOptions, Generation, SamplingParams, backend_class
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import Limits
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.games.matching.moves import render_proposal
from selfplay_gen.games.matching.scripted import ScriptedPlayer
from selfplay_gen.locking import Lock
from selfplay_gen.players import LLMPlayer
from selfplay_gen.records import GameWriter, read_games
from selfplay_gen.runner import plan_games, run_games
from selfplay_gen.seat_tokens import prompt_messages

SEEDS, K = range(6), 4
SETTINGS = {"backend": "test", "sampling": {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 256}}


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
        config = GameConfig(limits=Limits(max_moves=max_moves))
        asyncio.run(run_games(specs, (seat, seat), config, writer, 4, SETTINGS, progress=False))
    return list(read_games(path))


def scripted_seat(spec, seat, game, start):
    return ScriptedPlayer(spec.instance, seat, rng=np.random.default_rng([spec.game_index, seat, spec.instance.seed]))


@pytest.fixture(scope="module")
def scripted_games(tmp_path_factory):
    return play(tmp_path_factory.mktemp("scripted") / "games.jsonl", scripted_seat)


@pytest.fixture(scope="module")
def llm_games(tmp_path_factory, tokenizer):
    backend = ProposerBackend(tokenizer)
    seat = lambda spec, s, game, start: LLMPlayer(
        s, start.system[s], backend, tokenizer, SamplingParams(), f"{spec.game_id}#{s}"
    )
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
    config = OmegaConf.create(
        {
            "prompt_key": "prompt",
            "max_prompt_length": 4096,
            "filter_overlong_prompts": True,
            "filter_overlong_prompts_workers": 1,
            "truncation": "error",
            "cache_dir": str(tmp_path / "verl-cache"),
        }
    )
    return RLHFDataset(data_files=str(path), tokenizer=tokenizer, config=config)


def group_rows_of(tmp_path: Path, split: str = "train") -> list[dict]:
    return [r["extra_info"] for r in rows(tmp_path / f"{split}.parquet")]


def test_grpo_rows_are_whole_groups_through_verl_rlhf_dataset(llm_games, tmp_path, tokenizer):
    """One row per (instance, seat) holding all K games of that instance, with the training
    rewards (not advantages: verl's GRPO normalizes them), readable by verl's RLHFDataset."""
    games = write(tmp_path / "games.jsonl", llm_games)
    convert(games, "--val-fraction", "0.34", "--keep-constant-groups")
    by_id = {r["game_id"]: r for r in llm_games}
    seen = Counter()
    for split in ("train", "val"):
        dataset = rlhf_dataset(tmp_path / f"{split}.parquet", tokenizer, tmp_path)
        for i in range(len(dataset)):
            row = dataset[i]
            info = row["extra_info"]
            assert set(info) == set(GROUP_INFO.names)
            assert row["agent_name"] == AGENT_NAME and row["data_source"] == "selfplay_matching"
            assert len(info["game_ids"]) == K and len(info["token_ids"]) == K  # every seat sampled here
            records = [by_id[g] for g in info["game_ids"]]
            assert {r["instance_id"] for r in records} == {info["instance_id"]}
            assert row["index"] == info["index"] == records[0]["group"]
            assert list(info["rewards"]) == [r["outcome"]["normalized_reward"] for r in records]
            assert (info["temperature"], info["top_p"]) == (1.0, 1.0)
            seat = info["player"]
            assert row["raw_prompt"] == records[0]["players"][seat]["messages"][:2]
            for j, record in enumerate(records):
                assert list(info["token_ids"][j]) == record["players"][seat]["token_ids"]
                assert list(info["messages"][j]) == record["players"][seat]["messages"]
            seen.update((g, seat) for g in info["game_ids"])
    assert seen == Counter({(g, s): 1 for g in by_id for s in (0, 1)})  # each game once from each seat
    summary = summary_of(games)
    assert summary["rollout_n"] == K and summary["grpo"]["rows"] == 2 * len(SEEDS)


def test_rollout_n_is_readable_from_the_summary(llm_games, tmp_path, capsys):
    games = write(tmp_path / "games.jsonl", llm_games[: K * 3 - 1])  # the last instance lacks a game
    convert(games, "--val-fraction", "0", "--keep-constant-groups")
    summary_main([str(tmp_path / "convert_summary.json"), "rollout_n"])
    assert capsys.readouterr().out.strip() == str(K)
    summary = summary_of(games)
    assert summary["grpo"]["incomplete_games"] == K - 1 and summary["grpo"]["rows"] == 2 * 2
    with pytest.raises(SystemExit, match="no field 'grpo.nope'"):
        summary_main([str(tmp_path / "convert_summary.json"), "grpo.nope"])


def test_groups_larger_than_k_are_split_into_groups_of_k(llm_games, tmp_path):
    games = write(tmp_path / "games.jsonl", llm_games)
    convert(games, "--val-fraction", "0", "--group-size", "2", "--keep-constant-groups")
    infos = group_rows_of(tmp_path)
    assert len(infos) == 2 * 2 * len(SEEDS) and all(len(i["game_ids"]) == 2 for i in infos)
    assert len({i["group_id"] for i in infos}) == len(infos)


def test_llm_rows_hold_the_sampled_tokens(llm_games, tmp_path):
    games = write(tmp_path / "games.jsonl", llm_games)
    convert(games, "--val-fraction", "0", "--keep-constant-groups")
    by_id = {r["game_id"]: r for r in llm_games}
    for info in group_rows_of(tmp_path):
        for j, game_id in enumerate(info["game_ids"]):
            seat = by_id[game_id]["players"][info["player"]]
            start = seat["turns"][0]["prompt_len"]
            assert info["token_ids"][j] == seat["token_ids"] and info["prompt_len"][j] == start
            response, mask = info["token_ids"][j][start:], np.array(info["response_mask"][j], bool)
            assert [t for t, own in zip(response, mask) if own] == [
                t for turn in seat["turns"] for t in turn["output_ids"]
            ]
            logprobs = np.array(info["logprobs"][j])
            assert logprobs[mask].tolist() == [-0.5] * mask.sum() and not logprobs[~mask].any()
            assert info["num_turns"][j] == len(seat["turns"])


def test_scripted_seats_are_retokenized_like_a_chat(scripted_games, tokenizer):
    from selfplay_gen.seat_tokens import seat_tokens

    for record in scripted_games[:4]:
        for seat in record["players"]:
            tokens, messages = seat_tokens(seat, lambda: tokenizer), seat["messages"]
            ids = tokens.token_ids.tolist()
            # the whole context is the chat template of the conversation (without the last separator)
            assert tokenizer.decode(ids) == tokenizer.apply_chat_template(messages, tokenize=False)[:-1]
            prompt = tokenizer.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
            assert tokenizer.decode(ids[: tokens.prompt_len]) == prompt
            own = [t for t, m in zip(ids[tokens.prompt_len :], tokens.own) if m]
            assert tokenizer.decode(own) == "".join(
                m["content"] + "<|im_end|>" for m in messages if m["role"] == "assistant"
            )
            assert tokens.source == "retokenized" and tokens.own_logprobs is None


def test_scripted_seats_are_retokenized_alike_whatever_eos_the_model_ships(scripted_games, tokenizer, eos_apart):
    """Both tokenizers share the chat template; only eos differs, and it plays no part in a chat."""
    from selfplay_gen.seat_tokens import seat_tokens

    for record in scripted_games[:2]:
        for seat in record["players"]:
            ours, theirs = seat_tokens(seat, lambda: tokenizer), seat_tokens(seat, lambda: eos_apart)
            assert theirs.token_ids.tolist() == ours.token_ids.tolist() and theirs.own.tolist() == ours.own.tolist()
            assert theirs.prompt_len == ours.prompt_len


def test_retokenized_seats_never_become_grpo_rows(llm_games, tmp_path):
    """A seat whose ids were re-encoded from text is off-policy: its game still counts in the
    group (as an untrained entry), but its tokens are not replayed; sft still uses it."""
    flat = [json.loads(json.dumps(r)) for r in llm_games]
    flat[0]["players"][0]["turns"][0]["retokenized"] = True
    games = write(tmp_path / "games.jsonl", flat)
    convert(games, "--val-fraction", "0", "--keep-constant-groups")
    group = next(i for i in group_rows_of(tmp_path) if flat[0]["game_id"] in i["game_ids"] and i["player"] == 0)
    assert group["game_ids"][-1] == flat[0]["game_id"] and len(group["game_ids"]) == K
    assert len(group["token_ids"]) == K - 1
    assert summary_of(games)["seats_retokenized"] == 1
    convert(games, "--format", "sft", "--top-fraction", "1", "--val-fraction", "0", "--overwrite")
    assert (flat[0]["game_id"], 0) in {
        (r["extra_info"]["game_id"], r["extra_info"]["player"]) for r in rows(tmp_path / "train.parquet")
    }


def test_scripted_games_give_no_grpo_rows(scripted_games, tmp_path):
    games = write(tmp_path / "games.jsonl", scripted_games)
    result = convert(games, "--val-fraction", "0", ok=False)
    assert result.exit_code == EXIT_NO_ROWS and "no training rows" in result.output  # its own status: play more
    convert(games, "--format", "sft", "--top-fraction", "1", "--val-fraction", "0")
    assert summary_of(games)["seats_retokenized"] == 2 * len(scripted_games)


def _sft_both_ways(games: Path, out: Path, monkeypatch) -> tuple[dict, dict]:
    """The summaries of an sft conversion into out/selected and of one that tokenizes every seat into out/all;
    their rows must be equal."""
    import convert.pipeline as pipeline

    args = ["--format", "sft", "--top-fraction", "0.25", "--val-fraction", "0", "--out-dir"]
    convert(games, *args, str(out / "selected"))
    with monkeypatch.context() as patched:
        patched.setattr(pipeline, "_selection", lambda games, options: None)
        convert(games, *args, str(out / "all"))
    assert rows(out / "selected" / "train.parquet") == rows(out / "all" / "train.parquet")
    return tuple(json.loads((out / name / "convert_summary.json").read_text()) for name in ("selected", "all"))


def test_sft_tokenizes_only_the_scripted_seats_it_keeps(scripted_games, tmp_path, monkeypatch):
    """Re-encoding scripted chats is most of a conversion's time: the rows sft keeps are known from the
    rewards alone, so the seats it drops are never tokenized, and the rows are the same."""
    games = write(tmp_path / "games.jsonl", scripted_games)
    selected, every = _sft_both_ways(games, tmp_path, monkeypatch)
    kept = len(rows(tmp_path / "selected" / "train.parquet"))
    assert selected["seats_retokenized"] == kept < every["seats_retokenized"] == 2 * len(scripted_games)
    assert selected["seats_not_tokenized"] == 2 * len(scripted_games) - kept


def test_a_kept_game_whose_tokens_break_leaves_its_group_kept_as_without_the_shortcut(
    scripted_games, tmp_path, monkeypatch
):
    """A game left out in pass 1 (broken token invariants) moves its group's ranking to a game not
    tokenized: the conversion then tokenizes every seat and keeps what it would have kept."""
    import convert.pipeline as pipeline
    from selfplay_gen.token_context import TokenInvariantError

    games = write(tmp_path / "games.jsonl", scripted_games)
    convert(games, "--format", "sft", "--top-fraction", "0.25", "--val-fraction", "0")
    broken = rows(tmp_path / "train.parquet")[0]["extra_info"]["game_id"]
    (record,) = [r for r in scripted_games if r["game_id"] == broken]
    chats = {json.dumps(seat["messages"]) for seat in record["players"]}
    real = pipeline.seat_tokens

    def breaks(seat, tokenizer):
        if json.dumps(seat["messages"]) in chats:
            raise TokenInvariantError("broken on purpose")
        return real(seat, tokenizer)

    monkeypatch.setattr(pipeline, "seat_tokens", breaks)
    selected, every = _sft_both_ways(games, tmp_path / "out", monkeypatch)
    assert selected["excluded"] == every["excluded"] == {"token_invariant": 1}
    assert selected["seats_not_tokenized"] == 0  # read again, every seat tokenized


def test_sft_keeps_the_best_games_and_masks_exactly_the_own_turns(llm_games, tmp_path, tokenizer):
    games = write(tmp_path / "games.jsonl", llm_games)
    convert(games, "--format", "sft", "--top-fraction", "0.5", "--val-fraction", "0")
    kept = {r["extra_info"]["game_id"] for r in rows(tmp_path / "train.parquet")}
    for instance in {r["instance_id"] for r in llm_games}:
        games_of = sorted(
            (r for r in llm_games if r["instance_id"] == instance), key=lambda r: -r["outcome"]["normalized_reward"]
        )
        best = {r["game_id"] for r in games_of[:2] if r["outcome"]["normalized_reward"] > 0}
        assert {g["game_id"] for g in games_of} & kept == best
    rewards = {r["game_id"]: r["outcome"]["rewards"] for r in llm_games}
    infos = [r["extra_info"] for r in rows(tmp_path / "train.parquet")]
    written = [[info["game_id"] for info in infos if info["player"] == s] for s in (0, 1)]
    summary = summary_of(games)["sft"]  # what the kept rows' games score, seat by seat
    assert summary["rows"] == [len(ids) for ids in written]
    for seat, ids in enumerate(written):
        assert summary["mean_rewards"][seat] == pytest.approx(sum(rewards[i][seat] for i in ids) / len(ids))
    config = OmegaConf.create(
        {"max_length": 4096, "truncation": "error", "pad_mode": "no_padding", "messages_key": "messages"}
    )
    dataset = MultiTurnSFTDataset(str(tmp_path / "train.parquet"), tokenizer, config)
    assert len(dataset) == 2 * len(kept)
    for i in range(len(dataset)):
        item, messages = dataset[i], dataset.messages[i]
        trained = item["input_ids"][item["loss_mask"].bool()]
        own = "".join(m["content"] + "<|im_end|>\n" for m in messages if m["role"] == "assistant")
        assert tokenizer.decode(trained) == own


class FumblingBackend(ProposerBackend):
    """A model that sometimes misnames its move: each seat's first response has an unknown tag, and the
    second seat of every instance's first game never gets it right (its game ends on invalid moves)."""

    def __init__(self, tokenizer):
        super().__init__(tokenizer)
        self.calls: Counter[str] = Counter()

    async def generate(self, prompt_ids, params, *, session, messages=None) -> Generation:
        self.calls[session] += 1
        if self.calls[session] == 1 or session.endswith("/0#1"):
            ids = self.tokenizer.encode("[proposal] all of them", add_special_tokens=False)
            return Generation([*ids, self.tokenizer.eos_token_id], [-0.5] * (len(ids) + 1), "stop", len(prompt_ids))
        return await super().generate(prompt_ids, params, session=session, messages=messages)


def test_valid_moves_keep_each_seats_own_valid_responses_whatever_the_reward(tmp_path, tokenizer):
    backend = FumblingBackend(tokenizer)
    seat = lambda spec, s, game, start: LLMPlayer(
        s, start.system[s], backend, tokenizer, SamplingParams(), f"{spec.game_id}#{s}"
    )
    played = play(tmp_path / "games.jsonl", seat, seeds=range(2))
    convert(tmp_path / "games.jsonl", "--format", "sft", "--valid-moves", "--val-fraction", "0")
    kept = rows(tmp_path / "train.parquet")
    by_seat = {(r["game_id"], s): r for r in played for s in (0, 1)}
    fumbled = {(r["game_id"], 1) for r in played if r["game_id"].endswith("/0")}
    assert all(by_seat[key]["outcome"]["termination"] == "max_invalid" for key in fumbled)
    assert {(r["extra_info"]["game_id"], r["extra_info"]["player"]) for r in kept} == set(by_seat) - fumbled
    for row in kept:
        info = row["extra_info"]
        record = by_seat[(info["game_id"], info["player"])]
        responses = [m["content"] for m in record["players"][info["player"]]["messages"] if m["role"] == "assistant"]
        kinds = [e["kind"] for e in record["events"] if e["player"] == info["player"]]
        assert "invalid" in kinds  # every seat fumbled its first move, and some more (an [accept] of nothing)
        chat = row["messages"]
        assert chat[-1]["role"] == "assistant"
        assert [m["content"] for m in chat if m["role"] == "assistant"] == [
            text for text, kind in zip(responses, kinds, strict=True) if kind != "invalid"
        ]
        assert not any("Invalid move" in m["content"] for m in chat)
        prompt = len(prompt_messages(chat))
        assert chat[:prompt] == record["players"][info["player"]]["messages"][:prompt]
    assert any(by_seat[(r["extra_info"]["game_id"], 0)]["outcome"]["normalized_reward"] == 0 for r in kept)
    assert summary_of(tmp_path / "games.jsonl")["seats_without_valid_moves"] == len(fumbled)
    # verl's SFT dataset trains exactly the kept responses
    config = OmegaConf.create(
        {"max_length": 4096, "truncation": "error", "pad_mode": "no_padding", "messages_key": "messages"}
    )
    dataset = MultiTurnSFTDataset(str(tmp_path / "train.parquet"), tokenizer, config)
    for i in range(len(dataset)):
        item, messages = dataset[i], dataset.messages[i]
        trained = tokenizer.decode(item["input_ids"][item["loss_mask"].bool()])
        assert trained == "".join(m["content"] + "<|im_end|>\n" for m in messages if m["role"] == "assistant")
        assert "[proposal]" not in trained
    assert (
        "valid moves select the chats of sft rows"
        in convert(tmp_path / "games.jsonl", "--valid-moves", "--overwrite", ok=False).output
    )


def test_dpo_pairs_best_against_worst_per_instance_and_seat(llm_games, tmp_path):
    games = write(tmp_path / "games.jsonl", llm_games)
    convert(games, "--format", "dpo", "--val-fraction", "0")
    pairs = rows(tmp_path / "train.parquet")
    rewards = pd.DataFrame(
        [(r["instance_id"], r["outcome"]["normalized_reward"]) for r in llm_games], columns=["instance", "reward"]
    ).groupby("instance")["reward"]
    differing = set(rewards.max()[rewards.max() > rewards.min()].index)
    assert {(p["extra_info"]["instance_id"], p["extra_info"]["player"]) for p in pairs} == {
        (i, s) for i in differing for s in (0, 1)
    } and len(pairs) == 2 * len(differing)
    for pair in pairs:
        info = pair["extra_info"]
        assert (
            info["chosen_reward"]
            == rewards.max()[info["instance_id"]]
            > info["rejected_reward"]
            == rewards.min()[info["instance_id"]]
        )
        assert pair["prompt"][0]["role"] == "system" and pair["chosen"] and pair["rejected"]
        assert pair["chosen"][-1]["role"] == pair["rejected"][-1]["role"] == "assistant"


def test_split_keeps_instances_whole_and_is_deterministic(llm_games, tmp_path):
    games = write(tmp_path / "games.jsonl", llm_games)

    def split(seed: str, out: str) -> tuple[set, set]:
        convert(games, "--seed", seed, "--val-fraction", "0.34", "--out-dir", str(tmp_path / out))
        return tuple(
            frozenset(r["extra_info"]["instance_id"] for r in rows(tmp_path / out / f"{s}.parquet"))
            for s in ("train", "val")
        )

    train, val = split("3", "a")
    assert not train & val and train | val == {f"seed-{s}" for s in SEEDS} and len(val) == 2
    assert split("3", "b") == (train, val)
    assert {split(str(seed), f"s{seed}")[1] for seed in range(4, 7)} != {val}  # the seed matters


def test_constant_groups_are_dropped_unless_kept(llm_games, tmp_path):
    flat = [json.loads(json.dumps(r)) for r in llm_games]
    for r in flat:
        if r["instance_id"] in ("seed-0", "seed-1"):
            r["outcome"]["normalized_reward"] = 0.5
            r["outcome"]["rewards"] = [0.5, 0.5]
    games = write(tmp_path / "games.jsonl", flat)
    convert(games, "--val-fraction", "0")
    grpo = summary_of(games)["grpo"]
    assert grpo["constant"] == grpo["dropped_constant"] == 4  # 2 instances x 2 seats
    assert {i["instance_id"] for i in group_rows_of(tmp_path)} == {f"seed-{s}" for s in SEEDS[2:]}
    convert(games, "--val-fraction", "0", "--keep-constant-groups", "--overwrite")
    assert summary_of(games)["grpo"]["dropped_constant"] == 0
    assert {i["instance_id"] for i in group_rows_of(tmp_path)} == {f"seed-{s}" for s in SEEDS}


def test_invalid_move_penalty_shapes_each_seat_and_breaks_constant_groups(llm_games, tmp_path):
    flat = [json.loads(json.dumps(r)) for r in llm_games if r["instance_id"] == "seed-0"]
    for r in flat:
        r["outcome"]["normalized_reward"] = 0.0
        r["outcome"]["rewards"] = [0.0, 0.0]
    flat[1]["events"].insert(0, {"player": 1, "kind": "invalid", "text": "x", "pairs": None, "error": "no tag"})
    games = write(tmp_path / "games.jsonl", flat)
    assert "no training rows" in convert(games, "--val-fraction", "0", ok=False).output
    convert(games, "--val-fraction", "0", "--invalid-move-penalty", "0.5", "--overwrite")
    [info] = group_rows_of(tmp_path)  # seat 0's group is still constant
    turns = len(flat[1]["players"][1]["turns"])
    assert info["player"] == 1 and info["rewards"] == [0.0, -0.5 / turns, 0.0, 0.0]


def test_group_index_stays_per_instance_when_run_files_are_concatenated(llm_games, tmp_path):
    flat = [json.loads(json.dumps(r)) for r in llm_games]
    for r in flat:
        r["group"] %= 3  # a second run numbered its instances from 0 again
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
    flat[3]["players"][0]["token_ids"][turn["prompt_len"]] += 1  # sampled id not at its offset
    flat[4]["players"][0]["turns"][0]["logprobs"].pop()  # logprobs misaligned
    flat.append(flat[5])  # the same game twice
    games = write(tmp_path / "games.jsonl", flat)
    convert(games, "--val-fraction", "0", "--keep-constant-groups", "--group-size", "3")
    summary = summary_of(games)
    assert summary["excluded"] == {
        "failed:max_new_tokens": 1,
        "failed:backend_error": 1,
        "token_invariant": 3,
        "duplicate_game_id": 1,
    }
    assert summary["games_used"] == len(llm_games) - 5 and len(summary["excluded_examples"]) == 6
    trained = {g for info in group_rows_of(tmp_path) for g in info["game_ids"]}
    assert not trained & {r["game_id"] for r in flat[:5]}  # failed games count nowhere
    assert len(trained) == len(llm_games) - 5 - summary["grpo"]["incomplete_games"]


def test_too_long_seats_are_not_written_but_their_games_count_in_the_group(llm_games, tmp_path):
    flat = [json.loads(json.dumps(r)) for r in llm_games]
    for r in flat[::3]:
        r["players"][0]["token_ids"] += [13] * 10  # more context after the last turn: a longer response
    games = write(tmp_path / "games.jsonl", flat)
    responses = {
        (r["game_id"], s): len(p["token_ids"]) - p["turns"][0]["prompt_len"]
        for r in flat
        for s, p in enumerate(r["players"])
    }
    limit = min(n for (_, seat), n in responses.items() if seat == 0) + 5
    convert(games, "--val-fraction", "0", "--keep-constant-groups", "--max-response-tokens", str(limit))
    too_long = {key for key, n in responses.items() if n > limit}
    assert 0 < len(too_long) and summary_of(games)["seats_too_long"] == len(too_long)
    assert summary_of(games)["excluded"] == {}
    infos = group_rows_of(tmp_path)
    for info in infos:
        assert len(info["game_ids"]) == K  # every game counts in its group
        trained = info["game_ids"][: len(info["token_ids"])]
        assert not {(g, info["player"]) for g in trained} & too_long
        assert {(g, info["player"]) for g in info["game_ids"][len(trained) :]} <= too_long
        assert all(len(t) - p <= limit for t, p in zip(info["token_ids"], info["prompt_len"]))
    assert any(0 < len(i["token_ids"]) < K for i in infos)
    assert sum(K - len(i["token_ids"]) for i in infos) + K * summary_of(games)["grpo"]["without_sampled_seat"] == len(
        too_long
    )


def test_games_of_a_group_must_share_sampling_settings(llm_games, tmp_path):
    flat = [json.loads(json.dumps(r)) for r in llm_games]
    flat[2]["settings"]["sampling"]["temperature"] = 0.7
    games = write(tmp_path / "games.jsonl", flat)
    message = convert(games, ok=False).output
    assert flat[2]["game_id"] in message and "temperature=0.7" in message


def _line(record: dict) -> str:
    return json.dumps(record)


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda r: "{not json", ["games.jsonl:3", "not valid JSON"]),
        (lambda r: _line({**r, "schema_version": 99}), ["games.jsonl:3", "schema_version", "99"]),
        (lambda r: _line({k: v for k, v in r.items() if k != "outcome"}), ["games.jsonl:3", "'outcome'"]),
        (
            lambda r: _line(
                {**r, "players": [r["players"][0], {k: v for k, v in r["players"][1].items() if k != "token_ids"}]}
            ),
            ["games.jsonl:3", "players[1].token_ids"],
        ),
        (lambda r: "[1, 2]", ["games.jsonl:3", "JSON object"]),
    ],
)
def test_bad_lines_name_file_line_and_field(llm_games, tmp_path, damage, words):
    lines = [_line(r) for r in llm_games]
    lines[2] = lines[5] = damage(llm_games[2])
    games = tmp_path / "games.jsonl"
    games.write_text("\n".join(lines) + "\n")
    result = convert(games, ok=False)
    message = result.output.strip()
    assert message.startswith("Error:") and "\n" not in message and "Traceback" not in message
    assert all(w in message for w in words) and "2 invalid line(s)" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["games.jsonl"]  # nothing written, no temp files
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
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "convert_summary.json",
        "games.jsonl",
        "train.parquet",
        "val.parquet",
    ]


@pytest.mark.slow
def test_local_model_games_round_trip(tmp_path, tokenizer, local_model_dir):
    """Two games of the real SmolLM2 (seeded; turns also stop at a newline so that they end within
    the budget, and no template text can follow such a turn, so its game fails as token_invariant):
    every game is either converted with its sampled ids intact or excluded by reason."""
    params = SamplingParams(max_new_tokens=32, stop_token_ids=(tokenizer.eos_token_id, tokenizer.encode("\n")[0]))

    async def go():
        async with backend_class("local")(BackendOptions(model=local_model_dir, seed=0), tokenizer) as backend:
            seat = lambda spec, s, game, start: LLMPlayer(
                s, start.system[s], backend, tokenizer, params, f"{spec.game_id}#{s}"
            )
            specs = plan_games([Instance.from_seed(0)], 2, 2)
            with GameWriter(tmp_path / "games.jsonl") as writer:
                await run_games(
                    specs, (seat, seat), GameConfig(limits=Limits(max_moves=4)), writer, 2, SETTINGS, progress=False
                )

    asyncio.run(go())
    records = {r["game_id"]: r for r in read_games(tmp_path / "games.jsonl")}
    convert(tmp_path / "games.jsonl", "--val-fraction", "0", "--keep-constant-groups")
    summary = summary_of(tmp_path / "games.jsonl")
    failed = Counter(f"failed:{r['failure']['reason']}" for r in records.values() if r["failure"])
    assert summary["excluded"] == dict(failed) and summary["games_used"] == len(records) - sum(failed.values()) >= 1
    for info in group_rows_of(tmp_path):
        for j, ids in enumerate(info["token_ids"]):
            seat = records[info["game_ids"][j]]["players"][info["player"]]
            own = [t for t, m in zip(ids[info["prompt_len"][j] :], info["response_mask"][j]) if m]
            assert ids == seat["token_ids"] and own == [t for turn in seat["turns"] for t in turn["output_ids"]]
            assert np.allclose(
                [lp for lp, m in zip(info["logprobs"][j], info["response_mask"][j]) if m],
                [lp for turn in seat["turns"] for lp in turn["logprobs"]],
                atol=1e-6,
            )


def test_a_second_convert_into_one_directory_fails_at_once(llm_games, tmp_path):
    games = write(tmp_path / "games.jsonl", llm_games)
    with Lock(tmp_path, "another convert"):
        refused = convert(games, "--keep-constant-groups", ok=False)
    assert f"{tmp_path} (the output directory) is being written by another process" in refused.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["games.jsonl"]
    convert(games, "--keep-constant-groups")


def _fails_in(monkeypatch, target: str, error: BaseException | None = None):
    """Make `target` (a writer's method) raise `error`, or send this process SIGTERM."""

    def broken(self, *args):
        if error is None:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs before this ends
        raise error

    monkeypatch.setattr(target, broken)


@pytest.mark.parametrize("target", ["convert.writer.Spill.write", "convert.writer.ParquetOutput.write"])
@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), None])
def test_a_failed_or_stopped_convert_leaves_no_temporary_file(llm_games, tmp_path, monkeypatch, target, error):
    games = write(tmp_path / "games.jsonl", llm_games)
    _fails_in(monkeypatch, target, error)
    result = convert(games, "--keep-constant-groups", ok=False)
    assert "Traceback" not in result.output
    if error is None:
        assert result.exit_code == 128 + signal.SIGTERM
    else:
        assert result.exit_code == 1 and "No space left on device" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["games.jsonl"]


def test_a_summary_that_cannot_be_written_leaves_no_temporary_file(tmp_path, monkeypatch):
    def full(self, data):
        Path.write_text(self, "half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(OSError):
        write_json_atomic(tmp_path / "summary.json", {"a": 1})
    assert list(tmp_path.iterdir()) == []


def test_per_seat_baseline_subtracts_each_seats_mean_and_verl_still_reads_the_rows(llm_games, tmp_path, tokenizer):
    """Seat 1 is paid 1 more than seat 0 in every game: the per-seat baseline takes each seat's
    mean over the file off its training rewards, so both seats' rewards center on 0."""
    flat = [json.loads(json.dumps(r)) for r in llm_games]
    for i, r in enumerate(flat):
        r["outcome"]["rewards"] = [i % K / K, 1 + i % K / K]
    games = write(tmp_path / "games.jsonl", flat)
    convert(games, "--val-fraction", "0", "--baseline", "per-seat")
    means = [np.mean([r["outcome"]["rewards"][s] for r in flat]) for s in (0, 1)]
    assert summary_of(games)["grpo"]["seat_baselines"] == pytest.approx(means)
    by_id = {r["game_id"]: r for r in flat}
    dataset = rlhf_dataset(tmp_path / "train.parquet", tokenizer, tmp_path)
    assert len(dataset) == 2 * len(SEEDS)
    for i in range(len(dataset)):
        info = dataset[i]["extra_info"]
        seat = info["player"]
        expected = [by_id[g]["outcome"]["rewards"][seat] - means[seat] for g in info["game_ids"]]
        assert list(info["rewards"]) == pytest.approx(expected)
        assert list(info["normalized_rewards"]) == [by_id[g]["outcome"]["rewards"][seat] for g in info["game_ids"]]
    assert "does not use it" in convert(games, "--format", "sft", "--baseline", "per-seat", ok=False).output


@pytest.mark.parametrize("fmt", ["grpo", "dpo"])
def test_seat_writes_only_the_trained_seats_rows(llm_games, tmp_path, fmt):
    """Games against an opponent (a league's earlier checkpoint) train only the model's seat."""
    games = write(tmp_path / "games.jsonl", llm_games)
    convert(games, "--val-fraction", "0", "--keep-constant-groups", "--format", fmt, "--seat", "1")
    players = {r["extra_info"]["player"] for r in rows(tmp_path / "train.parquet")}
    assert players == {1}
    assert summary_of(games)["seats_not_trained"] == len(llm_games)


def test_seats_of_writes_the_seats_the_trained_model_played(llm_games, tmp_path):
    """A league's games: against a frozen copy of the trained model both seats are its, against another
    opponent only seat 0 is."""
    flat = [json.loads(json.dumps(r)) for r in llm_games]
    copies = sorted({r["instance_id"] for r in flat})[::2]
    for record in flat:
        partner = "/m/player" if record["instance_id"] in copies else "/m/opponent"
        record["settings"]["seat0"] = {**(record["settings"].get("seat0") or {}), "model": "/m/player"}
        record["settings"]["seat1"] = {**(record["settings"].get("seat1") or {}), "model": partner}
    games = write(tmp_path / "games.jsonl", flat)
    convert(games, "--val-fraction", "0", "--keep-constant-groups", "--seats-of", "/m/player")
    written = {(r["extra_info"]["player"], r["extra_info"]["instance_id"]) for r in rows(tmp_path / "train.parquet")}
    instances = {r["instance_id"] for r in flat}
    assert written == {(0, i) for i in instances} | {(1, i) for i in copies}
    assert summary_of(games)["seats_not_trained"] == sum(r["instance_id"] not in copies for r in flat)


def test_all_failed_games_leave_no_rows_and_say_why_in_every_format(llm_games, tmp_path):
    flat = [json.loads(json.dumps(r)) for r in llm_games]
    for record in flat:
        record["failure"] = {"reason": "backend_error", "detail": "server gone", "player": 0}
        record["outcome"]["termination"] = "backend_error"
    games = write(tmp_path / "games.jsonl", flat)
    for fmt in ("grpo", "sft", "dpo"):
        result = convert(games, "--format", fmt, "--out-dir", str(tmp_path / fmt), ok=False)
        assert result.exit_code == EXIT_NO_ROWS and "Traceback" not in result.output
        assert f"no training rows are left: all {len(flat)} games were excluded" in result.output
        assert "failed games are never trained" in result.output
        assert list((tmp_path / fmt).iterdir()) == []


def test_a_later_convert_removes_what_a_killed_one_left(llm_games, tmp_path):
    games = write(tmp_path / "games.jsonl", llm_games)
    killed_in_pass_2 = (
        "import os, signal, sys; import convert.writer as w; "
        "w.ParquetOutput.write = lambda self, batch: os.kill(os.getpid(), signal.SIGKILL); "
        "from convert.cli import main; main(sys.argv[1:])"
    )
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    killed = subprocess.run([sys.executable, "-c", killed_in_pass_2, str(games)], env=env, capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp"))
    assert any(name.startswith(".train.parquet.spill.") for name in left), left
    alive = tmp_path / f".train.parquet.{os.getppid()}.tmp"  # a running process's file is not judged stale
    alive.write_text("")
    result = convert(games, "--keep-constant-groups")
    assert f"removed {len(left)} temporary files of converts that were killed" in result.stderr
    assert sorted(Path(p).name for p in summary_of(games)["stale_files_removed"]) == left
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        alive.name,
        "convert_summary.json",
        "games.jsonl",
        "train.parquet",
        "val.parquet",
    ]


def test_a_scripted_opponent_is_not_retokenized_so_it_needs_no_tokenizer(tokenizer, tmp_path):
    """A league's games against the scripted player: training seat 0 reads only its recorded ids, so
    a tokenizer that cannot load is never asked for; training the scripted seat needs it."""
    backend = ProposerBackend(tokenizer)

    def seat(spec, s, game, start):
        if s == 1:
            return scripted_seat(spec, s, game, start)
        return LLMPlayer(s, start.system[s], backend, tokenizer, SamplingParams(), f"{spec.game_id}#{s}")

    games = tmp_path / "games.jsonl"
    play(games, seat, seeds=range(2), k=2)
    missing = str(tmp_path / "no-tokenizer-here")
    convert(games, "--val-fraction", "0", "--keep-constant-groups", "--seat", "0", "--model", missing)
    assert {r["extra_info"]["player"] for r in rows(tmp_path / "train.parquet")} == {0}
    refused = convert(games, "--val-fraction", "0", "--seat", "1", "--model", missing, "--overwrite", ok=False)
    assert "is not a local directory" in refused.output


def test_max_groups_keeps_the_first_groups_of_the_file_and_counts_the_rest(llm_games, tmp_path):
    """DAPO's batch: games played in rounds until enough groups differ keep the earliest rounds' groups."""
    games = write(tmp_path / "games.jsonl", llm_games)
    every = tmp_path / "every"
    convert(games, "--val-fraction", "0", "--keep-constant-groups", "--out-dir", str(every))
    groups = [(i["instance_id"], i["player"]) for i in group_rows_of(every)]
    assert len(groups) > 2
    first = tmp_path / "first"
    convert(games, "--val-fraction", "0", "--keep-constant-groups", "--max-groups", "2", "--out-dir", str(first))
    file_order = list(dict.fromkeys(r["game_id"].split("/")[0] for r in llm_games))
    kept = [(i["instance_id"], i["player"]) for i in group_rows_of(first)]
    assert sorted(kept) == sorted(groups, key=lambda g: (file_order.index(g[0]), g[1]))[:2]
    summary = json.loads((first / "convert_summary.json").read_text())["grpo"]
    assert summary["rows"] == 2 and summary["beyond_max_groups"] == len(groups) - 2
    result = convert(games, "--format", "sft", "--max-groups", "2", "--out-dir", str(tmp_path / "sft"), ok=False)
    assert "max groups is a positive number of GRPO groups, got 2 (sft)" in result.output
