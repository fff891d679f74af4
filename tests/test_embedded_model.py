"""The embedded default is the raw SmolLM2-135M-Instruct with the project's warm-start adapter
folded in: it plays the game on CPU (valid moves, an agreement), and the raw model stays one name away."""

import json
import time
from concurrent.futures import ThreadPoolExecutor
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


def test_runs_started_together_make_the_cached_model_once(tmp_path):
    """Runs side by side resolve the embedded model at the same moment: one writes the copy, the others wait for
    it, and none fails on the other's half-written directory (a killed writer's partial copy is written again)."""
    target = tmp_path / "cache" / "model"
    stale = target.with_name("model.partial")
    stale.mkdir(parents=True)
    (stale / "junk").write_text("left by a killed writer")
    writes = []

    def write(out: Path) -> None:
        writes.append(out)
        out.mkdir()
        time.sleep(0.3)
        (out / "config.json").write_text("{}")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: models.materialize_once(target, write), range(4)))
    assert writes == [stale]
    assert sorted(p.name for p in target.iterdir()) == ["config.json"]
    assert not stale.exists()
