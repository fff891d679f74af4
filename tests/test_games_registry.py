"""The game registry: games by name, imported only when asked for, with errors that name the choices."""

import subprocess
import sys

import pytest

from selfplay_gen import games
from selfplay_gen.games.base import Game


@pytest.fixture
def registry(monkeypatch):
    """A private copy of the registry, so a test's registrations do not leak."""
    monkeypatch.setattr(games, "_TARGETS", dict(games._TARGETS))
    return games


def test_every_registered_game_is_a_game_under_its_own_name():
    assert "matching" in games.names()
    for name in games.names():
        game = games.get(name)
        assert issubclass(game, Game) and game.name == name


def test_unknown_game_names_itself_and_the_known_ones():
    with pytest.raises(ValueError) as err:
        games.get("chess")
    assert "'chess'" in str(err.value)
    assert all(name in str(err.value) for name in games.names())


def test_importing_the_registry_imports_no_game():
    code = (
        "import sys, selfplay_gen.games as g\n"
        "loaded = [m for m in sys.modules if m.startswith('selfplay_gen.games.')]\n"
        "print(sorted(set(loaded) - {'selfplay_gen.games.base'}))\n"
        "g.get('matching')\n"
        "print('selfplay_gen.games.matching' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["[]", "True"]


def test_register_adds_a_game_by_qualified_name(registry):
    registry.register("matching-again", "selfplay_gen.games.matching.MatchingGame")
    assert registry.get("matching-again") is registry.get("matching")
    assert "matching-again" in registry.names()


def test_a_name_cannot_be_taken_twice(registry):
    registry.register("matching", "selfplay_gen.games.matching.MatchingGame")  # the same class again is fine
    with pytest.raises(ValueError, match="already registered as selfplay_gen.games.matching.MatchingGame"):
        registry.register("matching", "some.other.Game")


def test_targets_must_be_qualified_game_classes(registry):
    with pytest.raises(ValueError, match="package.module.Class"):
        registry.register("bad", "Matching")
    registry.register("not-a-game", "selfplay_gen.games.base.Limits")
    with pytest.raises(TypeError, match="not a Game class"):
        registry.get("not-a-game")


@pytest.mark.parametrize("name", ["matching", "negotiation"])
def test_seeded_instances_drawn_by_worker_processes_equal_the_serial_draw_in_seed_order(name):
    seeds = range(5_000, 5_000 + games.PARALLEL_SEEDS)
    instances = games.seeded(name, seeds)
    assert instances == [games.get(name).instance_type.from_seed(seed) for seed in seeds]
    assert [instance.id for instance in instances] == [f"seed-{seed}" for seed in seeds]


def test_a_seed_a_worker_process_cannot_draw_raises_as_it_would_in_this_process():
    with pytest.raises(ValueError) as serial:
        games.get("matching").instance_type.from_seed(-1)
    with pytest.raises(ValueError) as pooled:
        games.seeded("matching", range(-games.PARALLEL_SEEDS, 0))
    assert str(pooled.value) == str(serial.value)
