"""`selfplay-gen`'s command group: `play` is the default only when no command is named."""

import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main


@pytest.mark.parametrize(
    "args, says",
    [
        (["evl"], "no such command 'evl' (did you mean 'eval'?)"),
        (["nosuch", "--help"], "no such command 'nosuch'; "),
    ],
)
def test_an_unknown_command_is_refused_naming_the_commands(args, says):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert says in result.output
    listed = result.output.split("the commands are ", 1)[1].split(", and without one")[0]
    assert {"eval", "init", "play"} <= set(listed.split(", "))  # other commands may join them
    assert "--num-games" not in result.output  # not play's help or play's error


def test_play_is_the_default_when_the_first_argument_is_an_option(tmp_path):
    out = tmp_path / "g.jsonl"
    result = CliRunner().invoke(main, ["--backend", "scripted", "-n", "2", "-k", "2", "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 2


def test_help_is_the_groups_and_a_named_commands_help_its_own():
    assert "Commands:" in CliRunner().invoke(main, ["--help"]).output
    assert "--num-games" in CliRunner().invoke(main, ["play", "--help"]).output
    assert "--from-games" in CliRunner().invoke(main, ["eval", "--help"]).output


@pytest.mark.parametrize("n, k, ask", [(10, 4, "ask for 8 or 12 games"), (3, 8, "ask for 8 games")])
def test_games_per_instance_must_divide_the_number_of_games(tmp_path, n, k, ask):
    out = tmp_path / "g.jsonl"
    result = CliRunner().invoke(
        main, ["--backend", "scripted", "-n", str(n), "--games-per-instance", str(k), "--out", str(out)]
    )
    assert result.exit_code == 2
    assert f"--num-games {n} is not a multiple of -k/--games-per-instance {k}" in result.output and ask in result.output
    assert not out.exists()


def test_the_default_k_with_fewer_games_is_said_not_refused(tmp_path):
    out = tmp_path / "g.jsonl"
    result = CliRunner().invoke(main, ["--backend", "scripted", "-n", "4", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "note: --num-games 4 is not a multiple of -k/--games-per-instance 8" in result.stderr
    assert len(out.read_text().splitlines()) == 4
