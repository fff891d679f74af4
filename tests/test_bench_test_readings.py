"""bench/analysis/test_readings.py finds every test-split reading in a results folder (matching
evaluations by their instances' seeds, negotiation evaluations and run reports by their `test` folder,
curve rows on `test`, reports of test games) and nothing on development or human instances; and the
ledger bench/results/TEST_SPLIT.md names every reading the repository keeps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import bench_modules
import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main

readings_module = bench_modules.load("analysis/test_readings.py", "test_readings")
RESULTS, LEDGER = readings_module.RESULTS, readings_module.RESULTS / "TEST_SPLIT.md"


def scripted_eval(out: Path, *args: str) -> None:
    result = CliRunner().invoke(main, ["eval", "--backend", "scripted", *args, "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A results folder as runs leave it: matching on test, dev and human instances, negotiation
    cross-play in a `test` folder and in a `heldout` one, a curve, a verl step log, a run report, and
    the audit's own listing."""
    root = tmp_path_factory.mktemp("results")
    small = ["--num-instances", "3", "-k", "1"]
    scripted_eval(root / "run" / "final" / "eval" / "test", "--instances", "test", *small, "--label", "final")
    # a test folder under another name: the seeds, not the folder, make a matching reading
    scripted_eval(root / "run" / "final" / "eval" / "cpu_check", "--instances", "test", *small, "--label", "again")
    scripted_eval(root / "run" / "final" / "eval" / "dev", "--instances", "dev", *small, "--label", "final")
    scripted_eval(root / "run" / "final" / "eval" / "human", "--limit-instances", "2", "-k", "1", "--label", "final")
    negotiation = ["--game", "negotiation", "--scripted-strength", "1", "--partner-scripted-strength", "0.3"]
    negotiation += ["--limit-instances", "3", "-k", "1", "--bootstrap", "200"]
    scripted_eval(root / "neg" / "test" / "strong__weak", *negotiation)
    shutil.copytree(root / "neg" / "test" / "strong__weak", root / "neg" / "heldout" / "strong__weak")
    row = {"trainer": "online", "gpu_minutes": 3.0, "model": "online@4", "instances": 256, "games": 1024}
    row |= {"reward": 0.8, "ci_low": 0.79, "ci_high": 0.81, "gain_vs_warm": 0.01, "gain_ci_low": -0.01}
    curve = [{**row, "split": "test", "gain_ci_high": 0.03}, {**row, "split": "dev", "gain_ci_high": 0.03}]
    (root / "run" / "rl_curve.json").write_text(json.dumps({"rows": curve}))
    (root / "run" / "train").mkdir()
    (root / "run" / "train" / "metrics.json").write_text(json.dumps([{"step": 1, "train/loss": 0.5}]))
    (root / "run" / "kept_test_report.md").write_text("# Run report\n")
    (root / "run" / "README.md").write_text("the test split is read once\n")
    (root / "test_split_hygiene").mkdir()  # the audit's own listing is no reading
    (root / "test_split_hygiene" / "test_readings.md").write_text("| file | model |\n")
    return root


def test_every_test_reading_is_found_and_nothing_else(results):
    found = readings_module.readings(results)
    by_file: dict[str, list] = {}
    for reading in found:
        by_file.setdefault(reading.path, []).append(reading)
    assert sorted(by_file) == [
        "neg/test/strong__weak/metrics.json",
        "run/final/eval/cpu_check/metrics.json",
        "run/final/eval/test/metrics.json",
        "run/kept_test_report.md",
        "run/rl_curve.json",
    ]
    (final,) = by_file["run/final/eval/test/metrics.json"]
    metrics = json.loads((results / final.path).read_text())
    reward = metrics["models"]["final"]["mean_normalized_reward"]
    assert (final.model, final.size) == ("final", "3 x 1")
    assert final.figure == f"reward {reward['mean']:.3f} [{reward['ci'][0]:.3f}, {reward['ci'][1]:.3f}]"
    (curve,) = by_file["run/rl_curve.json"]  # the dev row is not a reading
    assert curve.model == "online: online@4" and curve.size == "256 x 4"
    assert curve.figure == "reward 0.800 [0.790, 0.810], paired vs warm +0.010 [-0.010, +0.030]"
    negotiation = by_file["neg/test/strong__weak/metrics.json"]
    assert [r.model for r in negotiation] == [
        "scripted-strength-1",
        "scripted-strength-0.3",
        "scripted-strength-1 vs scripted-strength-0.3",
    ]
    assert "of decided games against scripted-strength-0.3" in negotiation[-1].figure


def test_the_table_names_each_reading_once_a_row(results, capsys):
    readings_module.main([str(results)])
    out = capsys.readouterr().out
    assert "| `run/final/eval/test/metrics.json` | final | 3 x 1 | reward " in out
    assert out.rstrip().endswith("7 readings in 5 files")
    with pytest.raises(SystemExit, match="no such results folder"):
        readings_module.main([str(results / "missing")])


def test_the_ledger_names_every_test_reading_the_repository_keeps():
    """A test reading committed without its line in bench/results/TEST_SPLIT.md fails here."""
    ledger = LEDGER.read_text()
    missing = sorted({r.path for r in readings_module.readings(RESULTS) if not named(r.path, ledger)})
    assert not missing, f"{LEDGER}: add these test readings to the ledger: {missing}"


def named(path: str, ledger: str) -> bool:
    """Whether the ledger names `path`, whole or through a `{a,b}` group of the last folders and names
    (`run/{fbc/iter_002,online/step_8}/test/metrics.json`)."""
    if f"`{path}`" in ledger:
        return True
    for quoted in ledger.split("`")[1::2]:
        if "{" in quoted and any(expanded == path for expanded in expand(quoted)):
            return True
    return False


def expand(pattern: str) -> list[str]:
    """Every path a `{a,b}` pattern stands for (one or more groups)."""
    head, brace, rest = pattern.partition("{")
    if not brace:
        return [pattern]
    inner, _, tail = rest.partition("}")
    return [path for choice in inner.split(",") for path in expand(head + choice + tail)]
