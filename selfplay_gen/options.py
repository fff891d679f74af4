"""The settings of every command that plays games (`play`, `eval`), one typed tree each (`Play`, `Eval`, in
`selfplay_gen.config_tree`'s way: one default per knob, flags, SELFPLAY_ variables, --config and
--print-config generated from it): the game, its sampling (the section every run samples with:
`selfplay_gen.sampling`), what sits in each seat, and the backends' client. Their flags are spelled by
each knob's name (`--max-new-tokens`). `open_seats` turns them into seat factories for the runner, so
`--backend` and `--partner-*` mean the same thing everywhere.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from . import config_tree, games, gguf_export
from .backends.base import IN_PROCESS, MODULES, BackendOptions, SamplingParams, backend_class
from .config_tree import knob, section
from .evaluation.splits import ALIASES, DEFAULT_INSTANCES, DEV, SPLITS, TEST
from .games import GameConfig
from .games.base import GameInstance, Limits
from .players import LLMPlayer
from .sampling import GROUP_SIZE, POSITIVE, Sampling
from .token_context import token_context

SCRIPTED = "scripted"  # the game's scripted players in a seat: no model, no backend
BACKENDS = (*MODULES, SCRIPTED)  # what --backend takes: every registered backend, or scripted players
SCRIPTED_POLICIES = ("share", "teacher", "random", "minimax", "equilibrium")
RANDOM = {"policy": "random"}  # the knobs of any game's random legal player (`Game.random_player`)
SHARE = click.FloatRange(0, 1)
T = TypeVar("T")


def _teacher_plans() -> list[str]:
    """The plans any registered game's teacher has (`Game.teacher_plans`)."""
    return sorted({plan for name in games.names() for plan in games.get(name).teacher_plans})


def teacher_plan_help() -> str:
    """`--teacher-plan`'s help wherever it is taken (`play`, `iterate`): each registered game's teacher
    plans, what each does (`Game.teacher_plans`) and the new tokens a turn long moves need
    (`Game.teacher_new_tokens`)."""
    plans = []
    for name in games.names():
        game = games.get(name)
        for plan, what in game.teacher_plans.items():
            tokens = game.teacher_new_tokens.get(plan)
            plans.append(f"{plan} ({what}{f'; its moves need {tokens} new tokens a turn' if tokens else ''})")
    return (
        "The teacher's plan, for a game whose teacher has several (default: the game's own teacher plan): "
        + " | ".join(plans)
        + "."
    )


class GameName(click.ParamType):
    """A game the registry has: a registered name, or one of a family (`textarena:TicTacToe-v0`), made to
    check it."""

    name = "game"

    def convert(self, value, param, ctx):
        try:
            for part in games.mixture(value):
                games.get(part)
        except ValueError as err:
            self.fail(str(err), param, ctx)
        return value


def game_knob() -> str | None:
    """The game of a run, of a generation or of a command that plays: one declaration for every tree."""
    return knob(
        None, f"The game [null: {games.UNNAMED}], by its registered name ({', '.join(games.names())}) or one of a "
        "family (textarena:ENV_ID). Several joined by commas play a mix (play, init and iterate): the instances "
        "are split evenly between the games, in order, each game on seeds of its own, e.g. "
        "textarena:TicTacToe-v0,textarena:KuhnPoker-v0,textarena:SimpleNegotiation-v0.", type=GameName(),
        alias="GAME",
    )  # fmt: skip


def reward_mode_knob() -> str | None:
    return knob(
        None, "The game's reward mode, for a game with modes (e.g. cooperative | semi-competitive | competitive: "
        "both seats get the sum of points, their own, or their own minus the partner's; or outcome | chips, in a "
        "game of chips: the match's win or loss, or each seat's chips won a hand) [null: the game's].",
        alias="REWARD_MODE",
    )  # fmt: skip


def move_format_knob() -> str | None:
    return knob(
        None, "How a seat's response gives its move, in a game that offers a choice: plain, the "
        "response is the move as the game reads it; boxed, the seat is asked to reason step by step and the "
        "last \\boxed{...} of its response is its move (SPIRAL's format) [null: the game's, plain].",
        alias="MOVE_FORMAT",
    )  # fmt: skip


def games_per_instance_knob(*flags: str) -> int:
    return knob(
        GROUP_SIZE, "Games per instance = GRPO group size (GRPO needs 2 or more for any signal).", type=POSITIVE,
        alias="GAMES_PER_INSTANCE", flags=flags,
    )  # fmt: skip


def _seat(who: str, model: str) -> dict[str, str]:
    """The help of a seat's backend, server, model and tokenizer (seat 0's, or seat 1's defaulting to them)."""
    same = " [null: seat 0's]" if "1" in who else ""
    return {
        "backend": f"What plays {who}: the model in this process on CPU through llama.cpp (llamacpp, the fastest on "
        "CPU) or transformers (local, also on a GPU), an SGLang server, an OpenAI-compatible server, or scripted "
        f"players that need no model{same}.",
        "base_url": f"Server URL for {who}; repeat for several servers (each game sticks to one), or give a router "
        f"URL{same}.",
        "model": "Model directory for the local backend and the tokenizer; for sglang the served model is read "
        f"from /get_model_info [null: {model}].",
        "tokenizer": "Local tokenizer directory, when the model is not one (e.g. a model name on an "
        f"OpenAI-compatible server){same}.",
    }


SEAT0 = _seat(
    "both seats", "the embedded SmolLM2-135M-Instruct with the project's warm-start adapter "
    "(SmolLM2-135M-Instruct-warm); SmolLM2-135M-Instruct is the raw model",
)  # fmt: skip
SEAT1 = _seat("seat 1 (cross-play, opponent pools)", "seat 0's")


@dataclass(frozen=True)
class Seats:
    """What plays each seat: a backend and its model, or the game's scripted players; seat 1's (partner_*)
    are seat 0's where not set."""

    backend: str = knob("llamacpp", SEAT0["backend"], type=click.Choice(BACKENDS))
    base_url: tuple[str, ...] = knob((), SEAT0["base_url"])
    model: str | None = knob(None, SEAT0["model"])
    tokenizer: str | None = knob(None, SEAT0["tokenizer"])
    partner_backend: str | None = knob(None, SEAT1["backend"], type=click.Choice(BACKENDS))
    partner_base_url: tuple[str, ...] = knob((), SEAT1["base_url"])
    partner_model: str | None = knob(None, SEAT1["model"])
    partner_tokenizer: str | None = knob(None, SEAT1["tokenizer"])


@dataclass(frozen=True)
class Scripted:
    """How the game's scripted players play, in a seat whose backend is `scripted`."""

    scripted_policy: str | None = knob(
        None, "Scripted players of a game with policies [null: the game's own]: 'share' tells the partner part of "
        "what it sees (see scripted_share) and proposes the best plan it knows; 'teacher' plays the game's "
        "demonstrations for warm starts (its teacher knobs, e.g. everything it sees stated exactly as shown, then a "
        "proposal planned as teacher_plan says); 'random' plays random legal moves of any game, its grammar without "
        "strategy (the games of a format warm start); 'minimax' and 'equilibrium' play a game's exact solution "
        "where it has one (TicTacToe, Kuhn Poker).", type=click.Choice(SCRIPTED_POLICIES),
    )  # fmt: skip
    partner_scripted_policy: str | None = knob(
        None, "Scripted players in seat 1 (e.g. minimax against random) [null: scripted_policy].",
        type=click.Choice(SCRIPTED_POLICIES),
    )  # fmt: skip
    teacher_plan: str | None = knob(None, teacher_plan_help(), type=click.Choice(_teacher_plans()))
    scripted_share: float = knob(
        0.5, "Scripted players (policy 'share'): share of their visible cells they tell the partner.", type=SHARE
    )
    scripted_strength: float = knob(
        1.0, "Scripted players with a strength: how hard they play, from 0 to 1 (e.g. how much they first ask for, "
        "strength x 10 points, conceding a point per counter-offer).", type=SHARE,
    )  # fmt: skip
    partner_scripted_strength: float | None = knob(
        None, "Scripted players in seat 1 (cross-play of strengths) [null: scripted_strength].", type=SHARE
    )


@dataclass(frozen=True)
class Client:
    """How the games reach their backends: games in flight, requests, and the in-process engines' batches."""

    concurrency: int | None = knob(
        None, "Games in flight [null: what keeps the backend full (sglang: twice the requests its servers run at "
        "once, so a queue refills each batch slot a game frees while its turn is on the client; local: its batch "
        "size)].", type=POSITIVE,
    )  # fmt: skip
    timeout: float = knob(BackendOptions.timeout_s, "Seconds per server request.", type=click.FloatRange(min=1))
    max_retries: int = knob(
        BackendOptions.max_retries, "Retries per request on connection errors, 429 and 5xx before a game is recorded "
        "failed.", type=click.IntRange(min=0),
    )  # fmt: skip
    max_batch: int | None = knob(
        None, "llamacpp and local backends: games in flight (llamacpp, default 32) or sequences per forward pass "
        "(local, default 16).", type=POSITIVE,
    )  # fmt: skip
    gguf_weights: str = knob(
        BackendOptions.gguf_weights, "llamacpp backend: the precision llama.cpp plays the model in, exported once and "
        "cached. auto: bf16 where the CPU computes in it natively (AVX512_BF16), else f32. f32 holds the local "
        "backend's very weights; bf16, q8_0 and q4_0 (made from it by llama.cpp) decode faster, their logits differ "
        "from the local backend's (the warm model plays worse in q4_0), and records stay exact to the ids sampled. "
        "Ignored for a model that is a .gguf file.", type=click.Choice(("auto", *gguf_export.DTYPES)),
    )  # fmt: skip
    api_key_env: str = knob(BackendOptions.api_key_env, "OpenAI backend: environment variable holding the API key.")
    openai_endpoint: str = knob(
        BackendOptions.endpoint, "OpenAI backend: /v1/chat/completions (messages) or /v1/completions (token ids).",
        type=click.Choice(["chat", "completions"]),
    )  # fmt: skip


# The options of a game that a run chooses once for all its commands (`GameChoice`'s, less `skill`, which a
# command chooses per seat): what `GameConfig.options` holds, besides the skill.
GAME_OPTIONS = ("reward_mode", "move_format")


@dataclass(frozen=True)
class GameChoice:
    """Which game, and its options: what every command that plays or reads a game's records takes."""

    NAMED_FLAGS = True  # flags spelled by name (--reward-mode), as users of these commands have always typed them

    game: str | None = game_knob()
    reward_mode: str | None = reward_mode_knob()
    move_format: str | None = move_format_knob()
    skill: str | None = knob(
        None, "For a game with skill levels: the level a seat is asked to play at, in its prompt (e.g. novice, "
        "intermediate, expert): one level for both seats or 'SEAT0,SEAT1' (one may be empty). Scripted games at "
        "strengths 0.3 / 0.6 / 1 teach the three levels [null: no level].",
    )  # fmt: skip


@dataclass(frozen=True)
class Played(GameChoice):
    """The game and how it is sampled and limited: what every game of a run shares, whichever command plays it.
    A run's stages write it to their play.yaml, which `play` and `eval` both read (--config)."""

    sampling: Sampling = section(Sampling)


@dataclass(frozen=True)
class Playing(Played):
    """Everything a command that plays games reads (`open_seats`, `game_from`): the game, its sampling, what
    sits in each seat, the backends' client, and the seed."""

    seed: int = knob(0, "Seed of the instances (and of scripted players' choices).", type=click.IntRange(min=0))
    seats: Seats = section(Seats)
    scripted: Scripted = section(Scripted)
    client: Client = section(Client)


@dataclass(frozen=True)
class Play(Playing):
    """Everything `selfplay-gen play` reads."""

    num_games: int = knob(
        64, "Games to play (in total, including those already in the file with --resume).", type=POSITIVE,
        flags=("-n",),
    )  # fmt: skip
    games_per_instance: int = games_per_instance_knob("-k")
    first_game_index: int = knob(
        0, "The number of each instance's first game (its game ids end /INDEX, /INDEX+1, ...): the games of one "
        "instance played by several commands, e.g. against several partners of one group, keep distinct ids.",
        type=click.IntRange(min=0),
    )  # fmt: skip
    instances: str = knob(
        "random", "Seeded random instances, or the instances people played (for a game that has them).",
        type=click.Choice(["random", "human"]),
    )  # fmt: skip
    out: Path = knob(Path("data/selfplay/games.jsonl"), "JSONL file of games; a summary lands next to it.")


@dataclass(frozen=True)
class Eval(Playing):
    """Everything `selfplay-gen eval` reads (the games files it reports, --from-games, are its input)."""

    out: Path | None = knob(None, "Report directory: metrics.json, report.md, PNG plots (and games/ when playing).")
    append_to: Path | None = knob(
        None, "Run-level report directory: add this evaluation as its next iteration row [null: none]."
    )
    instances: str | None = knob(
        None, "'human': the instances people played, for a game that has them (compared with them; such a game's "
        f"default); 'dev': development instances (seeds {DEV.start:_} + seed on; other games' default), on which "
        f"every setting is chosen; 'test': test instances (seeds {TEST.start:_} + seed on), played only to report "
        "final models, never to choose a setting. 'heldout' is the old name of 'dev'. Training never uses either "
        "range.", type=click.Choice(["human", *SPLITS, *ALIASES]),
    )  # fmt: skip
    num_instances: int | None = knob(
        None, f"Instances to play [null: all the game's human ones, {DEFAULT_INSTANCES['dev']} dev ones, "
        f"{DEFAULT_INSTANCES['test']} test ones].", type=POSITIVE, flags=("--limit-instances",),
    )  # fmt: skip
    games_per_instance: int = knob(4, "Games per instance and seat pairing.", type=POSITIVE, flags=("-k",))
    label: str | None = knob(None, "Label of the seat-0 model [null: its model directory name].")
    partner_label: str | None = knob(None, "Label of the partner model in cross-play.")
    bootstrap: int = knob(2000, "Bootstrap resamples (of instances) per interval.", type=click.IntRange(min=100))


RESUME = click.option(
    "--resume",
    is_flag=True,
    help="Complete an interrupted run with the same settings: keep its games, play the missing and the failed ones.",
)
QUIET = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")


def configuration(tree: type[T], given: dict[str, Any]) -> T | None:
    """A command's tree from every source (`config_tree.command`); None once --print-config printed it. An
    argument that names no setting is an error."""
    cfg, rest = config_tree.load(tree, given)
    if rest:
        raise click.UsageError(f"{rest[0]!r} names no setting (see --print-config)")
    return None if config_tree.printed(cfg, given) else cfg


def settings(tree: GameChoice) -> dict:
    """What `open_seats` and `game_from` read: every knob of a command's tree by its name."""
    return config_tree.names(tree)


def _backend_options(base_url, model, opts) -> BackendOptions:
    return BackendOptions(
        base_urls=tuple(base_url),
        model=model,
        api_key_env=opts["api_key_env"],
        endpoint=opts["openai_endpoint"],
        timeout_s=opts["timeout"],
        max_retries=opts["max_retries"],
        max_batch=opts["max_batch"],
        gguf_weights=opts["gguf_weights"],
    )


def _scripted_seat(knobs: dict, seed: int):
    """The game's own scripted player, seeded by the run's seed, the game and the seat."""

    def make(spec, seat, game, start):
        seeds = (seed, zlib.crc32(spec.game_id.encode()), seat)
        return (
            game.random_player(seat, seed=seeds) if knobs == RANDOM else game.scripted_player(seat, seed=seeds, **knobs)
        )

    return make


def _llm_seat(backend, tokenizer, params: SamplingParams, response_length: int | None):
    def make(spec, seat, game, start):
        return LLMPlayer(
            seat,
            start.system[seat],
            backend,
            tokenizer,
            params,
            session=f"{spec.game_id}#{seat}",
            response_length=response_length,
        )

    return make


# scripted players' knobs (any game's) and the options that set them
SCRIPTED_KNOBS = {"policy": "scripted_policy", "share": "scripted_share", "strength": "scripted_strength"}


def partner_scripted_args(knobs: Mapping[str, Any]) -> list[str]:
    """The options that seat the game's scripted player with `knobs` in seat 1 (e.g. one of the game's
    `Game.references`): its policy, or its strength."""
    flags = {"policy": "--partner-scripted-policy", "strength": "--partner-scripted-strength"}
    unknown = sorted(set(knobs) - set(flags))
    if unknown:
        raise ValueError(f"a scripted partner is set by {' and '.join(flags)}, not by the knobs {', '.join(unknown)}")
    values = [(flags[k], f"{v:g}" if isinstance(v, float) else str(v)) for k, v in knobs.items()]
    return ["--partner-backend", SCRIPTED, *(part for pair in values for part in pair)]


def _scripted_knobs(opts, prefix: str = "") -> dict:
    """The knobs the chosen game's scripted player has, from the options (`prefix` "partner_":
    seat 1's, where a partner option exists and is given), the game's defaults for those not
    given; the policy `teacher` is the game's own teacher (`Game.teacher`), whatever the other
    knobs say but `--teacher-plan`."""
    game = games.get(opts.get("game") or games.UNNAMED)
    policy = opts.get(prefix + "scripted_policy") or opts.get("scripted_policy")
    if policy == "random":
        return dict(RANDOM)
    if policy == "teacher":
        return {**game.teacher, **({"plan": opts["teacher_plan"]} if opts.get("teacher_plan") else {})}

    def value(knob: str, default):
        given = (opts.get(name) for name in (prefix + SCRIPTED_KNOBS[knob], SCRIPTED_KNOBS[knob]))
        return next((v for v in given if v is not None), default)

    return {k: value(k, default) for k, default in game.scripted_knobs.items()}


def _mixed_knobs(opts, seat: int, prefix: str) -> dict:
    """The scripted player's knobs for `seat`, checked in every game of a mix (`games.mixture`), which
    must give it the same knobs (a record names one scripted player per seat)."""
    found = {}
    for part in games.mixture(opts.get("game") or games.UNNAMED):
        knobs = _scripted_knobs({**opts, "game": part}, prefix)
        _check_scripted({**opts, "game": part}, seat, knobs, prefix)
        found[part] = knobs
    first = next(iter(found.values()))
    differ = [part for part, knobs in found.items() if knobs != first]
    if differ:
        raise click.BadParameter(
            f"the games of the mix give their scripted players other knobs ({found[differ[0]]} in {differ[0]}, "
            f"{first} in {next(iter(found))}); a mix seats one scripted player in each seat",
            param_hint=f"--{prefix.replace('_', '-')}scripted-policy",
        )
    return first


def _check_scripted(opts, seat: int, knobs: dict, prefix: str) -> None:
    """A scripted seat the game cannot make (a policy it has not) is a usage error before any
    game is played, not a failure of every game."""
    game = games.get(opts.get("game") or games.UNNAMED)()
    game.reset(game.instance_type.from_seed(0))
    try:
        game.random_player(seat, seed=0) if knobs == RANDOM else game.scripted_player(seat, seed=0, **knobs)
    except (ValueError, TypeError) as err:
        raise click.BadParameter(str(err), param_hint=f"--{prefix.replace('_', '-')}scripted-policy") from None


@dataclass
class Seating:
    """What the runner needs from the generation options, and the open backends (for their stats)."""

    seats: tuple
    settings: dict
    concurrency: int
    backends: dict

    def halted(self) -> str | None:
        """Why no game can be played any more (a backend whose servers are all gone), or None."""
        return next((f"{name}: {backend.down}" for name, backend in self.backends.items() if backend.down), None)

    def backend_stats(self) -> dict:
        # not dataclasses.asdict: it rebuilds the errors Counter from (key, count) pairs as keys
        return {
            name: {**vars(backend.stats), "errors": dict(backend.stats.errors)}
            for name, backend in self.backends.items()
            if hasattr(backend, "stats")
        }


async def _open_backend(stack, name, urls, model, tokenizer_dir, prefix, opts):
    """Start one backend. The tokenizer comes from --tokenizer, else from --model when that is a
    local directory, else from the model the server reports (SGLang serves a local path)."""
    from .models import load_tokenizer, resolve

    flag = "--" + prefix.replace("_", "-")
    if name not in IN_PROCESS and not urls:
        raise click.UsageError(f"{flag}backend {name} needs {flag}base-url")
    if name in IN_PROCESS and not (model or "").endswith(".gguf"):
        model = resolve(model)
    source = tokenizer_dir or (model if model and Path(model).is_dir() else None)
    if source is None and name == "openai":
        raise click.UsageError(
            f"{flag}backend openai needs {flag}tokenizer (a local tokenizer directory) "
            f"unless {flag}model is a local model directory"
        )
    tokenizer = load_tokenizer(source) if source else None
    backend = backend_class(name)(_backend_options(urls, model, opts), tokenizer)
    await stack.enter_async_context(backend)
    if tokenizer is None:
        try:
            tokenizer = load_tokenizer(backend.model)
        except (OSError, ValueError) as err:
            raise click.UsageError(
                f"cannot load a tokenizer for the served model {backend.model!r} ({err}); "
                f"pass {flag}tokenizer with a local tokenizer directory"
            ) from None
    stop = (token_context(tokenizer).end_of_turn_id,)
    params = SamplingParams(opts["temperature"], opts["top_p"], opts["max_new_tokens"], stop)
    return backend, tokenizer, params


@contextlib.asynccontextmanager
async def open_seats(**opts):
    """Open the backends named by the generation options and yield a `Seating`."""
    seats, settings, concurrency = [], {}, []
    async with contextlib.AsyncExitStack() as stack:
        opened = {}
        for seat, prefix in ((0, ""), (1, "partner_")):
            name = opts[f"{prefix}backend"] or opts["backend"]
            urls = opts[f"{prefix}base_url"] or opts["base_url"]
            model = opts[f"{prefix}model"] or opts["model"]
            tokenizer_dir = opts[f"{prefix}tokenizer"] or opts["tokenizer"]
            # a scripted seat plays by rule: no model, so `selfplay-convert --seats-of` never trains it
            settings[f"seat{seat}"] = {
                "backend": name,
                "model": None if name == SCRIPTED else model,
                "base_urls": list(urls),
            }
            if name == SCRIPTED:
                knobs = _mixed_knobs(opts, seat, prefix)
                seats.append(_scripted_seat(knobs, opts["seed"]))
                settings[f"seat{seat}"].update(knobs)
                continue
            key = (name, tuple(urls), model)
            if key not in opened:
                opened[key] = await _open_backend(stack, name, urls, model, tokenizer_dir, prefix, opts)
                concurrency.append(opened[key][0].max_concurrency)
            backend, tokenizer, params = opened[key]
            settings[f"seat{seat}"]["model"] = backend.model
            seats.append(_llm_seat(backend, tokenizer, params, opts["max_response_tokens"]))
        settings["sampling"] = {
            "temperature": opts["temperature"],
            "top_p": opts["top_p"],
            "max_new_tokens": opts["max_new_tokens"],
            "max_response_tokens": opts["max_response_tokens"],
        }
        yield Seating(
            tuple(seats),
            settings,
            opts["concurrency"] or min(concurrency or [64]),
            {f"{name} {' '.join(urls)}".strip(): entry[0] for (name, urls, _), entry in opened.items()},
        )


def games_from(opts) -> list[GameConfig]:
    """Each game the options choose (`--game`: one, or a mix), with their limits and its options."""
    return [game_from({**opts, "game": part}) for part in games.mixture(opts.get("game") or games.UNNAMED)]


def game_from(opts) -> GameConfig:
    """The game the options choose, with their limits and its options; a bad option is a usage error,
    and so is a mix of games (which `games_from` takes) where a command plays one game."""
    options = {k: opts[k] for k in (*GAME_OPTIONS, "skill") if opts.get(k)}
    name = opts.get("game") or games.UNNAMED
    if games.MIX in name:
        raise click.BadParameter(
            f"{name!r}: this command plays one game at a time; a mix is played by play, init and iterate, and "
            "evaluated one game at a time",
            param_hint="--game",
        )
    if opts.get("teacher_plan") and "plan" not in games.get(name).teacher:
        raise click.BadParameter(f"the {name} teacher has no plans", param_hint="--teacher-plan")
    try:
        return GameConfig(name, limits_from(opts), options)
    except ValueError as err:
        raise click.UsageError(str(err)) from None


def limits_from(opts) -> Limits:
    """The limits the options set; the defaults for a command without limit options (`init`)."""
    return Limits(**{k: opts[k] for k in ("max_moves", "max_invalid") if k in opts})


def load_instances(kind: str, count: int, seed: int, game: str = games.UNNAMED) -> list[GameInstance]:
    """`count` instances of `game`: seeded random ones (seeds seed, seed+1, ...) or, for a game
    that has them (`Game.human_games`), the human-played ones."""
    game_class = games.get(game)
    if kind == "human":
        if not game_class.human_games:
            raise click.UsageError(f"--instances human: the {game} game has random ones only")
        if count > game_class.human_games:
            raise click.UsageError(
                f"--instances human has {game_class.human_games} instances; ask for at most "
                f"{game_class.human_games} x --games-per-instance games"
            )
        return game_class.human_instances(count)
    return games.seeded(game, range(seed, seed + count), desc="instances" if count >= games.PARALLEL_SEEDS else None)
