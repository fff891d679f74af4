"""The `selfplay-gen` play command as a user runs it: scripted games, resume, bad arguments."""

import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main
from selfplay_gen.games.matching.scripted import ScriptedPlayer
from selfplay_gen.records import GameWriter, read_games
from selfplay_gen.runner import Summary

CMD = [sys.executable, "-m", "selfplay_gen.cli"]


def play(*args):
    return CliRunner().invoke(main, [*args, "-q"])


def test_scripted_games_are_written_with_summary(tmp_path):
    out = tmp_path / "g.jsonl"
    result = play("--backend", "scripted", "--num-games", "20", "-k", "4", "--out", str(out))
    assert result.exit_code == 0, result.output
    records = list(read_games(out))
    assert len(records) == 20
    groups = Counter(r["group"] for r in records)
    assert sorted(groups.values()) == [4] * 5  # K games per instance share the group
    assert all(len({r["instance_id"] for r in records if r["group"] == g}) == 1 for g in groups)
    summary = json.loads((tmp_path / "g.summary.json").read_text())
    assert summary["games"] == 20 and 0 < summary["mean_reward"] <= 1


def test_human_instances(tmp_path):
    out = tmp_path / "h.jsonl"
    assert play("--backend", "scripted", "--instances", "human", "-n", "6", "-k", "2", "--out", str(out)).exit_code == 0
    ids = Counter(r["instance_id"] for r in read_games(out))  # records come in the order games end
    assert ids == {"human-000": 2, "human-001": 2, "human-002": 2}


def test_existing_output_needs_resume(tmp_path):
    out = tmp_path / "g.jsonl"
    assert play("--backend", "scripted", "-n", "4", "--out", str(out)).exit_code == 0
    again = play("--backend", "scripted", "-n", "4", "--out", str(out))
    assert again.exit_code != 0 and "--resume" in again.output


def test_resume_with_other_settings_is_refused(tmp_path):
    out = tmp_path / "g.jsonl"
    assert play("--backend", "scripted", "-n", "4", "--out", str(out)).exit_code == 0
    again = play("--backend", "scripted", "-n", "8", "--seed", "5", "--out", str(out), "--resume")
    assert again.exit_code != 0 and "seed" in again.output


@pytest.mark.parametrize(
    "args, words",
    [
        (["--backend", "nope"], "nope"),
        (["--num-games", "-3"], "-3"),
        (["--games-per-instance", "0"], "games-per-instance"),
        (["--backend", "sglang"], "--base-url"),
        (["--backend", "sglang", "--base-url", "http://127.0.0.1:9"], "127.0.0.1:9"),
        (["--instances", "human", "-n", "1000", "-k", "1"], "134"),
        (["--backend", "openai", "--base-url", "http://127.0.0.1:9", "--model", "gpt-x"], "--tokenizer"),
        (["--partner-backend", "sglang"], "--partner-base-url"),
    ],
)
def test_bad_arguments_fail_clearly(tmp_path, args, words):
    result = play(*args, "--out", str(tmp_path / "g.jsonl"), "--timeout", "2")
    assert result.exit_code != 0
    assert words in result.output
    assert "Traceback" not in result.output


def test_unwritable_output_fails_clearly(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = play("--backend", "scripted", "-n", "2", "--out", str(blocker / "g.jsonl"))
    assert result.exit_code != 0 and str(blocker) in result.output


def test_resume_after_sigkill_completes_exactly(tmp_path):
    out = tmp_path / "g.jsonl"
    args = [*CMD, "--backend", "scripted", "-n", "3000", "-k", "8", "--out", str(out), "-q"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or out.stat().st_size < 200_000):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    with out.open("ab") as fh:  # a write cut short by the crash
        fh.write(b'{"schema_version": 1, "game_id": "torn')
    before = {r["game_id"] for r in read_games(out, skip_invalid=True)}
    assert 0 < len(before) < 3000

    done = subprocess.run([*args, "--resume"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "torn last line" in done.stderr
    ids = [r["game_id"] for r in read_games(out)]
    assert len(ids) == len(set(ids)) == 3000
    assert before <= set(ids)


def test_resumed_games_use_identical_instances(tmp_path):
    whole, part = tmp_path / "whole.jsonl", tmp_path / "part.jsonl"
    assert play("--backend", "scripted", "-n", "12", "-k", "3", "--out", str(whole)).exit_code == 0
    assert play("--backend", "scripted", "-n", "6", "-k", "3", "--out", str(part)).exit_code == 0
    assert play("--backend", "scripted", "-n", "12", "-k", "3", "--out", str(part), "--resume").exit_code == 0
    a = {r["game_id"]: r["instance"] for r in read_games(whole)}
    b = {r["game_id"]: r["instance"] for r in read_games(part)}
    assert a == b


def test_a_resumed_run_summarizes_its_own_games_and_the_file_all_of_them(tmp_path):
    out = tmp_path / "g.jsonl"
    assert play("--backend", "scripted", "-n", "6", "-k", "2", "--out", str(out)).exit_code == 0
    assert play("--backend", "scripted", "-n", "10", "-k", "2", "--out", str(out), "--resume").exit_code == 0
    run = json.loads((tmp_path / "g.summary.json").read_text())
    assert run["games"] == 4 and run["games_in_file"] == 10
    records = list(read_games(out))
    whole = Summary.of_file(out).to_dict()
    assert whole["games"] == 10 and whole["agreement_rate"] == sum(r["outcome"]["agreed"] for r in records) / 10
    assert whole["mean_reward"] == pytest.approx(sum(r["outcome"]["normalized_reward"] for r in records) / 10)


def test_playing_loads_no_analysis_libraries():
    """`eval` and `init` are imported when named: starting the play command loads neither pandas nor
    matplotlib, and every subcommand is still listed and runs."""
    probe = (
        "import sys, selfplay_gen.cli; print(sorted(m for m in ('pandas', 'matplotlib', 'torch') if m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout == "[]\n"
    listed = CliRunner().invoke(main, ["--help"]).output
    assert all(f"  {name} " in listed for name in ("eval", "init", "play"))
    assert CliRunner().invoke(main, ["eval", "--help"]).exit_code == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_run_cleanly_and_resume_finishes_it(tmp_path, sig):
    out = tmp_path / "g.jsonl"
    args = [*CMD, "--backend", "scripted", "-n", "3000", "-k", "8", "--out", str(out), "-q"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or out.stat().st_size < 200_000):
        time.sleep(0.05)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, stderr  # 143 for SIGTERM, 130 for SIGINT
    written = list(read_games(out))  # whole lines only: nothing torn
    summary = json.loads((tmp_path / "g.summary.json").read_text())
    assert summary["interrupted"] == sig.name and summary["games"] == summary["games_in_file"] == len(written) < 3000
    assert f"stopped by {sig.name}: {len(written)} games of this run" in stderr and "--resume" in stderr
    done = subprocess.run([*args, "--resume"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert len({r["game_id"] for r in read_games(out)}) == 3000


@pytest.mark.parametrize(
    "option, value", [("--seed", "-1"), ("--temperature", "nan"), ("--temperature", "inf"), ("--top-p", "nan")]
)
def test_values_that_would_poison_every_record_are_refused(tmp_path, option, value):
    out = tmp_path / "g.jsonl"
    result = play("--backend", "scripted", "-n", "2", option, value, "--out", str(out))
    assert result.exit_code == 2 and f"Invalid value for '{option}'" in result.output
    assert not out.exists()


def test_resume_with_fewer_games_than_the_file_holds_is_refused(tmp_path):
    out = tmp_path / "g.jsonl"
    assert play("--backend", "scripted", "-n", "8", "-k", "2", "--out", str(out)).exit_code == 0
    fewer = play("--backend", "scripted", "-n", "4", "-k", "2", "--out", str(out), "--resume")
    assert fewer.exit_code == 2 and "holds 8 games, 4 of them beyond this run's --num-games 4" in fewer.output
    assert len(list(read_games(out))) == 8  # nothing lost
    assert play("--backend", "scripted", "-n", "8", "-k", "2", "--out", str(out), "--resume").exit_code == 0


def test_a_second_run_on_the_same_file_fails_at_once(tmp_path):
    """While one run writes a file (it holds the file's lock), another run on it, resuming or
    not, fails naming the file and changes nothing; once the first is done, --resume works."""
    out = tmp_path / "g.jsonl"
    assert play("--backend", "scripted", "-n", "4", "-k", "2", "--out", str(out)).exit_code == 0
    before = out.read_bytes()
    with GameWriter(out, resume=True):
        for resume in ([], ["--resume"]):
            second = play("--backend", "scripted", "-n", "8", "-k", "2", "--out", str(out), *resume)
            assert second.exit_code == 1 and f"{out} is being written by another process" in second.output
    assert out.read_bytes() == before
    assert play("--backend", "scripted", "-n", "8", "-k", "2", "--out", str(out), "--resume").exit_code == 0


@pytest.mark.parametrize("target", ["/dev/null", "dir"])
def test_an_output_that_is_not_a_regular_file_is_refused_before_playing(tmp_path, target):
    out = tmp_path if target == "dir" else Path(target)
    result = play("--backend", "scripted", "-n", "2", "--out", str(out))
    assert result.exit_code != 0 and "Traceback" not in result.output and str(out) in result.output
    assert "is not a regular file" in result.output or "is a directory" in result.output


@pytest.mark.parametrize(
    "option, value, says",
    [
        ("--max-moves", "5", "limits.max_moves=30 (now 5)"),
        ("--temperature", "0.5", "sampling.temperature=0.7 (now 0.5)"),
        ("--scripted-share", "0.2", "seat0.share=0.5 (now 0.2)"),
        ("--scripted-policy", "teacher", "seat0.policy='share' (now 'teacher')"),
        ("--max-response-tokens", "64", "sampling.max_response_tokens=None (now 64)"),
    ],
)
def test_resume_with_other_game_settings_is_refused_naming_both_values(tmp_path, option, value, says):
    out = tmp_path / "g.jsonl"
    assert play("--backend", "scripted", "-n", "4", "-k", "2", "--out", str(out)).exit_code == 0
    before = out.read_bytes()
    again = play("--backend", "scripted", "-n", "8", "-k", "2", "--out", str(out), "--resume", option, value)
    assert again.exit_code == 2 and says in again.output and str(out) in again.output
    assert out.read_bytes() == before


def test_resume_plays_failed_games_again(tmp_path):
    """A failed game's record is taken out of the file (replaced whole) and the game played again:
    the file ends with one record per game, none failed."""
    out = tmp_path / "g.jsonl"
    assert play("--backend", "scripted", "-n", "6", "-k", "2", "--out", str(out)).exit_code == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    for record in records[1:3]:
        record["failure"] = {"reason": "backend_error", "detail": "server gone", "player": 0}
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    resumed = play("--backend", "scripted", "-n", "6", "-k", "2", "--out", str(out), "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "2 failed games are played again" in resumed.stderr
    after = list(read_games(out))
    assert sorted(r["game_id"] for r in after) == sorted(r["game_id"] for r in records)
    assert all(r["failure"] is None for r in after) and after[:4] == [records[0], *records[3:]]


@pytest.mark.parametrize("only_line", [b'{"schema_version": 1, "game_id": "se', b'{"game_id": "\xff\xfe"}\n'])
def test_resume_of_a_file_whose_only_line_is_torn(tmp_path, only_line):
    out = tmp_path / "g.jsonl"
    out.write_bytes(only_line)
    resumed = play("--backend", "scripted", "-n", "4", "-k", "2", "--out", str(out), "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "dropped a torn last line" in resumed.stderr and len(list(read_games(out))) == 4


def test_resume_refuses_an_undecodable_line_inside_the_file(tmp_path):
    out = tmp_path / "g.jsonl"
    assert play("--backend", "scripted", "-n", "4", "-k", "2", "--out", str(out)).exit_code == 0
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(lines[0] + b'{"game_id": "\xff"}\n' + b"".join(lines[1:]))
    resumed = play("--backend", "scripted", "-n", "8", "-k", "2", "--out", str(out), "--resume")
    assert resumed.exit_code == 1 and f"{out}:2: not UTF-8 text (byte 0xff" in resumed.output
    assert "Traceback" not in resumed.output


class Failing(ScriptedPlayer):
    """Fails every game of the instances in FAILING (an exception in a player: failure internal)."""

    FAILING: tuple[str, ...] = ()

    async def respond(self):
        if self.instance.id in self.FAILING:
            raise RuntimeError("a player's defect")
        return await super().respond()


@pytest.mark.parametrize("failing, status", [(("seed-0",), 0), (("seed-0", "seed-1"), 1)])
def test_exit_status_is_1_only_when_every_game_failed(tmp_path, monkeypatch, failing, status):
    monkeypatch.setattr(Failing, "FAILING", failing)
    monkeypatch.setattr("selfplay_gen.games.matching.game.ScriptedPlayer", Failing)
    result = play("--backend", "scripted", "-n", "4", "-k", "2", "--out", str(tmp_path / "g.jsonl"))
    assert result.exit_code == status, result.output
    assert f"{2 * len(failing)} of 4 games failed (internal: {2 * len(failing)})" in result.stderr


def test_a_full_disk_ends_the_run_with_one_clear_line(tmp_path, monkeypatch):
    real, lines = os.write, []

    def full_after_two(fd, data):
        if bytes(data[:18]) == b'{"schema_version":':
            lines.append(fd)
            if len(lines) > 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", full_after_two)
    out = tmp_path / "g.jsonl"
    result = play("--backend", "scripted", "-n", "8", "-k", "2", "--out", str(out))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"Error: cannot write {out}: no space left on device; the 2 games in it are whole" in result.stderr
    assert len(list(read_games(out))) == 2
    monkeypatch.setattr(os, "write", real)
    assert play("--backend", "scripted", "-n", "8", "-k", "2", "--out", str(out), "--resume").exit_code == 0
