"""bench/analysis/invalid_moves.py: failed turns counted by reason, one mistake once whatever names and numbers
it carries, the rules' list of valid names left out."""

import json

import bench_modules

invalid_moves = bench_modules.load("analysis/invalid_moves.py", "invalid_moves")


def test_reasons_are_counted_with_names_and_numbers_masked(tmp_path):
    events = [
        {"kind": "invalid", "error": "proposal line 1: unknown reviewer 'Ava Li 421'; reviewers are Ava Li"},
        {"kind": "invalid", "error": "proposal line 3: unknown reviewer 'Noah Wilson 142'; reviewers are Ava Li"},
        {"kind": "invalid", "error": "paper GLUE is assigned twice (lines 2 and 5)"},
        {"kind": "message", "text": "[message] I see GLUE 421"},
        {"kind": "stop", "error": "the turn did not end within 768 new tokens"},
    ]
    games = tmp_path / "games.jsonl"
    games.write_text(json.dumps({"events": events}) + "\n" + json.dumps({"events": events[:1]}) + "\n")
    reasons, turns = invalid_moves.count(games)
    assert turns == 6
    assert reasons == {
        "proposal line N: unknown reviewer 'R N'; ...": 3,
        "paper P is assigned twice (lines N and N)": 1,
        "the turn did not end within N new tokens": 1,
    }
