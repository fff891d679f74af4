"""The embedded default is the raw SmolLM2-135M-Instruct with the project's warm-start adapter
folded in: it plays the game on CPU (valid moves, an agreement), and the raw model stays one name away."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from selfplay_gen import models
from selfplay_gen.cli import main

pytestmark = pytest.mark.slow


def test_the_default_is_the_raw_model_with_the_adapter_folded_in(local_model_dir):
    default = models.resolve(None)
    assert Path(default).name.startswith(models.DEFAULT_MODEL) and default != local_model_dir  # the raw one
    assert (models.WARM_START_ADAPTER / "adapter_model.safetensors").stat().st_size <= 10_000_000
    assert models.resolve(models.DEFAULT_MODEL) == default  # the default also by name


def test_the_default_model_plays_a_held_out_game_to_an_agreement(tmp_path):
    out = tmp_path / "games.jsonl"
    result = CliRunner().invoke(
        main,
        [
            "--backend",
            "local",
            "--seed",
            "1000000003",
            "--num-games",
            "1",
            "--games-per-instance",
            "1",
            "--temperature",
            "0",
            "--out",
            str(out),
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    game = json.loads(out.read_text())
    assert game["outcome"]["termination"] == "accepted" and game["stats"]["invalid_moves"] == 0
    assert game["outcome"]["normalized_reward"] > 0
    first = next(e for e in game["events"] if e["kind"] == "message")
    assert first["text"].startswith("My scores:")  # the teacher protocol, as learned
