"""Records are checked when read, values included: a games file with any defect is refused by
every reader (selfplay-convert, eval --from-games, --resume) with an error that names file,
line, field and value, and convert --skip-invalid skips and counts such lines, whatever their
bytes."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from test_convert import ProposerBackend, play

from convert.cli import main as convert_main
from selfplay_gen.backends.base import SamplingParams
from selfplay_gen.cli import main
from selfplay_gen.players import LLMPlayer
from selfplay_gen.records import RecordError, parse, read_games

BAD = (2, 5)  # the damaged records: lines 3 and 6


@pytest.fixture(scope="module")
def games(tmp_path_factory, tokenizer) -> list[dict]:
    """Eight games of LLM seats (token ids and logprobs), played by the runner."""
    backend = ProposerBackend(tokenizer)
    seat = lambda spec, s, game, start: LLMPlayer(
        s, start.system[s], backend, tokenizer, SamplingParams(), f"{spec.game_id}#{s}"
    )
    return play(tmp_path_factory.mktemp("llm") / "games.jsonl", seat, seeds=range(2), k=4)


def put(record: dict, path: str, value) -> dict:
    """A copy of `record` with `value` at `path` (`players[1].token_ids[17]`); `...` deletes."""
    record = copy.deepcopy(record)
    steps = [int(i) if i else name for name, i in re.findall(r"(\w+)|\[(\d+)\]", path)]
    parent = record
    for step in steps[:-1]:
        parent = parent[step]
    if value is ...:
        del parent[steps[-1]]
    else:
        parent[steps[-1]] = value
    return record


def line(record) -> bytes:
    return json.dumps(record).encode()  # as GameWriter writes: NaN and Infinity included


def write(path: Path, games: list[dict], damaged: dict[int, bytes]) -> Path:
    path.write_bytes(b"".join(damaged.get(i, line(r)) + b"\n" for i, r in enumerate(games)))
    return path


# (field, value written there, how the error shows it, what it says)
DEFECTS = [
    ("outcome.normalized_reward", math.nan, "nan", "is not a finite number"),
    ("outcome.normalized_reward", math.inf, "inf", "is not a finite number"),
    ("outcome.normalized_reward", -0.25, "-0.25", "is not in [0, 1]"),
    ("outcome.normalized_reward", 7.5, "7.5", "is not in [0, 1]"),
    ("outcome.normalized_reward", "0.5", "'0.5'", "is not a finite number"),
    ("outcome.raw_reward", -5, "-5", "is not >= 0"),
    ("outcome.raw_reward", math.inf, "inf", "is not an integer"),
    ("outcome.best_reward", None, "None", "is not an integer"),
    ("outcome.termination", "exploded", "'exploded'", "is not a termination"),
    ("players[1].token_ids[17]", -3, "-3", "is not a token id"),
    ("players[0].token_ids[5]", 2**31, "2147483648", "is not a token id"),
    ("players[0].token_ids[9]", 12.5, "12.5", "is not a token id"),
    ("players[0].turns[0].output_ids[0]", "7", "'7'", "is not a token id"),
    ("players[0].turns[0].logprobs[2]", math.nan, "nan", "is not a finite number"),
    ("players[1].turns[0].logprobs[0]", -math.inf, "-inf", "is not a finite number"),
    ("players[0].turns[0].logprobs[1]", 0.5, "0.5", "is not a log-probability (<= 0)"),
    ("players[0].turns[0].prompt_len", -1, "-1", "is not >= 0"),
    ("players[0].turns[0].prompt_len", 10**30, "1e+30", "is not an integer"),  # orjson reads it as a float
    ("settings.sampling.temperature", math.nan, "nan", "is not a finite number"),
    ("settings.sampling.top_p", math.inf, "inf", "is not a finite number"),
    ("settings.sampling.top_p", 0, "0", "is not in (0, 1]"),
    ("group", "3", "'3'", "is not an integer"),
    ("instance_id", 7, "7", "is not a string"),
    ("instance.table[2]", [1, 2], "[1, 2]", "has 2 items, not 8"),
    ("players[1].messages[0].role", "robot", "'robot'", "is not one of 'system', 'user', 'assistant'"),
    ("events[0].player", 2, "2", "is not in [0, 1]"),
    ("failure", "boom", "'boom'", "is not a JSON object"),
    ("players[1].token_ids", None, "None", "is not a list"),
    ("players[1].turns", ..., None, None),
    ("outcome.normalized_reward", ..., None, None),
]


def expected_error(field: str, shown: str | None, problem: str | None) -> str:
    return f"missing field '{field}'" if shown is None else f"field '{field}': {shown} {problem}"


def damaged_file(tmp_path: Path, games: list[dict], field: str, value) -> Path:
    return write(tmp_path / "games.jsonl", games, {i: line(put(games[i], field, value)) for i in BAD})


def convert(games: Path, *args: str):
    return CliRunner().invoke(convert_main, [str(games), "--keep-constant-groups", *args])


def assert_refused_then_skipped(games: Path, count: int, words: str) -> None:
    """convert refuses the file naming the first bad line, writes nothing, and with --skip-invalid
    converts the rest and counts the bad lines."""
    refused = convert(games)
    message = refused.output.strip()
    assert refused.exit_code != 0 and message.startswith("Error:") and "Traceback" not in message, message
    assert f"{games}:{BAD[0] + 1}: {words}" in message and f"{len(BAD)} invalid line(s)" in message
    assert sorted(p.name for p in games.parent.iterdir()) == ["games.jsonl"]  # nothing written
    skipped = convert(games, "--skip-invalid")
    assert skipped.exit_code == 0, skipped.output
    summary = json.loads((games.parent / "convert_summary.json").read_text())
    assert summary["invalid_lines"] == len(BAD) and summary["games_used"] == count - len(BAD)
    assert f"skipped {len(BAD)} invalid lines, the first: {games}:{BAD[0] + 1}: {words}" in skipped.stderr


@pytest.mark.parametrize("field, value, shown, problem", DEFECTS)
def test_convert_names_file_line_field_and_value_and_skip_invalid_counts(games, tmp_path, field, value, shown, problem):
    games_file = damaged_file(tmp_path, games, field, value)
    assert_refused_then_skipped(games_file, len(games), expected_error(field, shown, problem))


@pytest.mark.parametrize("field, value, shown, problem", DEFECTS)
def test_eval_refuses_bad_records_naming_file_line_field_and_value(games, tmp_path, field, value, shown, problem):
    games_file = damaged_file(tmp_path, games, field, value)
    result = CliRunner().invoke(main, ["eval", "--from-games", str(games_file), "--out", str(tmp_path / "report")])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert f"{games_file}:{BAD[0] + 1}: {expected_error(field, shown, problem)}" in result.output
    assert not (tmp_path / "report").exists()


def test_eval_reports_the_same_games_once_the_bad_reward_is_gone(games, tmp_path):
    """The 7.5 reward is what eval refused: the file without it evaluates, with a mean in [0, 1]."""
    games_file = write(tmp_path / "games.jsonl", games, {})
    result = CliRunner().invoke(
        main, ["eval", "--from-games", str(games_file), "--out", str(tmp_path / "report"), "--bootstrap", "100"]
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_text())
    (model,) = metrics["models"].values()
    assert 0 <= model["mean_normalized_reward"]["mean"] <= 1


def _undecodable(record: dict) -> bytes:
    return line(record).replace(b'"seed-', b'"\xff\xfeseed-', 1)


# whole lines whatever their bytes: (the damaged line, what the error says)
RAW_DEFECTS = [
    (_undecodable, "not UTF-8 text (byte 0xff at column"),
    (lambda r: line(r)[: len(line(r)) // 2], "not valid JSON"),
    (lambda r: line(r).replace(b'"group": ', b'"group": 1' + b"0" * 5000, 1), "not valid JSON"),
    (lambda r: b"[" * 100_000, "not valid JSON"),
    (lambda r: b"\x00" * 64, "not valid JSON"),
    (lambda r: b"null", "None is not a JSON object"),
]


@pytest.mark.parametrize("damage, words", RAW_DEFECTS)
def test_convert_refuses_or_skips_lines_whatever_their_bytes(games, tmp_path, damage, words):
    games_file = write(tmp_path / "games.jsonl", games, {i: damage(games[i]) for i in BAD})
    assert_refused_then_skipped(games_file, len(games), words)


def test_eval_names_an_undecodable_line(games, tmp_path):
    games_file = write(tmp_path / "games.jsonl", games, {i: _undecodable(games[i]) for i in BAD})
    result = CliRunner().invoke(main, ["eval", "--from-games", str(games_file), "--out", str(tmp_path / "report")])
    assert result.exit_code != 0 and f"{games_file}:3: not UTF-8 text (byte 0xff" in result.output


def test_long_values_are_shown_cut_short(games, tmp_path):
    message = str(_refusal(put(games[0], "players[0].messages[0]", "x" * 500)))
    assert "field 'players[0].messages[0]': 'xxx" in message and message.endswith("... is not a JSON object")
    assert len(message) < 200


def _refusal(record) -> RecordError:
    with pytest.raises(RecordError) as caught:
        parse(line(record), "f:1")
    return caught.value


# ------------------------------------------------------------------ resume


def _play(out: Path, *args: str):
    return CliRunner().invoke(main, ["--backend", "scripted", "-k", "2", "--out", str(out), "-q", *args])


@pytest.mark.parametrize(
    "torn",
    [
        b'{"schema_version": 1, "game_id": "' + b"x" * (9 << 20),  # 9 MiB: many read chunks long
        b'{"schema_version": 1, "game_id": "\xff\xfe"}\n',  # whole, but undecodable
    ],
)
def test_resume_cuts_a_torn_last_line_of_any_length_or_bytes(tmp_path, torn):
    out = tmp_path / "games.jsonl"
    assert _play(out, "-n", "4").exit_code == 0
    with out.open("ab") as fh:
        fh.write(torn)
    resumed = _play(out, "-n", "6", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert f"dropped a torn last line ({len(torn)} bytes)" in resumed.stderr
    assert len({r["game_id"] for r in read_games(out)}) == 6


# ------------------------------------------------------------------ properties


def _accepted(record) -> bool:
    try:
        parse(line(record), "f:1")
    except RecordError:
        return False
    return True


@settings(max_examples=150, deadline=None)
@given(reward=st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 5))
def test_a_normalized_reward_is_accepted_exactly_when_finite_and_in_0_1(games, reward):
    assert _accepted(put(games[0], "outcome.normalized_reward", reward)) == (math.isfinite(reward) and 0 <= reward <= 1)


@settings(max_examples=150, deadline=None)
@given(token=st.integers(-(2**40), 2**40), at=st.integers(0, 400))
def test_a_token_id_is_accepted_exactly_when_a_non_negative_int32(games, token, at):
    assert _accepted(put(games[0], f"players[1].token_ids[{at}]", token)) == (0 <= token < 2**31)


@settings(max_examples=150, deadline=None)
@given(logprob=st.floats(allow_nan=True, allow_infinity=True))
def test_a_logprob_is_accepted_exactly_when_finite_and_not_positive(games, logprob):
    assert _accepted(put(games[0], "players[0].turns[0].logprobs[0]", logprob)) == (
        math.isfinite(logprob) and logprob <= 0
    )


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_bytes_give_a_record_or_a_record_error(games, data):
    """Bytes cut, replaced or inserted anywhere in a real line, or no line at all: `parse`
    returns a record or raises RecordError, never anything else (what --skip-invalid relies on)."""
    raw = line(games[0])
    at = data.draw(st.integers(0, len(raw)))
    cut = data.draw(st.integers(0, 8))
    junk = data.draw(st.binary(max_size=8))
    damaged = data.draw(st.sampled_from([raw[:at] + junk + raw[at + cut :], junk * 3]))
    try:
        assert parse(damaged, "f:1")["game_id"]
    except RecordError as err:
        assert str(err).startswith("f:1: ")


_finite = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_generated_valid_records_are_accepted_and_round_trip(games, data):
    """Any values within the rules, in every numeric field at once, pass and read back equal."""
    record = games[0]
    ids = len(record["players"][1]["token_ids"])
    values = {
        "outcome.normalized_reward": data.draw(st.floats(0, 1)),
        "outcome.raw_reward": data.draw(st.integers(0, 2**63 - 1)),
        "group": data.draw(st.integers(0, 2**63 - 1)),
        f"players[1].token_ids[{data.draw(st.integers(0, ids - 1))}]": data.draw(st.integers(0, 2**31 - 1)),
        "players[0].turns[0].logprobs[0]": data.draw(st.floats(max_value=0, allow_infinity=False)),
        "players[0].turns[0].prompt_len": data.draw(st.integers(0, 2**40)),
        "settings.sampling.temperature": data.draw(st.floats(0, 1e6)),
        "settings.sampling.top_p": data.draw(st.floats(0, 1, exclude_min=True)),
        "stats.wall_time_s": data.draw(st.floats(0, 1e9)),
        "instance_id": data.draw(st.text()),
        "failure": data.draw(st.none() | st.fixed_dictionaries({"reason": st.text()}, optional={"detail": st.text()})),
    }
    for path, value in values.items():
        record = put(record, path, value)
    assert parse(line(record), "f:1") == record


_not_int = st.one_of(_finite.filter(lambda x: not x.is_integer()), st.text(max_size=3), st.none(), st.booleans())
# (field, values that break its rule)
_BREAKING = [
    (
        "outcome.normalized_reward",
        st.one_of(
            st.just(math.nan),
            st.just(math.inf),
            st.floats(min_value=1, exclude_min=True),
            st.floats(max_value=0, exclude_max=True),
            st.text(max_size=3),
            st.booleans(),
        ),
    ),
    ("outcome.raw_reward", st.one_of(st.integers(max_value=-1), _not_int, st.just(math.inf))),
    ("group", st.one_of(st.integers(max_value=-1), _not_int, st.integers(min_value=2**63))),
    ("players[1].token_ids[3]", st.one_of(st.integers(max_value=-1), st.integers(min_value=2**31), _not_int)),
    ("players[0].turns[0].output_ids[0]", st.one_of(st.integers(max_value=-1), st.integers(min_value=2**31), _not_int)),
    (
        "players[0].turns[0].logprobs[1]",
        st.one_of(st.just(math.nan), st.floats(min_value=0, exclude_min=True), st.text(max_size=3)),
    ),
    (
        "settings.sampling.top_p",
        st.one_of(st.just(math.nan), st.floats(min_value=1, exclude_min=True), st.floats(max_value=0)),
    ),
    ("instance_id", st.one_of(st.integers(), st.none(), st.lists(st.text(), max_size=2))),
    ("events[0].player", st.one_of(st.integers(min_value=2), st.integers(max_value=-1), _not_int)),
    ("outcome.agreed", st.one_of(st.integers(), st.text(max_size=3), st.none())),
]
_REQUIRED = [
    "game_id",
    "outcome",
    "outcome.agreed",
    "players[0].kind",
    "players[1].turns",
    "stats.invalid_moves",
    "instance.table",
]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_mutated_record_is_refused_naming_the_field(games, data):
    """NaN, inf, negative ids, rewards above 1, wrong types or a missing field anywhere in this
    list: refused, and the message names that field."""
    if data.draw(st.booleans()):
        path, bad = data.draw(st.sampled_from(_BREAKING))
        value, says = data.draw(bad), f"field '{path}': "
    else:
        path = data.draw(st.sampled_from(_REQUIRED))
        value, says = ..., f"missing field '{path}'"
    assert says in str(_refusal(put(games[0], path, value)))
