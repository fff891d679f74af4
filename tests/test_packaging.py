"""The package builds into a wheel without setuptools' warnings and ships its data files."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """(the wheel, pip's output) for the repository as it is, built from a copy (a build writes
    build/ and *.egg-info beside its sources)."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in ("selfplay_gen", "convert"):
        shutil.copytree(REPO / name, source / name)  # with __pycache__/, which a checkout in use holds
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        cwd=out,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (path,) = out.glob("selfplay_gen-*.whl")
    return path, build.stdout + build.stderr


def test_the_build_gives_no_package_discovery_warning(wheel):
    _, output = wheel
    assert "Package would be ignored" not in output and "is absent from setuptools' `packages`" not in output


def test_the_wheel_holds_the_data_files_and_no_bytecode(wheel):
    names = set(zipfile.ZipFile(wheel[0]).namelist())
    for data in (
        "selfplay_gen/games/matching/data/optimization_human_games.jsonl",
        "selfplay_gen/data/retention/questions.jsonl",
        "selfplay_gen/viewer/static/app.js",
        "selfplay_gen/data/warm_start/adapter_model.safetensors",
        "selfplay_gen/data/warm_start/adapter_config.json",
        "selfplay_gen/verl/agent_loops.yaml",
        "convert/cli.py",
    ):
        assert data in names
    assert not [n for n in names if "__pycache__" in n or n.startswith(("tests/", "bench/"))]
