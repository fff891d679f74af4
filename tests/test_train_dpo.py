"""DPO on convert's preference pairs of real negotiation games: the pairs tokenized as each seat
built its context with only its own turns scored, a real DPO run of the embedded model on CPU
whose preference margin moves, and the trained model written as a plain, loadable directory."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from click.testing import CliRunner

from convert.cli import main as convert_main
from selfplay_gen import models
from selfplay_gen.cli import main
from selfplay_gen.records import read_games
from selfplay_gen.token_context import token_context
from selfplay_gen.train.dpo import DpoSettings, pair_tokens, read_pairs, train
from selfplay_gen.train.dpo import main as dpo_main
from selfplay_gen.verl.merge_lora import ADAPTER_DIR


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    """Seat 0 asks for everything (strength 1) in one game of each instance and little (0.2) in
    another, against the same partner (0.5): each seat's better and worse game make a pair."""
    out = tmp_path_factory.mktemp("dpo")
    records = []
    for n, strength in enumerate(("1", "0.2")):
        path = out / f"s{strength}.jsonl"
        args = ["play", "--backend", "scripted", "--game", "negotiation", "-n", "3", "-k", "1", "-q"]
        args += ["--scripted-strength", strength, "--partner-scripted-strength", "0.5", "--out", str(path)]
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        for record in read_games(path):  # the second run's games as more games of the same instances
            records.append({**record, "game_id": f"{record['instance_id']}/{n}", "game_index": n})
    games = out / "games.jsonl"
    games.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = CliRunner().invoke(convert_main, [str(games), "--format", "dpo", "--val-fraction", "0"])
    assert result.exit_code == 0, result.output
    return out / "train.parquet"


def test_pairs_are_tokenized_as_the_seat_saw_them_and_score_its_own_turns_only(pairs_file, tokenizer):
    rows = pq.read_table(pairs_file).to_pylist()
    assert {r["extra_info"]["player"] for r in rows} == {0, 1}
    context = token_context(tokenizer)
    for row in rows:
        tokens = pair_tokens(row, tokenizer)
        for role in ("chosen", "rejected"):
            messages = row["prompt"] + row[role]
            ids, _ = context.retokenize(messages)
            assert tokens["prompt_ids"] + tokens[f"{role}_ids"] == ids  # one context, appended as in play
            own = [i for i, mine in zip(tokens[f"{role}_ids"], tokens[f"{role}_own"]) if mine]
            turns = [m["content"] + models.END_OF_TURN for m in row[role] if m["role"] == "assistant"]
            assert tokenizer.decode(own) == "".join(turns)  # the partner's words are never scored
        assert tokens["prompt_ids"] == ids[: len(tokens["prompt_ids"])]
        assert len(tokens["prompt_ids"]) >= len(context.prompt(row["prompt"][:1]))  # at least the system prompt


def test_what_is_not_a_pairs_file_is_refused(pairs_file, tokenizer, tmp_path):
    pq.write_table(pa.table({"messages": [[{"role": "user", "content": "hi"}]]}), tmp_path / "sft.parquet")
    with pytest.raises(ValueError, match=r"sft.parquet: no column chosen, prompt, rejected: not a .*--format dpo"):
        read_pairs(tmp_path / "sft.parquet", tokenizer)
    result = CliRunner().invoke(dpo_main, ["--pairs", str(tmp_path / "sft.parquet"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and "no column chosen" in result.output and not (tmp_path / "o").exists()
    rows = pq.read_table(pairs_file).to_pylist()
    rows[1]["chosen"] = [m for m in rows[1]["chosen"] if m["role"] != "assistant"]  # the partner's turns only
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(pairs_file)), tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=r"bad.parquet: row 1: field 'chosen' holds no turn of the seat"):
        read_pairs(tmp_path / "bad.parquet", tokenizer)
    empty = pq.read_table(pairs_file).slice(0, 0)
    pq.write_table(empty, tmp_path / "empty.parquet")
    with pytest.raises(ValueError, match="empty.parquet: no pairs"):
        read_pairs(tmp_path / "empty.parquet", tokenizer)


def own_margin(model, tokens: dict) -> float:
    """log p(chosen's own turns) - log p(rejected's own turns) under `model`."""
    total = 0.0
    for role, sign in (("chosen", 1), ("rejected", -1)):
        ids = torch.tensor([tokens["prompt_ids"] + tokens[f"{role}_ids"]])
        mask = torch.tensor([[0] * len(tokens["prompt_ids"]) + tokens[f"{role}_own"]])[:, 1:].bool()
        with torch.no_grad():
            logps = torch.log_softmax(model(ids).logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
        total += sign * float(logps[mask].sum())
    return total


@pytest.mark.slow
def test_dpo_moves_the_margin_and_writes_a_plain_model(pairs_file, tokenizer, tmp_path):
    from transformers import AutoModelForCausalLM

    # the shortest pair whose two games differ in the seat's own turns: two steps on it, on CPU
    rows = pq.read_table(pairs_file).to_pylist()
    tokenized = [pair_tokens(r, tokenizer) for r in rows]
    differ = [i for i, t in enumerate(tokenized) if t["chosen_ids"] != t["rejected_ids"]]
    pick = min(differ, key=lambda i: len(tokenized[i]["chosen_ids"]) + len(tokenized[i]["rejected_ids"]))
    pq.write_table(pq.read_table(pairs_file).slice(pick, 1), tmp_path / "pair.parquet")
    out = tmp_path / "dpo_model"
    settings = DpoSettings(lora_rank=8, lr=5e-4, beta=0.1, max_steps=3, batch_size=1, max_length=1024)
    log = train(None, tmp_path / "pair.parquet", out, settings)

    assert len(log) == 3 and [json.loads(line) for line in (out / "dpo_log.jsonl").read_text().splitlines()] == log
    assert (
        log[0]["loss"] == pytest.approx(math.log(2), abs=1e-3) and log[0]["rewards/margins"] == 0
    )  # policy = reference
    assert log[-1]["rewards/margins"] > 0 and log[-1]["loss"] < log[0]["loss"]
    assert (out / ADAPTER_DIR / "adapter_config.json").exists() and not (out / "trainer").exists()

    start = AutoModelForCausalLM.from_pretrained(models.resolve(None))
    trained = AutoModelForCausalLM.from_pretrained(out)  # plain weights: the adapter is folded in
    # the config as the source's (TRL trains without the KV cache): a server swaps weights only between equal configs
    assert json.loads((out / "config.json").read_text()) == json.loads(
        (Path(models.resolve(None)) / "config.json").read_text()
    )
    assert own_margin(trained, tokenized[pick]) > own_margin(start, tokenized[pick])
