"""Development and test instances: disjoint seed ranges, `eval --instances dev|test|heldout`, and
the guards that keep training off both ranges (convert, online init data, the iteration seeds)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from convert.cli import main as convert_main
from selfplay_gen.cli import main
from selfplay_gen.evaluation.splits import (
    DEV,
    TEST,
    EvaluationSeedError,
    check_training_seeds,
    iteration_seeds,
    split_seeds,
)
from selfplay_gen.verl.init_data import init_command


def evaluate(tmp_path, *args):
    common = ["--backend", "scripted", "-k", "1", "-q", "--bootstrap", "100", "--out", str(tmp_path)]
    return CliRunner().invoke(main, ["eval", *common, *args])


def played_instances(out) -> set[str]:
    return set(json.loads((out / "metrics.json").read_text())["per_instance"]["scripted-0.5"])


def test_the_ranges_are_apart_from_training_and_from_each_other():
    assert DEV.stop <= TEST.start
    assert 10**9 - 1 not in DEV and 10**9 in DEV and 2 * 10**9 - 1 in DEV and 2 * 10**9 in TEST
    assert list(split_seeds("dev", 3)) == [10**9, 10**9 + 1, 10**9 + 2]
    assert split_seeds("heldout", 2, offset=5) == split_seeds("dev", 2, offset=5)
    assert split_seeds("test", 256).start == 2 * 10**9
    with pytest.raises(EvaluationSeedError, match="run past the development instances"):
        split_seeds("dev", 2, offset=10**9 - 1)  # its second seed would be the first test seed


@pytest.mark.parametrize(
    "start, count, hit",
    [(10**9 - 1, 2, "development"), (10**9 - 10, 10, None), (2 * 10**9 + 5, 1, "test"), (0, 3 * 10**9, "and the")],
)
def test_training_seeds_are_refused_where_they_reach_an_evaluation_range(start, count, hit):
    if hit is None:
        assert check_training_seeds(start, count) == range(start, start + count)
    else:
        with pytest.raises(EvaluationSeedError, match=hit):
            check_training_seeds(start, count)


def test_iteration_seeds_stay_apart_from_each_other_and_from_evaluation():
    assert iteration_seeds(3, 512) == range(3 * 10**6, 3 * 10**6 + 512)
    assert iteration_seeds(999, 10**6).stop == 10**9  # the last iteration that fits below the dev range
    with pytest.raises(EvaluationSeedError, match="overlap the development instances"):
        iteration_seeds(1000, 1)
    with pytest.raises(EvaluationSeedError, match="the next iteration would replay them"):
        iteration_seeds(1, 10**6 + 1)


def test_eval_plays_test_instances_and_keeps_heldout_as_the_dev_name(tmp_path):
    test = evaluate(tmp_path / "test", "--instances", "test", "--limit-instances", "2")
    assert test.exit_code == 0, test.output
    assert played_instances(tmp_path / "test") == {"seed-2000000000", "seed-2000000001"}
    for name in ("dev", "heldout"):
        result = evaluate(tmp_path / name, "--instances", name, "--limit-instances", "2", "--seed", "7")
        assert result.exit_code == 0, result.output
        assert played_instances(tmp_path / name) == {"seed-1000000007", "seed-1000000008"}


def test_eval_refuses_dev_instances_that_would_reach_the_test_range(tmp_path):
    result = evaluate(tmp_path, "--instances", "dev", "--limit-instances", "2", "--seed", str(10**9 - 1))
    assert result.exit_code == 2
    assert "--instances dev with --seed 999999999" in result.output and "run past the development" in result.output


def test_eval_help_names_both_splits():
    text = " ".join(CliRunner().invoke(main, ["eval", "--help"]).output.split())
    assert "'dev'" in text and "'test'" in text and "never to choose a setting" in text


def test_games_on_dev_instances_are_played_but_never_converted_to_training_data(tmp_path):
    games = tmp_path / "games.jsonl"
    played = CliRunner().invoke(
        main, ["--backend", "scripted", "--seed", str(10**9 - 2), "-n", "8", "-k", "2", "--out", str(games), "-q"]
    )
    assert played.exit_code == 0, played.output
    assert "note: --seed/--num-games: seeds 999_999_998 to 1_000_000_001 overlap the development" in played.output
    refused = CliRunner().invoke(convert_main, [str(games), "--out-dir", str(tmp_path / "data")])
    assert refused.exit_code != 0
    assert "game seed-1000000000/0: instance.seed 1000000000 is one of the development instances" in refused.output
    assert not (tmp_path / "data" / "train.parquet").exists()


def test_games_on_human_instances_are_never_converted_to_training_data(tmp_path):
    """The instances people played have no seed: convert refuses them by their source."""
    games = tmp_path / "games.jsonl"
    args = ["--backend", "scripted", "--instances", "human", "-n", "2", "-k", "2", "--out", str(games), "-q"]
    played = CliRunner().invoke(main, args)
    assert played.exit_code == 0, played.output
    refused = CliRunner().invoke(convert_main, [str(games), "--out-dir", str(tmp_path / "data")])
    assert refused.exit_code != 0
    assert "game human-000/0: instance.source 'human-000' is one of the instances people played" in refused.output
    assert not (tmp_path / "data" / "train.parquet").exists()


def test_online_training_instances_are_refused_in_the_test_range(tmp_path):
    args = ["--num-train", "2", "--num-test", "0", "--seed", str(2 * 10**9), "--out-dir", str(tmp_path)]
    result = CliRunner().invoke(init_command, args)
    assert result.exit_code == 2 and "overlap the test instances" in result.output
    assert not (tmp_path / "train.parquet").exists()
