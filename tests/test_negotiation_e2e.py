"""The negotiation game end to end, as the matching game runs: scripted and LLM seats through
the runner and `selfplay-gen play --game negotiation`, records checked on read, and convert's
grpo, sft and dpo outputs, each seat judged by its own reward, read by verl's own datasets."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from omegaconf import OmegaConf
from test_convert import SETTINGS, convert, rlhf_dataset, rows, summary_of, write
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

from selfplay_gen.backends.base import Backend, Generation, SamplingParams
from selfplay_gen.cli import main
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import Limits
from selfplay_gen.games.negotiation import Instance, render_share, stated_offer
from selfplay_gen.players import LLMPlayer
from selfplay_gen.records import GameWriter, RecordError, parse, read_games
from selfplay_gen.runner import plan_games, run_games

SEEDS, K = range(4), 4


class DealBackend(Backend):
    """Stands in for a model that negotiates: seat 0 states a share it takes (drawn by the game, so
    the K games of an instance end differently), seat 1 proposes the rest, seat 0 proposes its
    share. Its first turn of every third game is an invalid move."""

    name = model = "deal"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    async def generate(self, prompt_ids, params, *, session, messages=None) -> Generation:
        game_id, seat = session.rsplit("#", 1)
        instance = Instance.from_seed(int(game_id.split("/")[0].removeprefix("seed-")))
        mine = random.Random(game_id).choice(instance.shares())
        last, turns = messages[-1]["content"], sum(m["role"] == "assistant" for m in messages)
        if seat == "1":
            offer = stated_offer(last, instance.counts)
            text = f"[propose] {render_share(instance.rest(offer))}" if offer else "[message] What do you take?"
        elif turns == 0 and int(game_id.rsplit("/", 1)[1]) % 3 == 2:
            text = "I take everything"
        elif "Make yours now" in last:
            text = f"[propose] {render_share(mine)}"
        else:
            text = f"[message] I take {render_share(mine)}."
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        return Generation(ids, [-0.5] * len(ids), "stop", len(prompt_ids))


@pytest.fixture(scope="module")
def games_file(tmp_path_factory, tokenizer) -> Path:
    backend = DealBackend(tokenizer)
    seat = lambda spec, s, game, start: LLMPlayer(
        s, start.system[s], backend, tokenizer, SamplingParams(), f"{spec.game_id}#{s}"
    )
    path = tmp_path_factory.mktemp("negotiation") / "games.jsonl"
    specs = plan_games([Instance.from_seed(s) for s in SEEDS], K, K * len(SEEDS))
    config = GameConfig("negotiation", Limits(max_moves=10), {"reward_mode": "semi-competitive"})
    with GameWriter(path) as writer:
        asyncio.run(run_games(specs, (seat, seat), config, writer, 4, SETTINGS, progress=False))
    return path


@pytest.fixture(scope="module")
def records(games_file) -> list[dict]:
    return list(read_games(games_file))


def test_llm_games_are_recorded_with_each_seats_points(records):
    assert len(records) == K * len(SEEDS) and {r["game"] for r in records} == {"negotiation"}
    for r in records:
        instance = Instance.from_dict(r["instance"])
        outcome = r["outcome"]
        assert outcome["termination"] == "agreed" and r["failure"] is None
        share0 = outcome["proposals"][0]
        assert outcome["rewards"] == [instance.value(0, share0), instance.value(1, instance.rest(share0))]
        assert r["players"][0]["kind"] == "llm" and r["players"][0]["messages"][0]["content"].startswith("You and")
    assert sum(r["stats"]["invalid_moves"] for r in records) == len(SEEDS)  # game 2 of each instance


def test_a_record_whose_game_parts_are_wrong_is_refused(records):
    bad = json.loads(json.dumps(records[0]))
    bad["outcome"]["reward_mode"] = "friendly"
    with pytest.raises(RecordError, match="outcome.reward_mode'.*is not a reward mode"):
        parse(json.dumps(bad).encode(), "g:1")
    bad = dict(records[0], game="chess")
    with pytest.raises(RecordError, match="field 'game': 'chess' is not a registered game"):
        parse(json.dumps(bad).encode(), "g:1")


def test_grpo_groups_each_seat_by_its_own_reward_through_verl(games_file, records, tmp_path, tokenizer):
    games = write(tmp_path / "games.jsonl", records)
    convert(games, "--val-fraction", "0", "--keep-constant-groups")
    by_id = {r["game_id"]: r for r in records}
    dataset = rlhf_dataset(tmp_path / "train.parquet", tokenizer, tmp_path)
    assert len(dataset) == 2 * len(SEEDS)
    for i in range(len(dataset)):
        row = dataset[i]
        info, seat = row["extra_info"], row["extra_info"]["player"]
        assert row["data_source"] == "selfplay_negotiation" and row["ability"] == "negotiation"
        assert list(info["rewards"]) == [by_id[g]["outcome"]["rewards"][seat] for g in info["game_ids"]]
        assert json.loads(row["reward_model"]["ground_truth"]) == {
            "best_joint": by_id[info["game_ids"][0]]["outcome"]["best_joint"]
        }
    summary = summary_of(games)
    assert summary["game"] == "negotiation" and summary["rollout_n"] == K


def test_sft_keeps_each_seats_best_games(records, tmp_path, tokenizer):
    games = write(tmp_path / "games.jsonl", records)
    convert(games, "--format", "sft", "--top-fraction", "0.25", "--val-fraction", "0")
    kept = {(r["extra_info"]["game_id"], r["extra_info"]["player"]) for r in rows(tmp_path / "train.parquet")}
    for seed in SEEDS:
        for seat in (0, 1):
            games_of = [r for r in records if r["instance_id"] == f"seed-{seed}"]
            best = max(games_of, key=lambda r: r["outcome"]["rewards"][seat])  # the first of equals
            assert {(g["game_id"], seat) for g in games_of} & kept == {(best["game_id"], seat)}
    config = OmegaConf.create({"max_length": 4096, "truncation": "error", "messages_key": "messages"})
    assert len(MultiTurnSFTDataset(str(tmp_path / "train.parquet"), tokenizer, config)) == len(kept)


def test_dpo_pairs_each_seats_winner_against_its_loser(records, tmp_path):
    games = write(tmp_path / "games.jsonl", records)
    convert(games, "--format", "dpo", "--val-fraction", "0")
    pairs = rows(tmp_path / "train.parquet")
    by_id = {r["game_id"]: r for r in records}
    assert Counter(p["extra_info"]["player"] for p in pairs) == {0: len(SEEDS), 1: len(SEEDS)}
    for pair in pairs:
        info, seat = pair["extra_info"], pair["extra_info"]["player"]
        chosen, rejected = by_id[info["chosen_game_id"]], by_id[info["rejected_game_id"]]
        assert chosen["instance_id"] == rejected["instance_id"] == info["instance_id"]
        rewards = [r["outcome"]["rewards"][seat] for r in records if r["instance_id"] == info["instance_id"]]
        assert info["chosen_reward"] == chosen["outcome"]["rewards"][seat] == max(rewards)
        assert info["rejected_reward"] == rejected["outcome"]["rewards"][seat] == min(rewards) < max(rewards)
        assert pair["chosen"][-1]["role"] == pair["rejected"][-1]["role"] == "assistant"


def test_an_instance_played_under_two_games_is_refused(records, tmp_path):
    """A mix of games plays each game on seeds of its own, so one instance under two games is a
    file put together by hand: a GRPO group would compare games of different rules."""
    matching = json.loads((Path(__file__).parent / "data" / "golden_matching.jsonl").read_text().splitlines()[0])
    matching["game_id"] = "matching-" + matching["game_id"]  # distinct ids, so the instance is what clashes
    games = write(tmp_path / "games.jsonl", [*records, matching])
    assert "instance seed-3 holds games of matching, negotiation" in convert(games, ok=False).output


def play(*args):
    return CliRunner().invoke(main, ["--backend", "scripted", "-q", *args])


def test_play_command_plays_scripted_negotiators_in_the_chosen_reward_mode(tmp_path):
    out = tmp_path / "g.jsonl"
    result = play("--game", "negotiation", "--reward-mode", "competitive", "-n", "8", "-k", "4", "--out", str(out))
    assert result.exit_code == 0, result.output
    records = list(read_games(out))
    assert len(records) == 8 and all(r["outcome"]["reward_mode"] == "competitive" for r in records)
    assert all(sum(r["outcome"]["rewards"]) == 0 for r in records)
    assert records[0]["settings"]["run"]["game"] == "negotiation"
    assert records[0]["settings"]["seat0"]["strength"] == 1.0
    summary = json.loads((tmp_path / "g.summary.json").read_text())
    assert summary["games"] == 8 and summary["agreement_rate"] == 1.0
    resumed = play("--game", "matching", "-n", "8", "-k", "4", "--out", str(out), "--resume")
    assert resumed.exit_code != 0 and "game='negotiation' (now 'matching')" in resumed.output
    semi = tmp_path / "semi" / "g.jsonl"
    assert play("--game", "negotiation", "-n", "8", "-k", "4", "--out", str(semi)).exit_code == 0
    convert(semi, "--format", "sft", "--top-fraction", "1", "--val-fraction", "0")  # scripted seats: re-tokenized
    assert summary_of(semi)["seats_retokenized"] == 16


def test_each_game_plays_its_own_teacher(tmp_path):
    """`--scripted-policy teacher` (the warm start's demonstrations) is the negotiator at full
    strength whatever strength is asked for, and the matching game's demonstration protocol."""
    for game, expected in (("negotiation", {"strength": 1.0}), ("matching", {"policy": "teacher"})):
        out = tmp_path / f"{game}.jsonl"
        args = ("--game", game, "--scripted-policy", "teacher", "--scripted-strength", "0.2", "-n", "2", "-k", "1")
        assert play(*args, "--out", str(out)).exit_code == 0
        (record, _) = read_games(out)
        for seat in ("seat0", "seat1"):
            assert {k: record["settings"][seat][k] for k in expected} == expected
        assert record["players"][0]["policy"] == ("negotiator" if game == "negotiation" else "teacher")


@pytest.mark.parametrize(
    "args, words",
    [
        (["--game", "chess"], "unknown game 'chess'; known games: matching, negotiation"),
        (["--game", "negotiation", "--reward-mode", "friendly"], "unknown reward mode 'friendly'"),
        (["--reward-mode", "competitive"], "the matching game does not take the options"),
        (["--game", "negotiation", "--instances", "human"], "the negotiation game has random ones only"),
    ],
)
def test_bad_game_choices_fail_clearly(tmp_path, args, words):
    result = play(*args, "--out", str(tmp_path / "g.jsonl"))
    assert result.exit_code == 2 and words in result.output and "Traceback" not in result.output
