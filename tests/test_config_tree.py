"""The run configuration: one tree of typed knobs, each with one default and one name, from which the
flags, the environment variables and config files are generated; a run's tree is written to
RUN_DIR/config.yaml and read back with --config; the run_selfplay_*.sh scripts' variables are aliases
read only where a command is asked to (--script-env)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from selfplay_gen import config_tree
from selfplay_gen.iterate import config as run_config
from selfplay_gen.iterate import trainers
from selfplay_gen.iterate.cli import generate_command, iterate_command, train_command
from selfplay_gen.iterate.config import Generation, Iteration, Training
from selfplay_gen.options import Eval, Play
from selfplay_gen.verl import attention

TREES = (Iteration, Generation, Training, Play, Eval)


def declared_defaults(cls: type) -> dict[str, list[str]]:
    """{knob name: the classes of `cls`'s tree that declare a default for it} over every section's MRO."""
    out: dict[str, list[str]] = {}

    def walk(section: type, prefix: str) -> None:
        hints = __import__("typing").get_type_hints(section)
        for f in dataclasses.fields(section):
            if dataclasses.is_dataclass(hints[f.name]):
                walk(hints[f.name], prefix + f.name + ".")
                continue
            owners = [base.__name__ for base in section.__mro__ if f.name in vars(base).get("__annotations__", {})]
            out[prefix + f.name] = owners

    walk(cls, "")
    return out


# the long spellings a knob keeps beside its own, as users and scripts have typed them
OLDER_SPELLINGS = {"num_instances": "--limit-instances"}


@pytest.mark.parametrize("tree", TREES, ids=lambda t: t.__name__)
def test_every_knob_has_one_default_one_name_and_one_boolean_spelling(tree):
    knobs = list(config_tree.knobs(tree))
    paths = [k.path for k in knobs]
    assert len(paths) == len(set(paths))
    # one name: the variable is the path's, the flag too (or, in a tree of named flags, its name's: --max-new-tokens);
    # no two knobs share a variable or a flag
    assert len({k.env for k in knobs}) == len(knobs) and len({k.flag for k in knobs}) == len(knobs)
    flags = [flag for k in knobs for flag in (k.flag, *k.flags)]
    assert len(flags) == len(set(flags))
    for k in knobs:
        assert k.flag == "--" + (k.name.replace("_", "-") if k.named else k.path), k.path
        assert k.env == "SELFPLAY_" + k.path.upper().replace(".", "__")
        # beside its flag, a knob takes at most a short one (-n) and the one older spelling a test names here
        for flag in k.flags:
            assert len(flag) == 2 or OLDER_SPELLINGS.get(k.path) == flag, (k.path, flag)
        assert k.help, f"{k.path} says nothing about what it does"
        # one spelling of a boolean: true/false, in files, variables, flags and overrides alike
        if isinstance(k.default, bool):
            assert isinstance(k.type, config_tree.Bool), k.path
            assert k.convert("true", "test") is True and k.convert("false", "test") is False
            with pytest.raises(click.UsageError):
                k.convert("on", "test")
    # a script's variable names one knob, or one setting of every trainer's section (the one that runs reads it)
    owners: dict[str, set[str]] = {}
    for k in knobs:
        for alias in k.aliases:
            owners.setdefault(alias.name, set()).add(
                k.path.split(".")[-1] if k.path.startswith("trainers.") else k.path
            )
    assert all(len(paths) == 1 for paths in owners.values()), {a: p for a, p in owners.items() if len(p) > 1}
    # the prefix's other variables (the scripts' Python, the model cache, the training processes' attention)
    # are no knob's
    assert not {k.env for k in knobs} & {"SELFPLAY_PYTHON", "SELFPLAY_GEN", "SELFPLAY_CONVERT", "SELFPLAY_GEN_CACHE"}
    assert attention.ENV not in {k.env for k in knobs}
    # one default: a knob's default is declared by one class (a trainer's section by itself or its base only)
    for path, classes in declared_defaults(tree).items():
        assert len(classes) <= 2, (path, classes)
        if len(classes) == 2:  # a trainer's section with its own default for a knob its base declares
            assert path.startswith("trainers.") and classes[-1] == "TrainerSettings", (path, classes)
            own = {f.name: f for f in dataclasses.fields(getattr(run_config, classes[0]))}[path.split(".")[-1]]
            assert not own.metadata.get("help") and not own.metadata.get("aliases"), path  # said once, by the base


def test_a_knob_shared_by_two_commands_is_the_same_knob():
    """generate, iterate, play and eval all take the game and the sampling; generate and iterate the servers, ...:
    one declaration, one default. (A command's own top-level knobs, such as its out_dir, are its own; so is
    eval's games_per_instance, the games of each seat pairing of an evaluation, not a GRPO group.)"""
    by_path: dict[str, config_tree.Knob] = {}
    shared = 0
    for tree in TREES:
        for k in config_tree.knobs(tree):
            own = k.path not in ("game", "reward_mode", "games_per_instance", "overrides") or tree is Eval
            if "." not in k.path and own:
                continue
            seen = by_path.setdefault(k.path, k)
            shared += seen is not k
            assert (seen.default, seen.help, seen.aliases, seen.optional) == (k.default, k.help, k.aliases, k.optional)
    assert shared > 50  # sampling, servers, evaluation, tools, verl, loss, game, ...


def test_no_generic_variable_is_read_without_the_scripts(tmp_path, monkeypatch):
    """PORT, LR, SEED, ... set for anything else change nothing in selfplay-gen; the scripts' aliases do."""
    env = {"PORT": "31234", "TP": "2", "TEMPERATURE": "0.3", "RL_LR": "3e-5", "TRAINER": "grpo", "MASTER_ADDR": "h"}
    plain = CliRunner().invoke(iterate_command, ["--print-config"], env=env)
    assert plain.exit_code == 0, plain.output
    assert plain.output == CliRunner().invoke(iterate_command, ["--print-config"]).output
    scripted = CliRunner().invoke(iterate_command, ["--print-config", "--script-env"], env=env)
    cfg = read_back(scripted.output, tmp_path)
    assert (cfg.servers.port, cfg.servers.tp, cfg.sampling.temperature, cfg.trainer) == (31234, 2, 0.3, "grpo")
    assert cfg.verl.master_addr == "h"
    # RL_LR sets the section of the trainer that runs, not the others'
    assert cfg.trainers.grpo.lr == "3e-5" and cfg.trainers.filtered_bc.lr == Iteration().trainers.filtered_bc.lr
    # the prefixed variable wins over the script's, a flag over both, a dotted override over all
    env["SELFPLAY_SERVERS__PORT"] = "32000"
    assert read_back(invoke(["--script-env"], env), tmp_path).servers.port == 32000
    assert read_back(invoke(["--script-env", "--servers.port", "33000"], env), tmp_path).servers.port == 33000
    over = read_back(invoke(["--script-env", "--servers.port", "33000", "servers.port=34000"], env), tmp_path)
    assert over.servers.port == 34000
    # a boolean script variable keeps the spelling the script documented
    assert not read_back(invoke(["--script-env"], {"PROMOTION_COOPERATION": "off"}), tmp_path).league.cooperation
    # a flag's variable reads as click read it (TEST_SPLIT=0)
    assert not read_back(invoke(["--script-env"], {"TEST_SPLIT": "0"}), tmp_path).evaluation.test_split
    refused = CliRunner().invoke(iterate_command, ["--print-config", "--script-env"], env={"CROSSPLAY": "yes"})
    assert refused.exit_code == 2 and "CROSSPLAY='yes': give 1 or 0" in refused.output


def invoke(args: list[str], env: dict[str, str]) -> str:
    result = CliRunner().invoke(iterate_command, ["--print-config", *args], env=env)
    assert result.exit_code == 0, result.output
    return result.output


def read_back(text: str, tmp_path: Path) -> Iteration:
    path = tmp_path / "printed.yaml"
    path.write_text(text)
    known = {k.path: k for k in config_tree.knobs(Iteration)}
    return config_tree.build(Iteration, config_tree.read(path, known))


def test_a_run_writes_its_configuration_and_reads_it_back(tmp_path):
    """RUN_DIR/config.yaml holds the whole tree; --config reads it, and what is set over it wins."""
    run = tmp_path / "run"
    args = ["--run_dir", str(run), "--initial_model", "/m0", "--num_iterations", "0", "--warm.policy", "none"]
    args += ["--tools.gen", "true", "--servers.urls", "http://127.0.0.1:9", "--trainer", "grpo"]
    args += ["trainers.grpo.lr=2e-5", "sampling.temperature=0.9", "loss.clip_ratio_high=0.28"]
    result = CliRunner().invoke(iterate_command, args, env={"SELFPLAY_LEAGUE__SCRIPTED": "0.3,1"})
    written = (run / "config.yaml").read_text()
    assert "temperature: 0.9" in written and "lr: 2e-5" in written, result.output
    again = CliRunner().invoke(iterate_command, ["--config", str(run / "config.yaml"), "--print-config"])
    assert again.exit_code == 0, again.output
    assert again.output == written  # the same tree, knob for knob
    cfg = read_back(written, tmp_path)
    assert (cfg.trainer, cfg.trainers.grpo.lr, cfg.sampling.temperature, cfg.league.scripted) == (
        "grpo",
        "2e-5",
        0.9,
        (0.3, 1.0),
    )
    changed = CliRunner().invoke(
        iterate_command, ["--config", str(run / "config.yaml"), "--print-config", "trainer=dpo"]
    )
    assert read_back(changed.output, tmp_path).trainer == "dpo"
    # started again with another setting: the run says what changed
    again = CliRunner().invoke(iterate_command, [*args[:-3], "trainers.grpo.lr=3e-5"])
    assert "changes since the run last started: trainers.grpo.lr: '2e-5' -> '3e-5'" in again.output
    assert "sampling.temperature" in again.output  # back to its default


def test_a_bad_config_file_names_its_line_the_knob_and_the_value(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("trainer: grpo\nsampling:\n  temperature: warm\n")
    result = CliRunner().invoke(iterate_command, ["--config", str(bad), "--print-config"])
    assert result.exit_code == 2
    assert f"{bad}, line 3: sampling.temperature='warm'" in result.output and "not a valid float" in result.output
    bad.write_text("sampling:\n  temprature: 0.7\n")
    result = CliRunner().invoke(iterate_command, ["--config", str(bad), "--print-config"])
    assert f"{bad}, line 2: no setting 'sampling.temprature' (did you mean 'sampling.temperature'?)" in result.output


def test_an_unquoted_off_in_a_config_file_is_the_word_off(tmp_path):
    """YAML reads `off` as false; a setting whose words include off takes it back as the word."""
    given = tmp_path / "run.yaml"
    given.write_text("overlap: off\nleague:\n  promotion: off\n")
    result = CliRunner().invoke(iterate_command, ["--config", str(given), "--print-config"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.output)
    assert printed["overlap"] == "off" and printed["league"]["promotion"] == "off"


@pytest.mark.parametrize("command", ["play", "eval"])
def test_play_and_eval_name_what_is_wrong_in_their_config_file_or_arguments(command, tmp_path):
    from selfplay_gen.cli import main

    bad = tmp_path / "play.yaml"
    bad.write_text("game: negotiation\nsampling:\n  top_p: 1.5\n")
    result = CliRunner().invoke(main, [command, "--config", str(bad), "--print-config"])
    assert result.exit_code == 2 and f"{bad}, line 3: sampling.top_p=1.5" in result.output
    bad.write_text("seats:\n  backend: scripted\nnum_game: 4\n")
    result = CliRunner().invoke(main, [command, "--config", str(bad), "--print-config"])
    assert result.exit_code == 2 and f"{bad}, line 3: no setting 'num_game'" in result.output
    result = CliRunner().invoke(main, [command, "--print-config", "sampling.temprature=0.9"])
    assert result.exit_code == 2 and "no setting 'sampling.temprature' (did you mean 'sampling.temperature'?)" in (
        result.output
    )
    variable = CliRunner().invoke(main, [command, "--print-config"], env={"SELFPLAY_SAMPLING__TEMPERATURE": "nan"})
    assert variable.exit_code == 2 and "SELFPLAY_SAMPLING__TEMPERATURE: sampling.temperature='nan'" in variable.output


def test_an_argument_that_names_no_setting_goes_to_verl(tmp_path):
    """trainer.* is verl's (its trainer section); the run's own trainer is `trainer` and `trainers.<name>`."""
    run = tmp_path / "run"
    args = ["--dry-run", "--run_dir", str(run), "--initial_model", "/m0", "--num_iterations", "1", "--trainer", "grpo"]
    args += ["--warm.policy", "none", "--tools.gen", "gen", "--tools.convert", "conv", "--verl.python", sys.executable]
    verl_own = ["trainer.val_before_train=True", "critic=dp_critic"]  # a key of verl's, and one of its config groups
    result = CliRunner().invoke(iterate_command, [*args, "trainers.grpo.epochs=3", *verl_own])
    assert result.exit_code == 0, result.output
    (train,) = [line for line in result.output.splitlines() if "verl.trainer.main_ppo" in line]
    assert "trainer.total_epochs=3" in train and train.endswith(" ".join(verl_own))


@pytest.mark.parametrize(
    "typo, meant",
    [("evaluation.crossplay=false", "crossplay"), ("sampling.temprature=0.7", "sampling.temperature"),
     ("num_iteration=2", "num_iterations")],
)  # fmt: skip
def test_a_key_of_the_trees_own_that_names_no_setting_is_refused_before_anything_runs(typo, meant, tmp_path):
    """Only keys outside the tree's sections are verl's: a typo inside them would otherwise reach verl's Hydra,
    which refuses it only when training starts, after the stages before it have run."""
    result = CliRunner().invoke(iterate_command, ["--dry-run", "--run_dir", str(tmp_path / "run"), typo])
    assert result.exit_code == 2, result.output
    assert f"override {typo!r}: no setting {typo.partition('=')[0]!r} (did you mean {meant!r}?)" in result.output
    assert "+ " not in result.output  # no stage's command was printed


@pytest.mark.parametrize("command, tree", [(generate_command, Generation), (train_command, Training)])
def test_generate_and_train_print_their_own_tree(command, tree, tmp_path):
    given = {"model": "/m"} if tree is Generation else {"model_path": "/m"}
    result = CliRunner().invoke(command, ["--print-config", *(f"{k}={v}" for k, v in given.items())])
    assert result.exit_code == 0, result.output
    path = tmp_path / "c.yaml"
    path.write_text(result.output)
    known = {k.path: k for k in config_tree.knobs(tree)}
    assert config_tree.build(tree, config_tree.read(path, known)) == dataclasses.replace(tree(), **given)


def test_every_trainer_reads_its_own_section():
    assert {trainers.get(n).section for n in trainers.names()} == {
        f.name for f in dataclasses.fields(Iteration().trainers)
    }


@pytest.mark.parametrize("command", ["play", "eval"])
def test_play_and_eval_take_their_settings_from_their_tree_alone(command):
    """Every option of `play` and `eval` is a knob of its tree (its flag, its short flag or its one older
    spelling), defaulting to None so that the tree holds the one default, or one of the few options that
    are no setting (the input files, the config file, --resume, --quiet): no option declared by hand beside
    the tree, with a default of its own."""
    from selfplay_gen.cli import main

    tree = {"play": Play, "eval": Eval}[command]
    params = main.get_command(click.Context(main), command).params
    knobs = {k.param: k for k in config_tree.knobs(tree)}
    outside = {"config_file", "print_config", "arguments", "resume", "quiet", "from_games"}
    assert {p.name for p in params} == set(knobs) | (outside - ({"from_games"} if command == "play" else set()))
    for p in params:
        if p.name in knobs:
            k = knobs[p.name]
            assert p.default is None and sorted(p.opts) == sorted({k.flag, *k.flags}), p.name


def printed_defaults(command: click.Command, *args: str) -> dict[str, object]:
    result = CliRunner().invoke(command, [*args, "--print-config"])
    assert result.exit_code == 0, result.output
    return config_tree_flat(yaml.safe_load(result.output))


def config_tree_flat(tree: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(config_tree_flat(value, prefix + key + "."))
        else:
            out[prefix + key] = value
    return out


def test_play_and_eval_print_the_defaults_of_every_run():
    """One default per shared fact: what `selfplay-gen play --print-config` and `eval --print-config` print for
    the game and its sampling (the settings a run's stages pass them) is what `iterate --print-config` prints,
    so a default never changes on the way from one process to the next."""
    from selfplay_gen.cli import main

    run = printed_defaults(iterate_command)
    for command in ("play", "eval"):
        shown = printed_defaults(main, command)
        shared = {path for path in shown if path in run and (path.startswith("sampling.") or "." not in path)}
        shared -= {"games_per_instance"} if command == "eval" else set()  # eval's own (see above)
        assert {"sampling.temperature", "sampling.max_new_tokens", "game", "reward_mode"} <= shared, command
        assert {path: shown[path] for path in shared} == {path: run[path] for path in shared}, command


# a selfplay-gen that records each command line it is given and the variable that would set the temperature
RECORDER = """import json, os, sys
with open(sys.argv[1], "a") as f:
    f.write(json.dumps([sys.argv[2:], os.environ.get("SELFPLAY_SAMPLING__TEMPERATURE")]) + "\\n")
"""


@pytest.mark.parametrize("command", ["iterate", "generate"])
def test_a_setting_of_a_run_reaches_the_games_its_stages_play(command, tmp_path):
    """sampling.temperature=0.9, set in the run's tree, is what its `play` and `eval` commands play with: each
    reads the configuration file its stage wrote (as `selfplay-gen play|eval` reads it: their effective
    configuration is what --print-config prints for the very command line the stage ran), and a SELFPLAY_
    variable of the run's environment does not go over it."""
    from selfplay_gen.cli import main

    log, recorder = tmp_path / "commands.jsonl", tmp_path / "gen.py"
    recorder.write_text(RECORDER)
    gen = f"{sys.executable} {recorder} {log}"
    args = ["--tools.gen", gen, "--tools.convert", "true", "--servers.urls", "http://127.0.0.1:9"]
    if command == "iterate":
        args += ["--run_dir", str(tmp_path / "run"), "--initial_model", "/m0", "--num_iterations", "0"]
        args += ["--warm.policy", "none"]
    else:
        args += ["--out_dir", str(tmp_path / "gen"), "--num_games", "16", "--eval_dir", str(tmp_path / "eval")]
    tree = {"iterate": iterate_command, "generate": generate_command}[command]
    env = {"SELFPLAY_SAMPLING__TEMPERATURE": "0.5"}  # the run reads it; the override below goes over it
    result = CliRunner().invoke(tree, [*args, "sampling.temperature=0.9"], env=env)
    assert result.exit_code == 0, result.output
    ran = [json.loads(line) for line in log.read_text().splitlines()]
    plays = [argv for argv, _ in ran if argv[0] != "eval"]
    assert len(plays) == (command == "generate") and len(ran) > len(plays)  # generate's games, the evaluations
    for argv, variable in ran:
        assert argv[argv.index("--config") + 1].endswith("play.yaml") and variable is None
        shown = CliRunner().invoke(main, [*(argv if argv[0] == "eval" else ["play", *argv]), "--print-config"])
        assert shown.exit_code == 0, shown.output
        played = yaml.safe_load(shown.output)
        assert played["sampling"]["temperature"] == 0.9, argv
        assert played["seats"]["base_url"] == ["http://127.0.0.1:9"]  # the stage's own part, on its command line
