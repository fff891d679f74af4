"""`selfplay-gen iterate` with `overlap` one-step: the next iteration's games played while this one trains,
by the model this one started from, and recorded as such; a stopped overlapped run resumes; `off` keeps the
synchronous order. Runs with stand-in commands (selfplay-gen, selfplay-convert, TRL's Python) that log when
each starts and ends, against a given server URL, so the loop itself runs, in seconds."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from selfplay_gen.iterate import decisions, report
from selfplay_gen.iterate.config import Iteration, ServerSettings, Tools, Warm
from selfplay_gen.iterate.shell import StepFailed
from selfplay_gen.iterate.stages import PlayedBy

# a stand-in command: one line when it starts and one when it ends, with what it played or trained and the model
FAKE = """#!/usr/bin/env bash
args=("$@"); out=""; model=""
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in --out) out=${args[i+1]};; --model) model=${args[i+1]};; esac
done
kind=KIND; [[ $1 == eval ]] && kind=eval
[[ $kind == convert ]] && out=$1
echo "$(date +%s.%N) start $kind $out $model" >> LOG
[[ $kind == generate ]] && touch "$out"  # the games file, as a resumable play begins it
if [[ $kind == generate && -e SLOW && $out == *iter_003* ]]; then sleep 30; fi
if [[ $kind == train && -e FAIL && $out == *iter_002* ]]; then  # once iteration 3's games have begun
  for _ in $(seq 200); do grep -q "start generate .*iter_003" LOG && exit 1; sleep 0.05; done; exit 2
fi
sleep SECONDS
[[ $kind == train ]] && mkdir -p "$out"
echo "$(date +%s.%N) end $kind $out $model" >> LOG
"""


def fake(tmp_path: Path, kind: str, seconds: float) -> str:
    path = tmp_path / f"fake-{kind}"
    text = FAKE.replace("KIND", kind).replace("LOG", str(tmp_path / "order.log")).replace("SECONDS", str(seconds))
    path.write_text(text.replace("SLOW", str(tmp_path / "slow")).replace("FAIL", str(tmp_path / "fail")))
    path.chmod(0o755)
    return str(path)


def configured(tmp_path: Path, overlap: str) -> Iteration:
    """Three DPO iterations (its trainer runs TRL's Python: a stand-in here) against a given server URL."""
    return Iteration(
        run_dir=tmp_path / "run", initial_model="/m0", num_iterations=3, trainer="dpo", warm=Warm(policy="none"),
        overlap=overlap, servers=ServerSettings(urls=("http://127.0.0.1:9",)),
        tools=Tools(python=sys.executable, gen=(fake(tmp_path, "generate", 0.1),),
                    convert=(fake(tmp_path, "convert", 0.0),), trl_python=fake(tmp_path, "train", 0.8)),
    )  # fmt: skip


def events(tmp_path: Path) -> list[tuple[float, str, str, str, str]]:
    """(time, start|end, kind, its output's stage, model) for every logged command, in time order."""
    found = []
    for line in (tmp_path / "order.log").read_text().splitlines():
        at, edge, kind, out, *model = line.split(" ")
        stage = next((part for part in Path(out).parts if part.startswith(("iter_", "base"))), "")
        found.append((float(at), edge, kind, stage, model[0] if model else ""))
    return sorted(found)


def when(found, edge: str, kind: str, stage: str) -> list[float]:
    return [at for at, e, k, s, _ in found if (e, k, s) == (edge, kind, stage)]


def test_the_next_iterations_games_are_played_while_this_one_trains_by_the_model_it_started_from(tmp_path):
    from selfplay_gen.iterate.loop import Run

    run_dir = tmp_path / "run"
    assert Run(configured(tmp_path, "one-step")).main() == f"{run_dir}/iter_003/train/hf"
    found = events(tmp_path)
    for i in (1, 2):  # iteration i + 1's games start before iteration i's training ends
        ahead = when(found, "start", "generate", f"iter_{i + 1:03d}")
        assert ahead and ahead[0] < when(found, "end", "train", f"iter_{i:03d}")[0]
    played = {s: m for _, e, k, s, m in found if (e, k) == ("start", "generate")}
    trained = {s: m for _, e, k, s, m in found if (e, k) == ("start", "train")}
    # each iteration trains the newest model on games of the model before it, one version behind
    assert played == {"iter_001": "/m0", "iter_002": "/m0", "iter_003": f"{run_dir}/iter_001/train/hf"}
    assert trained == {"iter_001": "/m0", "iter_002": f"{run_dir}/iter_001/train/hf",
                       "iter_003": f"{run_dir}/iter_002/train/hf"}  # fmt: skip
    assert PlayedBy.read(run_dir / "iter_003" / "gen") == PlayedBy(
        f"{run_dir}/iter_001/train/hf", "iter_1", str(run_dir / "iter_001"), "iter_2", complete=True
    )
    saved = json.loads((run_dir / "iter_002" / "trained.json").read_text())
    assert (saved["trained_from"], saved["games_played_by"], saved["games_played_during"]) == (
        f"{run_dir}/iter_001/train/hf",
        "/m0",
        "iter_1",
    )
    # every model is evaluated, iter_1 beside iteration 2's training (with iteration 3's games), iter_3 at the end
    evaluated = {m for _, e, k, _, m in found if (e, k) == ("start", "eval")}
    assert evaluated == {"/m0", *(f"{run_dir}/iter_00{i}/train/hf" for i in (1, 2, 3))}
    assert all((run_dir / stage / "eval" / "DONE").exists() for stage in ("iter_001", "iter_002", "iter_003"))
    # the wall-time table: the games played ahead beside the training before, and the iterations per hour
    summary = (run_dir / "summary.md").read_text()
    assert "| iter_3 | evaluate iter_1 + generate (beside iter_2's training) |" in summary
    assert "| iter_2 | train (dpo) |" in summary
    (row,) = [line for line in summary.splitlines() if line.startswith("| iter_3 | iter_1 |")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[3] == "iter_2" and float(cells[4]) >= 1  # its games beside iter_2's training; its own training
    assert "3 iterations in " in summary and "iterations per hour" in summary
    # iteration 2's own timings: its games played ahead, then the loop's wait for them, then its training
    steps = [t.step for t in report.timings(run_dir / "iter_002")]
    assert steps == ["generate", "convert", report.WAIT_AHEAD, "train (dpo)"]


def test_without_overlap_each_iteration_plays_then_trains(tmp_path):
    from selfplay_gen.iterate.loop import Run

    Run(configured(tmp_path, "off")).main()
    found = events(tmp_path)
    for i in (1, 2):  # iteration i + 1's games start once iteration i's training has ended
        trained = when(found, "end", "train", f"iter_{i:03d}")[0]
        assert when(found, "start", "generate", f"iter_{i + 1:03d}")[0] > trained
    played = {s: m for _, e, k, s, m in found if (e, k) == ("start", "generate")}
    assert played == {"iter_001": "/m0", **{f"iter_00{i}": f"{tmp_path}/run/iter_00{i - 1}/train/hf" for i in (2, 3)}}
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert "(beside " not in summary and "| iter_2 | iter_1 | 0 |  | 1 | 0 |" in summary  # nothing ran beside


def test_a_stopped_overlapped_run_resumes_and_keeps_the_games_played_ahead(tmp_path):
    """Iteration 2's training fails while iteration 3's games are being played ahead: the run stops at once
    (those games' command killed, not waited for), iteration 2's games (played ahead by the base model, to the
    end) are trained on when the run resumes, and iteration 3's, begun by iter_1, are played on by it."""
    from selfplay_gen.iterate.loop import Run

    run_dir = tmp_path / "run"
    (tmp_path / "fail").touch()
    (tmp_path / "slow").touch()
    started = time.monotonic()
    with pytest.raises(StepFailed, match=r"step 'iter_002: train \(dpo\)' failed"):
        Run(configured(tmp_path, "one-step")).main()
    assert time.monotonic() - started < 20  # not the 30 s the games played ahead would have taken
    first = events(tmp_path)
    assert when(first, "start", "generate", "iter_003") and not when(first, "end", "generate", "iter_003")
    assert (run_dir / "iter_001" / "DONE").exists() and not (run_dir / "iter_002" / "DONE").exists()
    assert PlayedBy.read(run_dir / "iter_002" / "gen").complete
    assert not PlayedBy.read(run_dir / "iter_003" / "gen").complete
    (tmp_path / "fail").unlink()
    (tmp_path / "slow").unlink()
    (tmp_path / "order.log").unlink()
    assert Run(configured(tmp_path, "one-step")).main() == f"{run_dir}/iter_003/train/hf"
    second = events(tmp_path)
    played = {s: m for _, e, k, s, m in second if (e, k) == ("start", "generate")}
    assert played == {"iter_003": f"{run_dir}/iter_001/train/hf"}  # iteration 2's games were kept
    assert when(second, "start", "generate", "iter_003")[0] < when(second, "end", "train", "iter_002")[0]
    assert [s for _, e, k, s, _ in second if (e, k) == ("start", "train")] == ["iter_002", "iter_003"]
    assert all((run_dir / f"iter_00{i}" / "DONE").exists() for i in (1, 2, 3))


@pytest.mark.parametrize(
    "recorded, have, player, overlap, on_disk, expected",
    [
        (None, False, "/m1", True, False, decisions.PLAY),
        (PlayedBy("/m0", "base", "/r/base", "iter_1", complete=True), True, "/m1", True, False, decisions.REUSE),
        (PlayedBy("/m0", "base", "/r/base", "iter_1", complete=True), True, "/m1", False, False, decisions.REUSE),
        (PlayedBy("/m1", "iter_1", "/r/iter_001", None, complete=True), True, "/m1", True, True, decisions.PLAY),
        (PlayedBy("/m0", "base", "/r/base", "iter_1"), True, "/m0", True, True, decisions.PLAY),  # --resume
        (PlayedBy("/m0", "base", "/r/base", "iter_1"), True, "/m1", True, True, decisions.CONTINUE),
        (PlayedBy("/m0", "base", "/r/base", "iter_1"), True, "/m1", True, False, decisions.REPLAY),  # weights gone
        (None, True, "/m1", True, False, decisions.REPLAY),  # who played them is unknown
        (None, True, "/m1", False, False, decisions.PLAY),  # a synchronous run's own, from before records
    ],
)
def test_games_on_disk_are_kept_played_on_or_set_aside(recorded, have, player, overlap, on_disk, expected):
    assert decisions.games_to_play(recorded, have, player, overlap, on_disk) == expected


def test_games_whose_player_is_unknown_are_set_aside_and_played_anew(tmp_path):
    from selfplay_gen.iterate.loop import Run

    run_dir = tmp_path / "run"
    gen = run_dir / "iter_001" / "gen"
    gen.mkdir(parents=True)
    (gen / "games.jsonl").write_text("")  # no played_by.json beside
    (gen / "games.replaced-1.jsonl").write_text("kept")
    cfg = configured(tmp_path, "one-step")
    Run(replace(cfg, num_iterations=1)).main()
    assert (gen / "games.replaced-1.jsonl").read_text() == "kept" and (gen / "games.replaced-2.jsonl").exists()
    assert PlayedBy.read(gen) == PlayedBy("/m0", "base", str(run_dir / "base"), None, complete=True)


def dry_plan(tmp_path: Path, overlap: str, *args: str) -> list[str]:
    """The training and game commands of a dry run, as (kind, stage), and the servers' memory steps."""
    from click.testing import CliRunner

    from selfplay_gen.iterate.cli import iterate_command

    common = ["--dry-run", "--initial_model", "/m0", "--run_dir", str(tmp_path / "run"), "--tools.gen", "gen",
              "--tools.convert", "conv", "--verl.python", sys.executable, "--warm.policy", "none",
              "--num_iterations", "3", "--overlap", overlap]  # fmt: skip
    result = CliRunner().invoke(iterate_command, [*common, *args])
    assert result.exit_code == 0, result.output
    plan = []
    for line in result.output.splitlines():
        stage = next((w.split("/")[0] for w in line.split(f"{tmp_path}/run/")[1:2]), "")
        if line.startswith("+ gen --config"):
            plan.append(f"play {stage}")
        elif "sft_trainer" in line or "main_ppo" in line:
            plan.append(f"train {stage}")
        elif "release_memory_occupation" in line:
            plan.append("release")
        elif "--mem-fraction-static" in line and "launch_server" in line:
            plan.append("memory " + line.split("--mem-fraction-static ")[1].split()[0])
    return plan


@pytest.mark.parametrize("trainer", ["filtered-bc", "grpo"])
def test_a_dry_run_shows_the_games_played_ahead_and_the_server_keeping_its_share(tmp_path, trainer):
    assert dry_plan(tmp_path, "off", "--trainer", trainer) == [
        "play iter_001", "release", "train iter_001", "play iter_002", "release", "train iter_002", "play iter_003",
        "release", "train iter_003",
    ]  # fmt: skip
    assert dry_plan(tmp_path, "one-step", "--trainer", trainer, "--servers.overlap_mem_fraction", "0.25") == [
        "memory 0.25", "play iter_001", "play iter_002", "train iter_001", "play iter_003", "train iter_002",
        "train iter_003",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "args, refused",
    [
        (["--trainer", "grpo-online"], "grpo-online plays its games inside verl"),
        (["--league_size", "2", "--game", "negotiation"], "a league"),
        (["--league.promotion", "on"], "a league"),
    ],
)
def test_overlap_is_refused_where_a_model_must_be_judged_first_or_nothing_is_played(args, refused):
    from click.testing import CliRunner

    from selfplay_gen.iterate.cli import iterate_command

    result = CliRunner().invoke(iterate_command, ["--dry-run", "--overlap", "one-step", *args])
    assert result.exit_code == 2 and refused in result.output and "overlap" in result.output


def test_the_help_and_the_printed_configuration_explain_overlap():
    from click.testing import CliRunner

    from selfplay_gen.iterate.cli import iterate_command

    helped = CliRunner().invoke(iterate_command, ["--help"]).output
    assert "--overlap" in helped and "one-step" in helped and "--servers.overlap_mem_fraction" in helped
    printed = CliRunner().invoke(iterate_command, ["--print-config"]).output
    assert "overlap: 'off'" in printed and "overlap_mem_fraction: 0.3" in printed


def test_running_out_of_memory_beside_a_server_playing_ahead_names_its_share(tmp_path):
    from selfplay_gen.iterate.config import TrainJob, Verl
    from selfplay_gen.iterate.loop import memory_advice

    job = TrainJob("offline", "/m", "", "", out_dir=tmp_path, experiment="x", lr="1e-6")
    assert "overlap_mem_fraction" not in memory_advice(job, Verl(), tmp_path / "verl.log")
    advice = memory_advice(job, Verl(), tmp_path / "verl.log", beside=0.3)
    assert "lower servers.overlap_mem_fraction, the share of the server playing beside training (now 0.3)" in advice
