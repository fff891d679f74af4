"""Offline GRPO's dynamic sampling (FILTER_GROUPS=N): a stage plays up to N rounds of training games, each on
the instances after the last, while the converted groups (constant ones dropped) are fewer than the games'
groups. The games are real `selfplay-gen play` games and the conversions real `selfplay-convert` runs; the
SGLang server the stage would use is replaced by the scripted negotiator (`scripted_gen`), whose games
never have a sampled seat, so every round converts to no rows. The same games check how a league round
splits its instances between the player's frozen copy (LEAGUE_SELF_PLAY) and the drawn opponents."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from selfplay_gen.iterate import decisions
from selfplay_gen.iterate.config import GRPOSettings, Iteration, ServerSettings, Tools, Trainers, Verl, Warm
from selfplay_gen.iterate.config import League as LeagueSettings
from selfplay_gen.iterate.loop import Run
from selfplay_gen.iterate.shell import StepFailed
from selfplay_gen.iterate.stages import Stage
from selfplay_gen.records import read_games

N, K = 8, 4  # games a round, games an instance: two instances a round


def test_another_round_while_fewer_groups_differ_than_asked_and_rounds_are_left():
    assert decisions.needs_another_round(kept=3, wanted=4, rounds_played=1, max_rounds=2)
    assert not decisions.needs_another_round(kept=4, wanted=4, rounds_played=1, max_rounds=2)
    assert not decisions.needs_another_round(kept=0, wanted=4, rounds_played=2, max_rounds=2)
    assert not decisions.needs_another_round(kept=0, wanted=4, rounds_played=1, max_rounds=1)


def test_the_groups_kept_are_read_from_the_conversion_summary_which_a_bad_file_names(tmp_path):
    summary = tmp_path / "convert_summary.json"
    summary.write_text(json.dumps({"grpo": {"rows": 22, "dropped_constant": 80}}))
    assert decisions.informative_groups(summary) == 22
    summary.write_text(json.dumps({"sft": {}}))
    with pytest.raises(ValueError, match=r"convert_summary.json: no grpo.rows, the number of groups converted"):
        decisions.informative_groups(summary)


def scripted_gen(tmp_path: Path) -> str:
    """`selfplay-gen` with every seat a server would play played by the scripted negotiator: --backend
    sglang and the server's --base-url and --model are replaced, and so is a partner on a server
    (--partner-*); everything else (seeds, counts, --resume, a scripted partner's strength) goes to the
    real command, which every recorded command line still shows. Each command's start and end times are
    appended to tmp_path/times.jsonl."""
    script = tmp_path / "scripted-gen"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys, time\n"
        "started = time.time()\n"
        "from selfplay_gen.cli import main\n"
        "args, words = [], iter(sys.argv[1:])\n"
        "for word in words:\n"
        "    if word in ('--backend', '--base-url', '--model', '--partner-base-url', '--partner-model'):\n"
        "        next(words)\n"
        "        args += ['--backend', 'scripted'] if word == '--backend' else []\n"
        "    elif word == '--partner-backend':\n"
        "        next(words)\n"
        "        args += ['--partner-backend', 'scripted']\n"
        "    else:\n"
        "        args.append(word)\n"
        "try:\n"
        "    main(args, prog_name='selfplay-gen')\n"
        "finally:\n"
        f"    with open({str(tmp_path / 'times.jsonl')!r}, 'a') as log:\n"
        "        log.write(json.dumps([started, time.time()]) + '\\n')\n"
    )
    script.chmod(0o755)
    return str(script)


def rounds_run(
    tmp_path: Path,
    league_size: int,
    filter_groups: int,
    convert: tuple[str, ...] = (sys.executable, "-m", "convert.cli"),
    self_play: float = 0.0,
) -> tuple[Run, Stage]:
    cfg = Iteration(
        run_dir=tmp_path / "run", initial_model="/m0", game="negotiation", num_iterations=1, trainer="grpo",
        trainers=Trainers(grpo=GRPOSettings(games_per_iter=N)), games_per_instance=K, league_size=league_size,
        warm=Warm(policy="none"),
        league=LeagueSettings(scripted=(0.3,), self_play=self_play), servers=ServerSettings(urls=("http://127.0.0.1:9",)),
        verl=Verl(filter_groups=filter_groups),
        tools=Tools(python=sys.executable, gen=(scripted_gen(tmp_path),), convert=convert),
    )  # fmt: skip
    run = Run(cfg)
    base = run.run_dir / "base"
    (base / "eval").mkdir(parents=True)
    (base / "eval" / "DONE").touch()  # evaluated already: the stage only plays
    run.advance("/m0", "base", base)
    stage = Stage("iter_001", "iter_1", run.run_dir / "iter_001", 1_000_000)
    stage.dir.mkdir(parents=True)
    run.stage = stage
    return run, stage


def instances(path: Path) -> list[str]:
    return sorted({record["game_id"].split("/")[0] for record in read_games(path)})


def test_self_play_plays_round_after_round_on_new_instances_until_none_are_left(tmp_path, capsys):
    run, stage = rounds_run(tmp_path, league_size=0, filter_groups=3)
    with pytest.raises(StepFailed, match=r"step 'iteration 1: convert' failed \(exit 3\)"):
        run.play(stage, N, [*run.limits()], rounds=3)
    out = capsys.readouterr().out
    # the same file, more games each round: --resume keeps the earlier rounds' games
    assert [f"--num-games {n}" in out for n in (N, 2 * N, 3 * N)] == [True] * 3
    assert out.count("--max-groups 4") == 3  # every conversion keeps at most the games' groups
    assert "round 1: 0 of 4 groups differ in reward: another round" in out
    assert "round 2: 0 of 4 groups differ in reward: another round" in out
    games = stage.dir / "gen" / "games.jsonl"
    assert len(list(read_games(games))) == 3 * N and len(instances(games)) == 3 * N // K
    steps = [row["step"] for row in json.loads((stage.dir / "timings.json").read_text())["steps"]]
    assert steps == ["generate", "generate, round 2", "generate, round 3"]  # no conversion ended well


def test_a_league_round_draws_opponents_for_the_instances_after_the_last_rounds(tmp_path, capsys):
    run, stage = rounds_run(tmp_path, league_size=2, filter_groups=2)
    assert run.competition is not None
    run.competition.start(1)
    with pytest.raises(StepFailed, match=r"exit 3"):
        run.play(stage, N, [*run.limits()], rounds=2)
    out = capsys.readouterr().out
    assert "round 1: 0 of 2 groups differ in reward: another round" in out  # seat 0's groups only
    assert "--seat 0 --max-groups 2" in out
    gen = stage.dir / "gen"
    first = instances(gen / "vs" / "scripted_0.3" / "games.jsonl")
    second = instances(gen / "round_2" / "vs" / "scripted_0.3" / "games.jsonl")
    assert len(first) == len(second) == N // K and not set(first) & set(second)
    assert len(list(read_games(gen / "games.jsonl"))) == 2 * N  # both rounds, joined for the conversion
    assert (gen / "round_2" / "opponents.json").exists()


def test_one_round_fails_on_a_conversion_with_no_rows_as_before(tmp_path, capsys):
    run, stage = rounds_run(tmp_path, league_size=0, filter_groups=0)
    with pytest.raises(StepFailed, match=r"exit 3"):
        run.play(stage, N, [*run.limits()])
    assert "--max-groups" not in capsys.readouterr().out
    assert len(list(read_games(stage.dir / "gen" / "games.jsonl"))) == N


def test_rounds_stop_once_enough_groups_differ(tmp_path, monkeypatch, capsys):
    """The count of groups kept (the conversion's grpo.rows) decides; here it is given, since the scripted
    games convert to none."""
    run, stage = rounds_run(tmp_path, league_size=0, filter_groups=4, convert=("true",))
    kept = iter([1, 5])
    monkeypatch.setattr(decisions, "informative_groups", lambda summary: next(kept))
    run.play(stage, N, [], rounds=4)
    out = capsys.readouterr().out
    assert "round 1: 1 of 4 groups differ in reward: another round" in out
    assert "round 2: 5 of 4 groups differ in reward: enough" in out and "round 3" not in out
    assert len(list(read_games(stage.dir / "gen" / "games.jsonl"))) == 2 * N


def test_a_dry_run_shows_the_rounds_it_may_play(tmp_path):
    from click.testing import CliRunner

    from selfplay_gen.iterate.cli import iterate_command

    args = ["--dry-run", "--initial_model", "/m0", "--run_dir", str(tmp_path / "run"), "--tools.gen", "gen"]
    args += ["--tools.convert", "conv", "--verl.python", sys.executable, "--trainer", "grpo"]
    args += ["--num_iterations", "1", "--trainers.grpo.games_per_iter", "64", "--verl.filter_groups", "3"]
    result = CliRunner().invoke(iterate_command, args)
    assert result.exit_code == 0, result.output
    assert "iteration 1: up to 2 more rounds of games while fewer than 16 groups differ in reward" in result.output


def test_a_league_with_a_self_play_share_puts_the_players_own_server_in_seat_1_for_those_instances(tmp_path, capsys):
    run, stage = rounds_run(tmp_path, league_size=2, filter_groups=0, self_play=0.5)
    assert run.competition is not None
    run.competition.start(1)
    with pytest.raises(StepFailed, match=r"exit 3"):
        run.play(stage, N, [*run.limits()])
    out = capsys.readouterr().out
    assert "plays, 50% against itself, the rest by rating: itself (frozen) 4, scripted@0.3 4 games" in out
    (own,) = [line for line in out.splitlines() if "--out " in line and "gen/vs/base/" in line]
    assert own.endswith("--partner-backend sglang --partner-base-url http://127.0.0.1:9 --partner-model /m0")
    gen = stage.dir / "gen"
    mine, drawn = instances(gen / "vs" / "base" / "games.jsonl"), instances(gen / "vs" / "scripted_0.3" / "games.jsonl")
    assert len(mine) == len(drawn) == 1 and mine != drawn  # one group each, on different instances
    assert json.loads((gen / "opponents.json").read_text())["self_play"] == 0.5
    wins = run.competition.league.wins
    assert "base" not in wins.get("base", {})  # games against itself rate no one
    assert sum(wins["base"].values()) + sum(wins["scripted@0.3"].values()) == K  # the drawn group's games


def test_the_frozen_copy_and_scripted_opponents_play_at_once(tmp_path):
    """Opponents that need no partner server play together, in one timed step, not one batch after another."""
    run, stage = rounds_run(tmp_path, league_size=2, filter_groups=0, self_play=0.5)
    assert run.competition is not None
    run.competition.start(1)
    with pytest.raises(StepFailed, match=r"exit 3"):
        run.play(stage, N, [*run.limits()])
    spans = [json.loads(line) for line in (tmp_path / "times.jsonl").read_text().splitlines()]
    assert len(spans) == 2 and max(start for start, _ in spans) < min(end for _, end in spans)  # they overlap
    steps = [row["step"] for row in json.loads((stage.dir / "timings.json").read_text())["steps"]]
    assert steps == ["generate vs base, scripted@0.3"]


def test_each_checkpoint_after_the_first_takes_the_partner_slot_alone(tmp_path):
    from selfplay_gen.league.pool import League, Member

    run, _ = rounds_run(tmp_path, league_size=3, filter_groups=0)
    assert run.competition is not None
    scripted = Member("scripted@0.3", "scripted", strength=0.3)
    members = [Member("warm", path="/w"), Member("iter_1", path="/i1"), scripted]
    run.competition.league = League(tuple(members), {})
    waves = run.competition.waves(["warm", "iter_2", "scripted@0.3", "iter_1"], player="iter_2")
    assert waves == [["warm", "iter_2", "scripted@0.3"], ["iter_1"]]
    assert run.competition.waves(["iter_2", "scripted@0.3"], player="iter_2") == [["iter_2", "scripted@0.3"]]
