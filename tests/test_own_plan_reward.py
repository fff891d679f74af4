"""The training reward's own-plan term (matching): each seat paid for what the agreed matching is worth on the
table it sees, recorded by the game, read by convert, the online loop and a run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.records import read_games
from selfplay_gen.reward import RewardTerms, own_plan_share, training_reward


@pytest.fixture(scope="module")
def random_games(tmp_path_factory) -> Path:
    """Random legal players' matching games: some agree on one random matching, some on none."""
    out = tmp_path_factory.mktemp("own_plan") / "games.jsonl"
    args = ["play", "--game", "matching", "--backend", "scripted", "--scripted-policy", "random", "-n", "48", "-k", "4"]
    result = CliRunner().invoke(main, [*args, "-q", "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


def test_the_game_records_each_seats_own_plan_share_of_the_agreed_matching(random_games):
    records = list(read_games(random_games))
    agreed = [r for r in records if r["outcome"]["agreed"]]
    assert 0 < len(agreed) < len(records)
    for record in records:
        shares, proposal = record["outcome"]["own_plan_shares"], record["outcome"]["proposal"]
        instance = Instance.from_dict(record["instance"])
        expected = [instance.own_plan_share(s, proposal) if proposal else 0.0 for s in (0, 1)]
        assert shares == pytest.approx(expected) and all(0 <= share <= 1 for share in shares)
        for seat in (0, 1):
            game_reward = record["outcome"]["rewards"][seat]
            assert training_reward(record, seat) == game_reward  # unweighted: the game's reward alone
            weighted = training_reward(record, seat, RewardTerms(own_plan_weight=2.0))
            assert weighted == pytest.approx(game_reward + 2 * shares[seat])
    assert any(r["outcome"]["own_plan_shares"][0] != r["outcome"]["own_plan_shares"][1] for r in agreed)


def test_records_written_before_the_shares_get_them_when_read(random_games, tmp_path):
    lines = random_games.read_text().splitlines()
    older = []
    for line in lines:
        record = json.loads(line)
        del record["outcome"]["own_plan_shares"]
        older.append(json.dumps(record))
    path = tmp_path / "older.jsonl"
    path.write_text("\n".join(older) + "\n")
    now, then = list(read_games(random_games)), list(read_games(path))
    assert [r["outcome"]["own_plan_shares"] for r in then] == [r["outcome"]["own_plan_shares"] for r in now]


def test_a_game_without_the_shares_says_so_when_the_term_is_asked_for():
    negotiation = {"game_id": "g", "game": "negotiation", "outcome": {"rewards": [3.0, 5.0]}, "players": [{}, {}]}
    assert training_reward(negotiation, 1) == 5.0
    with pytest.raises(ValueError, match=r"'g' \(negotiation\): its outcome records no own_plan_shares"):
        training_reward(negotiation, 1, RewardTerms(own_plan_weight=1.0))
    with pytest.raises(ValueError, match=r"only a game whose seats share one reward .* \(`Game.own_plan`\)"):
        own_plan_share(negotiation, 0)


def test_convert_adds_the_own_plan_term_to_the_training_reward_and_reports_it_apart(random_games, tmp_path):
    from convert.cli import main as convert_main

    def convert(out: Path, *args: str) -> dict:
        args = (str(random_games), "--out-dir", str(out), "--val-fraction", "0", *args)
        result = CliRunner().invoke(convert_main, list(args))
        assert result.exit_code == 0, result.output
        return json.loads((out / "convert_summary.json").read_text())

    records = list(read_games(random_games))
    mean_share = sum(sum(r["outcome"]["own_plan_shares"]) for r in records) / (2 * len(records))  # both seats
    plain = convert(tmp_path / "plain", "--format", "dpo", "--seat", "0")
    own = convert(tmp_path / "own", "--format", "dpo", "--seat", "0", "--own-plan-weight", "0.5")
    assert own["mean_rewards"] == plain["mean_rewards"]  # the game reward the evaluation reads is the same
    assert plain["own_plan"] == {"weight": 0.0, "mean_term": 0.0}
    assert own["own_plan"]["mean_term"] == pytest.approx(0.5 * mean_share)
    assert own["mean_training_reward"] == pytest.approx(plain["mean_training_reward"] + 0.5 * mean_share)

    def pairs(out: Path) -> list[tuple[str, str]]:
        info = pd.read_parquet(out / "train.parquet")["extra_info"]
        return [(row["chosen_game_id"], row["rejected_game_id"]) for row in info]

    by_id = {r["game_id"]: r for r in records}
    assert pairs(tmp_path / "own") != pairs(tmp_path / "plain")  # the term changes which games are preferred
    for chosen, rejected in pairs(tmp_path / "own"):
        ranked = [training_reward(by_id[game], 0, RewardTerms(own_plan_weight=0.5)) for game in (chosen, rejected)]
        assert ranked[0] > ranked[1]
    bad = [str(random_games), "--out-dir", str(tmp_path / "x"), "--own-plan-weight", "-1"]
    result = CliRunner().invoke(convert_main, bad)
    assert result.exit_code == 2 and "--own-plan-weight" in result.output


def dry_iterate(tmp_path: Path, *args: str) -> CliRunner:
    from selfplay_gen.iterate.cli import iterate_command

    common = ["--dry-run", "--initial_model", "/m0", "--run_dir", str(tmp_path / "run"), "--tools.gen", "gen"]
    common += ["--tools.convert", "conv", "--verl.python", sys.executable, "--warm.policy", "none"]
    return CliRunner().invoke(iterate_command, [*common, "--num_iterations", "1", *args])


def test_a_run_feeds_the_own_plan_weight_to_every_trainers_rewards_in_matching_only(tmp_path):
    for trainer in ("grpo", "filtered-bc"):
        result = dry_iterate(tmp_path / trainer, "--trainer", trainer, "--own_plan_weight", "0.5")
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        (convert,) = [line for line in lines if line.startswith("+ conv ") and "/iter_001/" in line]
        assert "--own-plan-weight 0.5" in convert, trainer
    online = dry_iterate(tmp_path / "online", "--trainer", "grpo-online", "--own_plan_weight", "0.5")
    (train,) = [line for line in online.output.splitlines() if "-m verl.trainer.main_ppo" in line]
    assert "+selfplay.own_plan_weight=0.5" in train
    plain = dry_iterate(tmp_path / "plain", "--trainer", "grpo")
    assert plain.exit_code == 0 and "own-plan-weight" not in plain.output and "own_plan_weight" not in plain.output
    refused = dry_iterate(tmp_path / "neg", "--game", "negotiation", "--own_plan_weight", "1")
    assert refused.exit_code == 2 and "own_plan_weight" in refused.output
    assert "negotiation records no own-plan shares" in refused.output
