"""bench/analysis/kuhn_kept_strategy.py: the strategy of the seats a selected conversion keeps, read with the
evaluation's reader."""

from pathlib import Path

import bench_modules
import pandas as pd
import pytest
from click.testing import CliRunner

from convert.cli import main as convert_main
from selfplay_gen.cli import main
from selfplay_gen.games.textarena import kuhn_strategy
from selfplay_gen.records import read_games

kept_strategy = bench_modules.load("analysis/kuhn_kept_strategy.py", "kuhn_kept_strategy")


@pytest.fixture(scope="module")
def selected(tmp_path_factory) -> tuple[Path, Path]:
    """Random Kuhn Poker matches, 8 an instance, and the sft rows of each seat's best of them."""
    root = tmp_path_factory.mktemp("kuhn_kept")
    games = root / "games.jsonl"
    play = ["play", "--game", "textarena:KuhnPoker-v0", "--backend", "scripted", "--scripted-policy", "random"]
    result = CliRunner().invoke(main, [*play, "-n", "64", "-k", "8", "-q", "--out", str(games)])
    assert result.exit_code == 0, result.output
    convert = [str(games), "--format", "sft", "--top-fraction", "0.125", "--val-fraction", "0", "--out-dir", str(root)]
    result = CliRunner().invoke(convert_main, convert)
    assert result.exit_code == 0, result.output
    return games, root / "train.parquet"


def test_the_moves_are_the_kept_seats_moves_and_only_theirs(selected):
    games, rows = selected
    kept = {(info["game_id"], int(info["player"])) for info in pd.read_parquet(rows)["extra_info"]}
    records = list(read_games(games))
    assert 0 < len(kept) < 2 * len(records)  # a selection: some seats, not all
    expected = [
        (record["instance_id"], node, aggressive)
        for record in records
        for seat, node, aggressive in kuhn_strategy.decisions(record)
        if (record["game_id"], seat) in kept
    ]
    moves = kept_strategy.kept_moves(str(games), str(rows))
    assert list(moves.itertuples(index=False, name=None)) == expected


def test_the_command_prints_each_information_set_and_the_values(selected):
    games, rows = selected
    result = CliRunner().invoke(kept_strategy.main, [str(games), str(rows), "--resamples", "50"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[2].startswith("| first, J, opening: bet | 0.33 |")
    assert len([line for line in lines if line.startswith("| first") or line.startswith("| second")]) == 12
    assert any(line.startswith("vs equilibrium, first to act (-0.056): ") for line in lines)


def test_rows_of_other_games_are_refused(selected, tmp_path):
    games, rows = selected
    other = tmp_path / "other.jsonl"
    other.write_text("")
    result = CliRunner().invoke(kept_strategy.main, [str(other), str(rows)])
    assert result.exit_code == 1 and "none of its rows is a seat of a game in" in result.output
