"""The league inside `selfplay-gen iterate`: opponents drawn by rating per instance, grouped by
opponent; the promotion rule deciding on real cross-play games and a resumed run following the
decision; competitive DPO pairs (a win against a loss of the trained seat); the time budget; the
skill levels' command lines; the progress report."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main
from selfplay_gen.iterate import competition, decisions
from selfplay_gen.iterate.config import Evaluation, Iteration, ServerSettings, Tools, Warm
from selfplay_gen.iterate.config import League as LeagueSettings
from selfplay_gen.iterate.loop import Run
from selfplay_gen.league import League, Member

# --- opponents -------------------------------------------------------------------------------------


def test_candidates_are_the_last_promoted_checkpoints_but_the_player_then_the_scripted():
    checkpoints = ["warm", "iter_1", "iter_3"]
    scripted = ["scripted@0.3", "scripted@1"]
    assert decisions.league_candidates(checkpoints, scripted, "iter_3", 2) == ["warm", "iter_1", *scripted]
    assert decisions.league_candidates(checkpoints, scripted, "iter_3", 1) == ["iter_1", *scripted]
    assert decisions.league_candidates(["warm"], [], "warm", 2) == []  # nothing to meet yet
    assert decisions.league_candidates(checkpoints, scripted, "iter_3", 0) == scripted


def test_each_instance_gets_one_opponent_drawn_by_rating_closeness():
    ratings = {"iter_2": 0.0, "near": 20.0, "far": 1200.0, "unrated": None}
    batches = decisions.league_batches(ratings, "iter_2", ["near", "far", "unrated"], 4000, 8, seed=3)
    games = dict(batches)
    assert [name for name, _ in batches] == [n for n in ("near", "far", "unrated") if n in games]  # pool order
    assert sum(games.values()) == 4000 and all(n % 8 == 0 for n in games.values())  # whole groups
    assert games["near"] > 10 * games.get("far", 0) and games.get("far", 0) > 0  # rarely, never never
    assert abs(games["near"] - games["unrated"]) < 0.2 * games["near"]  # unrated counts as an equal
    assert decisions.league_batches(ratings, "iter_2", ["near", "far", "unrated"], 4000, 8, seed=3) == batches
    assert decisions.league_batches(ratings, "iter_2", ["near", "far"], 20, 8, seed=3)[0][1] % 8 == 0  # 3 groups
    assert sum(n for _, n in decisions.league_batches(ratings, "iter_2", ["near", "far"], 20, 8, seed=3)) == 24
    with pytest.raises(ValueError, match="not in the league's ratings"):
        decisions.league_batches(ratings, "iter_2", ["ghost"], 8, 8, seed=0)


def test_a_self_play_share_gives_the_first_instances_to_a_frozen_copy_of_the_player():
    ratings = {"iter_2": 0.0, "near": 20.0, "far": 1200.0}
    batches = decisions.league_batches(ratings, "iter_2", ["near", "far"], 512, 8, seed=3, self_play=0.35)
    assert batches[0] == ("iter_2", 22 * 8)  # round(0.35 * 64) groups, first
    assert sum(n for _, n in batches) == 512 and all(name != "iter_2" for name, _ in batches[1:])
    # the drawn rest is the draw of the remaining groups alone
    rest = decisions.league_batches(ratings, "iter_2", ["near", "far"], 42 * 8, 8, seed=3)
    assert batches[1:] == rest
    assert decisions.league_batches(ratings, "iter_2", ["near", "far"], 512, 8, seed=3, self_play=1) == [
        ("iter_2", 512)
    ]
    assert decisions.league_batches(ratings, "iter_2", [], 20, 8, seed=3, self_play=0.35) == [("iter_2", 24)]
    assert decisions.league_batches(ratings, "iter_2", ["near"], 512, 8, seed=3, self_play=0) == [("near", 512)]
    with pytest.raises(ValueError, match=r"self-play share must be in \[0, 1\], got 1.5"):
        decisions.league_batches(ratings, "iter_2", ["near"], 8, 8, seed=0, self_play=1.5)


def test_the_time_budget_starts_an_iteration_only_if_one_like_the_last_fits_and_names_a_bad_row(tmp_path):
    assert decisions.within_budget(tmp_path, None) and decisions.within_budget(tmp_path, 1.0)
    for name, seconds in (("base", "30"), ("warm", "600"), ("iter_001", "30"), ("iter_002", "60")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary_row.json").write_text(json.dumps({"row": [name, "8", "", "", seconds]}))
    assert decisions.iteration_minutes(tmp_path) == pytest.approx([0.5, 1.0])
    assert [stage.name for stage, _ in decisions.finished_iterations(tmp_path)] == ["iter_001", "iter_002"]
    # another iteration as long as the last (1 min) must end within the budget
    assert decisions.within_budget(tmp_path, 2.5) and not decisions.within_budget(tmp_path, 2.4)
    (tmp_path / "iter_003").mkdir()
    (tmp_path / "iter_003" / "summary_row.json").write_text(json.dumps({"row": ["iter_3", "8", "", "", "long"]}))
    with pytest.raises(ValueError, match=r"iter_003/summary_row.json: field row\[4\] \(wall time\)"):
        decisions.iteration_minutes(tmp_path)


# --- command lines ---------------------------------------------------------------------------------


def dry_iterate(tmp_path, *args):
    from selfplay_gen.iterate.cli import iterate_command

    common = ["--dry-run", "--initial_model", "/m0", "--run_dir", str(tmp_path / "run"), "--tools.gen", "gen"]
    common += ["--tools.convert", "conv", "--verl.python", sys.executable, "--game", "negotiation"]
    result = CliRunner().invoke(iterate_command, [*common, *args])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def test_a_dpo_league_plays_each_drawn_opponent_in_turn_and_pairs_wins_with_losses(tmp_path):
    run = tmp_path / "run"
    lines = dry_iterate(
        tmp_path, "--trainer", "dpo", "--league_size", "2", "--num_iterations", "2", "--trainers.dpo.games_per_iter",
        "64", "--warm.policy", "teacher", "--league.scripted", "0.3,1", "--trainers.dpo.pairs_per_group", "8",
    )  # fmt: skip
    # iteration 1: the pool is the scripted negotiators (warm is the player), unrated: drawn as equals
    expected = decisions.league_batches(
        {"warm": None, "scripted@0.3": None, "scripted@1": None}, "warm", ["scripted@0.3", "scripted@1"], 64, 8,
        seed=1_000_000,
    )  # fmt: skip
    drawn = ", ".join(f"{name} {games}" for name, games in expected)
    assert f"iteration 1: seat 0 (warm, trained) plays, by rating: {drawn} games" in lines
    plays = [line for line in lines if f"{run}/iter_001/gen/vs/" in line and line.startswith("+ gen ")]
    assert len(plays) == len(expected)
    seeds = [int(re.search(r"--seed (\d+)", line)[1]) for line in plays]
    assert seeds[0] == 1_000_000 and all(b - a == n // 8 for a, b, (_, n) in zip(seeds, seeds[1:], expected))
    for line, (name, games) in zip(plays, expected):
        strength = name.split("@")[1]
        assert f"--num-games {games} --games-per-instance 8" in line
        assert line.endswith(f"--partner-backend scripted --partner-scripted-strength {strength}")
    (convert,) = [line for line in lines if line.startswith(f"+ conv {run}/iter_001/gen/games.jsonl")]
    assert "--format dpo --dpo-pairs reward --dpo-pairs-per-group 8" in convert and convert.endswith("--seat 0")
    # DPO_PAIRS=outcome ranks a league's games as the rules judge them (a win above a tie above a loss)
    by_outcome = dry_iterate(
        tmp_path, "--trainer", "dpo", "--league_size", "2", "--num_iterations", "1", "--trainers.dpo.games_per_iter",
        "64", "--warm.policy", "teacher", "--trainers.dpo.pairs", "outcome", "--league.cooperation", "false",
        "--league.joint_margin", "0.03", "--league.min_agreement", "0.97",
    )  # fmt: skip
    (convert,) = [line for line in by_outcome if line.startswith(f"+ conv {run}/iter_001/gen/games.jsonl")]
    assert "--format dpo --dpo-pairs outcome --dpo-pairs-per-group 1" in convert and convert.endswith("--seat 0")
    # promotion asks for kept cooperation unless told otherwise
    assert any(line.startswith("promotion: iter_1 replaces warm only if it wins") for line in by_outcome)
    assert not any("keeps its cooperation" in line for line in by_outcome)
    # ... and bounds what it may give up of the deal where the run sets them
    bounded = "above 50%, its self-play joint share at most 3.0 points below, deals in 97% of its self-play games"
    assert any(bounded in line for line in by_outcome) and not any("joint share at most" in line for line in lines)
    assert any("above 50% and keeps its cooperation" in line for line in lines)
    # the candidate is evaluated and cross-played against warm before iteration 2 starts from it
    promotion = lines.index(next(line for line in lines if line.startswith("promotion: iter_1 replaces warm")))
    crossplay = next(k for k, line in enumerate(lines) if "--label iter_1 --partner-label warm" in line)
    assert crossplay < promotion < lines.index(next(line for line in lines if "iteration 2 of 2" in line))
    # iteration 2: warm, now a checkpoint opponent, gets the partner server while drawn
    second = [line for line in lines if line.startswith("+ gen ") and f"{run}/iter_002/gen/vs/" in line]
    assert all(f"--model {run}/iter_001/train/hf" in line for line in second)
    if any("/vs/warm/" in line for line in second):
        assert any(f"--model-path {run}/warm/train/hf --host 127.0.0.1 --port 30001" in line for line in lines)
    # the end: every checkpoint also against the scripted negotiator at strength 1, and a report
    assert any("--label iter_2 --partner-label scripted@1" in line for line in lines)
    report, _test_split = [line for line in lines if line.startswith("+ gen eval") and "--from-games" in line]
    assert f"scripted@1={run}/crossplay/draw_2/warm__scripted@1/eval/games/scripted_1__scripted_1.jsonl" in report


def test_grpo_takes_a_per_seat_baseline_and_the_time_budget_stops_new_iterations(tmp_path):
    per_seat = ["--trainer", "grpo", "--league_size", "1", "--num_iterations", "1", "--league.baseline", "per-seat"]
    lines = dry_iterate(tmp_path, *per_seat, "--loss.adv_estimator", "reinforce_plus_plus_baseline")
    (convert,) = [line for line in lines if line.startswith("+ conv ") and "/iter_001/" in line]
    assert "--baseline per-seat" in convert and convert.endswith("--seat 0")
    (train,) = [line for line in lines if "-m verl.trainer.main_ppo" in line]
    assert "algorithm.adv_estimator=reinforce_plus_plus_baseline" in train
    from selfplay_gen.iterate.cli import iterate_command

    cancelled = CliRunner().invoke(iterate_command, ["--dry-run", *per_seat])  # grpo's group centering
    assert cancelled.exit_code == 2 and "league.baseline=per-seat" in cancelled.output
    assert "loss.adv_estimator" in cancelled.output
    run = tmp_path / "run"
    for stage in ("base", "iter_001"):
        (run / stage).mkdir(parents=True)
        (run / stage / "summary_row.json").write_text(json.dumps({"row": [stage, "", "", "", "600"]}))
        (run / stage / "DONE").touch()
    stopped = dry_iterate(tmp_path, "--num_iterations", "3", "--time_budget_min", "5", "--warm.policy", "none")
    assert (
        "time budget of 5 min: 10.0 min spent, and an iteration as long as the last (10.0 min) would end past it: "
        "no iteration from 2 on"
    ) in stopped
    assert not any("=== iteration" in line for line in stopped)


def test_skill_levels_teach_each_level_and_measure_the_highest_against_the_lowest(tmp_path):
    run = tmp_path / "run"
    lines = dry_iterate(
        tmp_path, "--league.skill_levels", "novice,expert", "--warm.policy", "teacher", "--warm.games", "100",
        "--num_iterations", "1", "--league_size", "1", "--league.scripted", "1", "--league.skill_data",
        "scripted-strength",
    )  # fmt: skip
    teacher = [line for line in lines if "--backend scripted" in line and "/warm/gen/levels/" in line]
    assert len(teacher) == 2
    assert "--scripted-strength 0.3 --skill novice --seed 500000000 --num-games 50" in teacher[0]
    assert "--scripted-strength 1 --skill expert --seed 500000050 --num-games 50" in teacher[1]
    assert f"+ cat {run}/warm/gen/levels/novice/games.jsonl {run}/warm/gen/levels/expert/games.jsonl" in "\n".join(
        lines
    )
    (play,) = [line for line in lines if "/iter_001/gen/vs/" in line and line.startswith("+ gen ")]
    assert "--skill expert\\," in play  # the trained seat at the highest level (as bash quotes it)
    matches = [line for line in lines if "/eval/skill/" in line]
    assert any(
        f"{run}/warm/eval/skill/expert__novice/games.jsonl" in m and "--skill expert\\,novice" in m for m in matches
    )
    assert any("--skill novice\\,expert" in m for m in matches)
    from selfplay_gen.iterate.cli import iterate_command

    for bad in ("expert,novice", "novice,master", "expert"):
        result = CliRunner().invoke(
            iterate_command, ["--dry-run", "--game", "negotiation", "--league.skill_levels", bad]
        )
        assert result.exit_code == 2 and "league.skill_levels" in result.output and bad in result.output, bad
    result = CliRunner().invoke(
        iterate_command, ["--dry-run", "--game", "matching", "--league.skill_levels", "novice,expert"]
    )
    assert result.exit_code == 2 and "the matching game takes no skill levels" in result.output


def test_the_scale_is_judged_from_the_games_each_pairing_played(tmp_path):
    """`judge_scale` on games the scripted negotiators played in its pairings' places (at 0.3 for the novice,
    1 for the expert, against the full-strength one in both seat orders): each level's win share against
    the partner, and the step from novice to expert paired over the instances."""
    from selfplay_gen.iterate.server import Started

    cfg = Iteration(
        run_dir=tmp_path / "run", initial_model="/m0", game="negotiation", num_iterations=0, league_size=1,
        league=LeagueSettings(skill_levels=("novice", "expert")), servers=ServerSettings(urls=("http://127.0.0.1:9",)),
        tools=Tools(python=sys.executable, gen=("true",)),
    )  # fmt: skip
    run = Run(cfg)
    assert run.competition is not None
    out = tmp_path / "judged"
    strength = {"novice": 0.3, "expert": 1.0, "scripted@1": 1.0}
    pairings = [("novice", "scripted@1"), ("scripted@1", "novice"), ("expert", "scripted@1"), ("scripted@1", "expert")]
    for a, b in pairings:
        path = out / "skill" / f"{competition.safe_name(a)}__{competition.safe_name(b)}" / "games.jsonl"
        args = ["play", "--backend", "scripted", "--game", "negotiation", "--scripted-strength", str(strength[a])]
        args += ["--partner-scripted-strength", str(strength[b]), "--seed", "2000000000", "-n", "16", "-k", "1"]
        result = CliRunner().invoke(main, [*args, "--out", str(path), "-q"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
    run.competition.judge_scale(Started("http://127.0.0.1:9", "/m1", 0.0), "/m1", out, 2_000_000_000, 16, 1, pairings)
    scale = json.loads((out / "skill_levels.json").read_text())
    assert set(scale["levels"]) == {"novice", "expert"} and scale["levels"]["expert"]["scripted@1"]["games"] == 32
    (step,) = scale["steps"]
    assert (step["lower"], step["higher"], step["against"]) == ("novice", "expert", "scripted@1")
    assert step["win"]["instances"] == 16 and step["win"]["mean"] > 0 and step["points"]["ci"][0] > 0
    table = (out / "skill_levels.md").read_text()
    assert "| novice | scripted@1 | 32 |" in table and "| scripted@1 | novice → expert | 16 |" in table


# --- promotion on real games -----------------------------------------------------------------------


def crossplay(out: Path, strong: float, weak: float, labels: tuple[str, str], instances: int = 24) -> Path:
    """`selfplay-gen eval` of the scripted negotiator at `strong` (seat label labels[0]) against it at
    `weak` (labels[1]), both seat orders and self-plays, as the promotion's cross-play writes it."""
    args = ["eval", "--game", "negotiation", "--backend", "scripted", "--scripted-strength", f"{strong:g}"]
    args += ["--partner-backend", "scripted", "--partner-scripted-strength", f"{weak:g}", "--instances", "heldout"]
    args += ["--num-instances", str(instances), "-k", "2", "--label", labels[0], "--partner-label", labels[1]]
    result = CliRunner().invoke(main, [*args, "--out", str(out), "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


def test_dpo_pairs_rank_by_reward_in_a_league_too_unless_outcome_is_named(tmp_path):
    from click.testing import CliRunner

    from selfplay_gen.iterate.cli import iterate_command

    assert Iteration().trainers.dpo.pairs == "reward" and Iteration(league_size=2).trainers.dpo.pairs == "reward"
    result = CliRunner().invoke(iterate_command, ["--dry-run", "--trainers.dpo.pairs", "margin"])
    assert result.exit_code == 2 and "'margin' is not one of 'reward', 'outcome'" in result.output
    with pytest.raises(ValueError, match=r"learner must be one of promoted, latest, not 'newest'"):
        LeagueSettings(learner="newest")
    with pytest.raises(ValueError, match=r"self-play seats must be one of seat0, both, not 'seat1'"):
        LeagueSettings(self_play_seats="seat1")


def league_run(tmp_path: Path, num_iterations: int = 1, **league) -> Run:
    """A run against a given server, whose commands (`false`) must never be needed: every step it
    takes finds its outputs."""
    cfg = Iteration(
        run_dir=tmp_path / "run", initial_model="/m0", game="negotiation", num_iterations=num_iterations,
        league_size=2, warm=Warm(policy="none"), league=LeagueSettings(scripted=(0.3,), **league),
        servers=ServerSettings(urls=("http://127.0.0.1:9",)), tools=Tools(python=sys.executable, gen=("false",)),
    )  # fmt: skip
    return Run(cfg)


def judged(run: Run, strengths: tuple[float, float], agreement: float | None = None) -> tuple:
    """The Competition of `run` after it judged iter_1 (played by the scripted negotiator of the first
    strength) against base (the second) from their cross-play; `agreement` replaces iter_1's self-play
    agreement rate there. Returns it, what `decide` said, and the decision written."""
    run.advance("/m0", "base", run.run_dir / "base")
    pair = run.run_dir / "crossplay" / "iter_1__base"
    crossplay(pair / "eval", *strengths, ("iter_1", "base"))
    if agreement is not None:
        metrics = json.loads((pair / "eval" / "metrics.json").read_text())
        metrics["models"]["iter_1"]["agreement_rate"]["mean"] = agreement
        (pair / "eval" / "metrics.json").write_text(json.dumps(metrics))
    (pair / "DONE").touch()
    stage_dir = run.run_dir / "iter_001"
    (stage_dir / "eval").mkdir(parents=True)
    (stage_dir / "eval" / "DONE").touch()  # evaluated already
    from selfplay_gen.iterate.stages import Stage

    stage = Stage("iter_001", "iter_1", stage_dir, 1_000_000)
    comp = competition.Competition(run)
    comp.start(1)
    assert comp.league.names == ["base", "scripted@0.3"]
    promoted = comp.decide(stage, str(stage_dir / "train" / "hf"))
    return comp, promoted, json.loads((stage_dir / competition.PROMOTION_FILE).read_text())


@pytest.mark.parametrize("strong_candidate", [True, False])
def test_the_candidate_is_kept_only_when_it_beats_the_previous_checkpoint(tmp_path, strong_candidate):
    strengths = (1.0, 0.2) if strong_candidate else (0.2, 1.0)
    comp, promoted, decision = judged(league_run(tmp_path), strengths)
    assert promoted is strong_candidate and decision["promoted"] is strong_candidate
    assert decision["ci"][0] > 0.5 if strong_candidate else decision["ci"][0] <= 0.5
    assert decision["reason"].startswith("promoted iter_1" if strong_candidate else "kept base")
    if strong_candidate:  # the pool's newest, rated by its promotion games
        ratings = comp.league.ratings()
        assert comp.league.names[-1] == "iter_1" and ratings["iter_1"] > ratings["base"]
    else:
        assert comp.league.names == ["base", "scripted@0.3"]


def test_a_winner_below_the_runs_agreement_bound_is_kept_out(tmp_path):
    comp, promoted, decision = judged(league_run(tmp_path, min_agreement=0.97), (1.0, 0.2), agreement=0.9)
    assert not promoted and not decision["promoted"] and decision["ci"][0] > 0.5
    assert "reaches a deal in 90.0% of its games, below the run's 97.0%" in decision["reason"]
    assert comp.league.names == ["base", "scripted@0.3"]


@pytest.mark.parametrize("seats", ["seat0", "both"])
def test_games_against_the_frozen_copy_train_both_seats_only_when_asked(tmp_path, seats):
    lines = dry_iterate(
        tmp_path, "--trainer", "grpo", "--league_size", "2", "--num_iterations", "1", "--warm.policy", "none",
        "--league.self_play", "0.35", "--league.self_play_seats", seats,
    )  # fmt: skip
    (convert,) = [line for line in lines if line.startswith("+ conv ") and "/iter_001/gen/" in line]
    # every seat the player's weights played (seat 1 of its frozen copy's games too), or seat 0 alone
    assert convert.endswith("--seats-of /m0" if seats == "both" else "--seat 0")


def test_a_learner_kept_out_before_is_judged_against_the_checkpoint_kept(tmp_path):
    from selfplay_gen.iterate.stages import Checkpoint, Stage

    run = league_run(tmp_path, num_iterations=2)
    run.advance("/m0", "base", run.run_dir / "base")
    run.learn(Checkpoint("/m1", "iter_1", run.run_dir / "iter_001"))  # trains on, not promoted
    pair = run.run_dir / "crossplay" / "iter_2__base"
    crossplay(pair / "eval", 1.0, 0.2, ("iter_2", "base"))
    (pair / "DONE").touch()
    stage_dir = run.run_dir / "iter_002"
    (stage_dir / "eval").mkdir(parents=True)
    (stage_dir / "eval" / "DONE").touch()
    comp = competition.Competition(run)
    comp.start(2)
    assert comp.league.names == ["base", "scripted@0.3"]  # the learner joins the pool only when promoted
    assert comp.candidates(run.label) == ["base", "scripted@0.3"]
    assert comp.decide(Stage("iter_002", "iter_2", stage_dir, 2_000_000), str(stage_dir / "train" / "hf"))
    decision = json.loads((stage_dir / competition.PROMOTION_FILE).read_text())
    assert decision["previous"] == "base" and decision["reason"].startswith("promoted iter_2: it wins")
    assert comp.league.names == ["base", "scripted@0.3", "iter_2"]


@pytest.mark.parametrize("past_learners", [False, True])
def test_past_learners_join_the_pool_promoted_or_not_and_are_rated_by_the_players_games(tmp_path, past_learners):
    from selfplay_gen.iterate.stages import Checkpoint

    run = league_run(tmp_path, num_iterations=3)
    run.cfg = replace(run.cfg, league=replace(run.cfg.league, past_learners=past_learners))
    run.advance("/m0", "base", run.run_dir / "base")
    for stage in ("iter_001", "iter_002"):  # finished, neither promoted: the learner went on from each
        (run.run_dir / stage).mkdir(parents=True)
        (run.run_dir / stage / "DONE").touch()
    League.of([Member("base", path="/m0"), *competition.scripted_pool(run.game_cls, (0.3,))]).save(
        run.run_dir / "iter_002" / competition.LEAGUE_FILE
    )
    run.learn(Checkpoint(f"{run.run_dir}/iter_002/train/hf", "iter_2", run.run_dir / "iter_002"))
    # from the command line: without promotion iter_1 is the learner's past, never a promoted opponent
    lines = dry_iterate(
        tmp_path / "dry", "--trainer", "grpo", "--league_size", "2", "--num_iterations", "3", "--warm.policy", "none",
        "--league.promotion", "off", "--league.past_learners", "true" if past_learners else "false",
    )  # fmt: skip
    drawn = next(line for line in lines if line.startswith("iteration 3: seat 0 (iter_2, trained) plays"))
    assert (" iter_1 " in drawn) is past_learners
    comp = competition.Competition(run)
    comp.start(3)
    if not past_learners:
        assert comp.league.names == ["base", "scripted@0.3"] and comp.candidates("iter_2") == ["base", "scripted@0.3"]
        return
    assert comp.league.names == ["base", "scripted@0.3", "iter_1", "iter_2"]
    assert comp.league.member("iter_1").path == f"{run.run_dir}/iter_001/train/hf"
    assert comp.candidates("iter_2") == ["base", "iter_1", "scripted@0.3"]  # the player itself is no opponent
    # the player is a member now, so its games rate it and the past learner it met
    games = tmp_path / "games.jsonl"
    args = ["play", "--game", "negotiation", "--backend", "scripted", "--scripted-strength", "1", "-q"]
    args += ["--partner-scripted-strength", "0.3", "-n", "16", "-k", "4", "--out", str(games)]
    assert CliRunner().invoke(main, args, catch_exceptions=False).exit_code == 0
    ratings = comp.league.record_file(games, ("iter_2", "iter_1")).ratings()
    assert ratings["iter_2"] is not None and ratings["iter_2"] > ratings["iter_1"]


@pytest.mark.parametrize("learner", ["promoted", "latest"])
def test_a_resumed_run_follows_each_finished_iterations_decision(tmp_path, learner):
    run_dir = tmp_path / "run"
    for name, promoted in (("iter_001", True), ("iter_002", False)):
        (run_dir / name).mkdir(parents=True)
        (run_dir / name / "DONE").touch()
        (run_dir / name / competition.PROMOTION_FILE).write_text(json.dumps({"promoted": promoted}))
    (run_dir / "base" / "eval").mkdir(parents=True)
    for stage in ("iter_001", "iter_002"):
        (run_dir / stage / "eval").mkdir()
        (run_dir / stage / "eval" / "DONE").touch()
    for done in ("base/DONE", "base/eval/DONE"):
        (run_dir / done).touch()
    League.of([Member("base", path="/m0"), Member("iter_1", path=f"{run_dir}/iter_001/train/hf")]).save(
        run_dir / "iter_002" / competition.LEAGUE_FILE
    )
    lines = dry_iterate(
        tmp_path, "--trainer", "grpo", "--league_size", "2", "--num_iterations", "3", "--warm.policy", "none",
        "--league.learner", learner,
    )  # fmt: skip
    drawn = next(line for line in lines if line.startswith("iteration 3: seat 0"))
    (train,) = [line for line in lines if "/iter_003/" in line and "-m verl.trainer.main_ppo" in line]
    judged = next(line for line in lines if line.startswith("promotion: iter_3 replaces"))
    if learner == "promoted":
        assert "iteration 3 starts again from iter_1 (" + f"{run_dir}/iter_001/train/hf)" in lines
        # the league iter_002 left (base and iter_1 only), not a new one with the scripted negotiators
        assert drawn == "iteration 3: seat 0 (iter_1, trained) plays, by rating: base 1024 games"
        assert f"actor_rollout_ref.model.path={run_dir}/iter_001/train/hf" in train
    else:  # iter_2 trains on and meets iter_1, the checkpoint it has to beat, which stays the one kept
        assert (
            "iteration 3 trains on from iter_2, which was not promoted; the pool and the run's output keep iter_1 "
            f"({run_dir}/iter_001/train/hf)"
        ) in lines
        assert drawn.startswith("iteration 3: seat 0 (iter_2, trained) plays, by rating: ") and "iter_1 " in drawn
        assert f"actor_rollout_ref.model.path={run_dir}/iter_002/train/hf" in train
    assert judged.startswith("promotion: iter_3 replaces iter_1 only if")
    # a run whose last iteration was kept out ends with the checkpoint kept, whatever trained last
    lines = dry_iterate(
        tmp_path, "--trainer", "grpo", "--league_size", "2", "--num_iterations", "2", "--warm.policy", "none",
        "--league.learner", learner,
    )  # fmt: skip
    assert not any(line.startswith("iteration 3 ") for line in lines)
    assert lines[-1] == f"final model: {run_dir}/iter_001/train/hf"
    (run_dir / "iter_002" / competition.PROMOTION_FILE).write_text("{}")
    with pytest.raises(ValueError, match=r"iter_002/promotion.json: not a promotion decision"):
        competition.read_promotion(run_dir / "iter_002")


def test_the_partner_server_of_the_training_games_serves_the_promotion_match_after_training(tmp_path):
    """The league games' partner server releases its memory for training like the player's and takes it back
    for the promotion match, with the weights of the checkpoint the match meets: no second start."""
    run_dir = tmp_path / "run"
    for done in ("base/DONE", "base/eval/DONE", "iter_001/DONE", "iter_001/eval/DONE"):
        (run_dir / done).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / done).touch()
    (run_dir / "iter_001" / competition.PROMOTION_FILE).write_text(json.dumps({"promoted": True}))
    iter_1 = f"{run_dir}/iter_001/train/hf"
    league = League.of([Member("base", path="/m0"), Member("iter_1", path=iter_1)])
    league.save(run_dir / "iter_001" / competition.LEAGUE_FILE)
    lines = dry_iterate(
        tmp_path, "--trainer", "grpo", "--league_size", "2", "--num_iterations", "2", "--warm.policy", "none",
        "--crossplay", "false",
    )  # fmt: skip
    partner = [line for line in lines if "30001" in line and not line.startswith("+ gen")]
    assert partner == [
        partner[0],  # base, the opponent iteration 2's games drew
        "+ wait for http://127.0.0.1:30001/health (up to 900s)",
        "+ POST http://127.0.0.1:30001/release_memory_occupation",  # verl trains
        "+ POST http://127.0.0.1:30001/resume_memory_occupation",
        f"+ POST http://127.0.0.1:30001/update_weights_from_disk model_path={iter_1}",  # the match meets iter_1
    ]
    assert "-m sglang.launch_server --model-path /m0 --host 127.0.0.1 --port 30001" in partner[0]


def test_a_run_stopped_after_an_iterations_training_resumes_at_its_promotion(tmp_path, capsys):
    """A league run stopped after iteration 1 trained and evaluated: a new run (whose commands, `false`,
    must never be needed) neither plays nor trains, rebuilds the league from the iteration's training
    games and judges the trained model by its promotion match."""
    from selfplay_gen.iterate.loop import TRAINED_FILE
    from selfplay_gen.iterate.stages import Export, Stage

    run_dir = tmp_path / "run"
    for done in ("base/DONE", "base/eval/DONE", "base/eval/DONE_TEST", "iter_001/eval/DONE"):
        (run_dir / done).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / done).touch()
    stage = Stage("iter_001", "iter_1", run_dir / "iter_001", 1_000_000)
    games = stage.dir / "gen" / "vs" / "scripted_0.3" / "games.jsonl"
    args = ["play", "--game", "negotiation", "--backend", "scripted", "--scripted-strength", "1", "-q"]
    args += ["--partner-scripted-strength", "0.3", "-n", "16", "-k", "4", "--out", str(games)]
    assert CliRunner().invoke(main, args, catch_exceptions=False).exit_code == 0
    chosen = {"player": "base", "games": {"scripted@0.3": 16}}
    (stage.dir / "gen" / competition.OPPONENTS_FILE).write_text(json.dumps(chosen))
    model = stage.dir / "train" / "hf"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"")
    crossplay(run_dir / "crossplay" / "iter_1__base" / "eval", 1.0, 0.2, ("iter_1", "base"))
    (run_dir / "crossplay" / "iter_1__base" / "DONE").touch()
    (stage.dir / "eval" / "DONE_TEST").touch()
    cfg = Iteration(
        run_dir=run_dir, initial_model="/m0", game="negotiation", num_iterations=1, trainer="grpo", league_size=2,
        warm=Warm(policy="none"), league=LeagueSettings(scripted=(0.3,)), crossplay=False,
        servers=ServerSettings(urls=("http://127.0.0.1:9",)), tools=Tools(python=sys.executable, gen=("false",)),
    )  # fmt: skip
    run = Run(cfg)
    run.advance("/m0", "base", run_dir / "base")
    run.save_trained(stage, [Export("iter_1", str(model), stage.dir / "eval")])
    assert run.main() == str(model)
    out = capsys.readouterr().out
    assert f"iteration 1: trained already ({stage.dir / TRAINED_FILE}): on to its evaluation" in out
    assert "promotion: promoted iter_1" in out and "main_ppo" not in out
    league = League.load(stage.dir / competition.LEAGUE_FILE)
    expected = League.of([Member("base", path="/m0"), *competition.scripted_pool(run.game_cls, (0.3,))])
    expected = expected.record_file(games, ("base", "scripted@0.3"))
    # the training games' results, then the promotion match's (iter_1 against base)
    assert league.wins["base"]["scripted@0.3"] == expected.wins["base"]["scripted@0.3"] > 0
    assert league.wins["scripted@0.3"] == expected.wins["scripted@0.3"]
    # a model trained from another one, or without its weights, trains again; the league needs its games
    run.learn(run.kept)
    (stage.dir / TRAINED_FILE).write_text(json.dumps({"trained_from": "/m9", "exports": []}))
    assert run.trained(stage) == []
    run.save_trained(stage, [Export("iter_1", str(tmp_path / "adapter_alone"), stage.dir / "eval")])
    run.learn(run.kept)
    assert run.trained(stage) == [] and "no weights in" in capsys.readouterr().out
    games.unlink()
    with pytest.raises(FileNotFoundError, match=r"scripted_0.3/games.jsonl: missing, and .*opponents.json says"):
        competition.Competition(run).replay(stage)


# --- competitive DPO pairs and progress ------------------------------------------------------------


def test_outcome_pairs_put_a_game_the_rules_rank_higher_for_the_trained_seat_against_a_lower_one(tmp_path):
    games = tmp_path / "games.jsonl"
    args = ["play", "--game", "negotiation", "--backend", "scripted", "--scripted-strength", "0.6", "-q"]
    args += ["--partner-scripted-strength", "0.6", "-n", "96", "-k", "8", "--out", str(games)]
    assert CliRunner().invoke(main, args, catch_exceptions=False).exit_code == 0
    from convert.cli import main as convert

    out = tmp_path / "dpo"
    flags = ["--format", "dpo", "--dpo-pairs", "outcome", "--seat", "0", "--val-fraction", "0", "--out-dir", str(out)]
    result = CliRunner().invoke(convert, [str(games), *flags], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    pairs = pd.read_parquet(out / "train.parquet")
    from selfplay_gen.records import read_games

    points = {r["game_id"]: r["outcome"]["points"] for r in read_games(games)}
    assert len(pairs) > 0 and {info["player"] for info in pairs["extra_info"]} == {0}
    judged = {game: (p[0] > p[1]) - (p[0] < p[1]) for game, p in points.items()}  # win 1, tie 0, loss -1
    for info in pairs["extra_info"]:
        assert judged[info["chosen_game_id"]] > judged[info["rejected_game_id"]]
        assert info["chosen_game_id"].split("/")[0] == info["rejected_game_id"].split("/")[0]  # one instance
    ranked_apart = 0
    for instance in {game.split("/")[0] for game in points}:
        outcomes = {j for game, j in judged.items() if game.split("/")[0] == instance}
        ranked_apart += len(outcomes) > 1
    assert len(pairs) == ranked_apart  # every group with games ranked apart gives exactly one pair
    every = tmp_path / "every"
    more = [*flags[:-1], str(every), "--dpo-pairs-per-group", "64"]
    assert CliRunner().invoke(convert, [str(games), *more], catch_exceptions=False).exit_code == 0
    all_pairs = pd.read_parquet(every / "train.parquet")["extra_info"]
    by_instance: dict[str, list[int]] = {}
    for game, j in judged.items():
        by_instance.setdefault(game.split("/")[0], []).append(j)
    assert len(all_pairs) == sum(a > b for js in by_instance.values() for a in js for b in js) > len(pairs)
    assert all(judged[i["chosen_game_id"]] > judged[i["rejected_game_id"]] for i in all_pairs)
    summary = json.loads((every / "convert_summary.json").read_text())["dpo"]
    assert summary == {"pairs": len(all_pairs), "unpaired_groups": len(by_instance) - ranked_apart}
    by_reward = tmp_path / "reward"
    flags[flags.index("outcome")] = "reward"
    flags[-1] = str(by_reward)
    assert CliRunner().invoke(convert, [str(games), *flags], catch_exceptions=False).exit_code == 0
    assert len(pd.read_parquet(by_reward / "train.parquet")) >= len(pairs)  # every unequal group pairs by reward


def test_progress_reports_each_checkpoint_against_the_previous_and_the_warm_start(tmp_path):
    run = league_run(tmp_path)
    comp = competition.Competition(run)
    pair = crossplay(tmp_path / "pair", 1.0, 0.2, ("iter_1", "warm"), instances=16)
    inputs = []
    for seats in (("warm", "warm"), ("iter_1", "iter_1"), ("iter_1", "warm"), ("warm", "iter_1")):
        name = "__".join(seats) + ".jsonl"
        inputs += ["--from-games", f"{seats[0] if seats[0] == seats[1] else ','.join(seats)}={pair}/games/{name}"]
    report = tmp_path / "report" / "crossplay"
    result = CliRunner().invoke(main, ["eval", "--game", "negotiation", *inputs, "--out", str(report)])
    assert result.exit_code == 0, result.output
    comp.league = League.of([Member("warm", path="/w"), Member("iter_1", path="/i")]).record_file(
        pair / "games" / "iter_1__warm.jsonl", ("iter_1", "warm")
    )
    written = comp.write_progress(report / "metrics.json", ["warm", "iter_1"], "warm", "development draw 2 (...)")
    assert written == tmp_path / "report" / competition.PROGRESS_FILE
    text = written.read_text()
    (row,) = [line for line in text.splitlines() if line.startswith("| iter_1 |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert re.match(r"\d+\.\d% \[\d+\.\d, \d+\.\d\]", cells[4])  # vs warm start, seat 0, with its interval
    assert float(cells[4].split("%")[0]) > 50
    assert "- iter_1: " in text and "## League ratings" in text and "Read on development draw 2 (...)." in text
    assert Counter(line.startswith("| warm |") for line in text.splitlines())[True] == 1


def test_the_summary_shows_each_promotion_skill_match_and_the_progress(tmp_path):
    from selfplay_gen.iterate import report
    from selfplay_gen.league import Promotion

    for k, promoted in ((1, True), (2, False)):
        stage = tmp_path / f"iter_{k:03d}"
        (stage / "eval").mkdir(parents=True)
        report.write_row(stage, (f"iter_{k}", "64", "1.0", "0.5", "60"))
        previous = "warm" if k == 1 else "iter_1"
        decision = Promotion(promoted, f"iter_{k}", previous, f"iter_{k}" if promoted else previous, 0.6 if promoted
                             else 0.52, (0.55, 0.65) if promoted else (0.45, 0.59), 512, f"reason {k}")  # fmt: skip
        (stage / report.PROMOTION_FILE).write_text(json.dumps(decision.to_dict()))
    skill = {"expert_vs_novice": {"mean": 0.7, "ci": [0.62, 0.78]}, "meets_target": True, "follows": True}
    (tmp_path / "iter_001" / "eval" / report.SKILL_FILE).write_text(json.dumps(skill))
    (tmp_path / "iter_001" / "eval" / report.SKILL_LEVELS_TABLE).write_text("| level | against |\n| expert | x |\n")
    (tmp_path / "iter_001" / "eval" / report.SKILL_TEST_DIR).mkdir()
    (tmp_path / "iter_001" / "eval" / report.SKILL_TEST_DIR / report.SKILL_LEVELS_TABLE).write_text("| on test |\n")
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / report.PROGRESS_FILE).write_text("## Progress per checkpoint\n\n| checkpoint |\n")
    text = report.write_summary(tmp_path)
    assert "| iter_1 | promoted | 60.0% [55.0%, 65.0%] | 512 | reason 1 |" in text
    assert "| iter_2 | kept iter_1 | 52.0% [45.0%, 59.0%] | 512 | reason 2 |" in text
    assert "| iter_1 | 70.0% [62.0%, 78.0%] | True | True |" in text
    assert text.index("## Promotion") < text.index("## Skill levels") < text.index("## Progress per checkpoint")
    judged = text.index("## Skill levels against references outside the model")
    assert text.index("### iter_1\n\n| level | against |\n| expert | x |") > judged
    tested = text.index("## Skill levels of the final model on the test split")
    assert text.index("### iter_1\n\n| on test |") > tested > judged


def test_a_judged_candidate_kept_as_the_final_model_is_evaluated_on_the_test_split_once(tmp_path, capsys):
    cfg = Iteration(
        run_dir=tmp_path / "run", initial_model="/m0", game="negotiation", num_iterations=0,
        league=LeagueSettings(promotion="on"), servers=ServerSettings(urls=("http://127.0.0.1:9",)),
        tools=Tools(python=sys.executable, gen=("true",)),
    )  # fmt: skip
    run = Run(cfg)
    stage_dir = tmp_path / "run" / "iter_001"
    (stage_dir / "eval").mkdir(parents=True)
    (stage_dir / "eval" / "DONE").touch()  # evaluated when the promotion judged it
    run.advance("/m1", "iter_1", stage_dir)
    run.evaluate("/m1", "iter_1", stage_dir)
    assert "+ true eval" not in capsys.readouterr().out  # done: not again
    run.evaluate("/m1", "iter_1", stage_dir, final=True)
    commands = [line for line in capsys.readouterr().out.splitlines() if line.startswith("+ true eval")]
    assert [" --instances test " in line for line in commands] == [True]
    run.evaluate("/m1", "iter_1", stage_dir, final=True)
    assert "+ true eval" not in capsys.readouterr().out and (stage_dir / "eval" / "DONE_TEST").exists()


def test_a_final_model_read_without_the_test_split_reads_it_when_the_run_resumes_with_it(tmp_path, capsys):
    """A league run with evaluation.test_split off ends with its final model unread on test (no DONE_TEST);
    the same run resumed with the split on reads that model's test split alone, once."""

    def run_with(test_split: bool) -> Run:
        return Run(Iteration(
            run_dir=tmp_path / "run", initial_model="/m0", game="negotiation", num_iterations=0,
            league=LeagueSettings(promotion="on"), servers=ServerSettings(urls=("http://127.0.0.1:9",)),
            tools=Tools(python=sys.executable, gen=("true",)), evaluation=Evaluation(test_split=test_split),
        ))  # fmt: skip

    stage_dir = tmp_path / "run" / "iter_001"
    off = run_with(False)
    off.advance("/m1", "iter_1", stage_dir)
    off.evaluate("/m1", "iter_1", stage_dir, final=True)
    commands = [line for line in capsys.readouterr().out.splitlines() if line.startswith("+ true eval")]
    assert commands and not any(" --instances test " in line for line in commands)
    assert (stage_dir / "eval" / "DONE").exists() and not (stage_dir / "eval" / "DONE_TEST").exists()
    off.evaluate("/m1", "iter_1", stage_dir, final=True)
    assert "+ true eval" not in capsys.readouterr().out  # off: done, nothing more to read
    on = run_with(True)
    on.advance("/m1", "iter_1", stage_dir)
    on.evaluate("/m1", "iter_1", stage_dir, final=True)
    commands = [line for line in capsys.readouterr().out.splitlines() if line.startswith("+ true eval")]
    assert [" --instances test " in line for line in commands] == [True]
    on.evaluate("/m1", "iter_1", stage_dir, final=True)
    assert "+ true eval" not in capsys.readouterr().out and (stage_dir / "eval" / "DONE_TEST").exists()


def test_a_forked_run_plays_its_own_checkpoints_not_the_originals(tmp_path):
    """A run copied to another directory (moved to another machine's root, or forked to go on with other
    settings) finds its checkpoints in the copy: the league names them relative to the run's directory."""
    original = tmp_path / "original"
    for name, promoted in (("iter_001", True), ("iter_002", False)):
        for done in ("DONE", "eval/DONE"):
            (original / name / done).parent.mkdir(parents=True, exist_ok=True)
            (original / name / done).touch()
        (original / name / competition.PROMOTION_FILE).write_text(json.dumps({"promoted": promoted}))
    (original / "base" / "eval").mkdir(parents=True)
    for done in ("base/DONE", "base/eval/DONE"):
        (original / done).touch()
    league = League.of([Member("base", path="/m0"), Member("iter_1", path=f"{original}/iter_001/train/hf")])
    league.save(original / "iter_002" / competition.LEAGUE_FILE, original)
    saved = json.loads((original / "iter_002" / competition.LEAGUE_FILE).read_text())
    assert [m["path"] for m in saved["members"]] == ["/m0", "iter_001/train/hf"]
    shutil.copytree(original, tmp_path / "run")
    lines = dry_iterate(
        tmp_path, "--trainer", "grpo", "--league_size", "2", "--num_iterations", "3", "--warm.policy", "none",
        "--league.learner", "latest", "--league.sharpness", "0",
    )  # fmt: skip
    # iter_2 trains on and meets iter_1, the checkpoint it has to beat, served from the copy
    assert "iter_1 " in next(line for line in lines if line.startswith("iteration 3: seat 0 (iter_2, trained)"))
    served = re.findall(r"(?:model_path=|--model-path |--partner-model |--model )(\S+)", "\n".join(lines))
    assert f"{tmp_path}/run/iter_001/train/hf" in served
    assert all(path == "/m0" or path.startswith(f"{tmp_path}/run/") for path in served), set(served)
    # a league file of absolute paths (as runs wrote them before) loads as it was written
    league.save(tmp_path / "absolute.json")
    assert League.load(tmp_path / "absolute.json", tmp_path / "run") == league
    # a path relative to the working directory, outside the run, is written and read as it is
    outside = League.of([Member("base", path="models/m0"), Member("iter_1", path=f"{original}/iter_001/train/hf")])
    outside.save(tmp_path / "outside.json", original)
    read = League.load(tmp_path / "outside.json", tmp_path / "run")
    assert [m.path for m in read.members] == ["models/m0", f"{tmp_path}/run/iter_001/train/hf"]
