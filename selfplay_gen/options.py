"""Options shared by every command that plays games (`play`, `eval`): what sits in each seat,
sampling (with the defaults of every run: `selfplay_gen.sampling`), limits, and which instances;
`game_options` adds the choice of game. `open_seats` turns them into seat factories for the runner, so
`--backend` and `--partner-*` mean the same thing everywhere.
"""

from __future__ import annotations

import contextlib
import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from . import games, gguf_export
from .backends.base import IN_PROCESS, MODULES, BackendOptions, SamplingParams, backend_class
from .games import GameConfig
from .games.base import GameInstance, Limits
from .players import LLMPlayer
from .sampling import Sampling
from .token_context import token_context

SCRIPTED = "scripted"  # the game's scripted players in a seat: no model, no backend
BACKENDS = (*MODULES, SCRIPTED)  # what --backend takes: every registered backend, or scripted players
SCRIPTED_POLICIES = ("share", "teacher", "random", "minimax", "equilibrium")
RANDOM = {"policy": "random"}  # the knobs of any game's random legal player (`Game.random_player`)


class FiniteRange(click.FloatRange):
    """A FloatRange that also refuses nan and inf: nan passes every bound, and either would be
    written into every record of the run."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


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


def _seat_options(prefix: str, who: str):
    """--backend/--base-url/--model for seat 0, or --partner-* for seat 1 (defaulting to seat 0's)."""
    same = " (default: same as seat 0)" if prefix else ""
    return [
        click.option(
            f"--{prefix}backend",
            type=click.Choice(BACKENDS),
            default=None if prefix else "llamacpp",
            show_default=not prefix,
            help=f"What plays {who}: the model in this process on CPU through llama.cpp (llamacpp, the "
            f"fastest on CPU) or transformers (local, also on a GPU), an SGLang server, an OpenAI-compatible "
            f"server, or scripted players that need no model{same}.",
        ),
        click.option(
            f"--{prefix}base-url",
            multiple=True,
            help=f"Server URL for {who}; repeat for several servers (each game sticks to one), or give a "
            f"router URL{same}.",
        ),
        click.option(
            f"--{prefix}model",
            default=None,
            help=f"Model directory for the local backend and the tokenizer; for sglang the served model "
            f"is read from /get_model_info. Default: the embedded SmolLM2-135M-Instruct with the project's "
            f"warm-start adapter (SmolLM2-135M-Instruct-warm); SmolLM2-135M-Instruct is the raw model{same}.",
        ),
        click.option(
            f"--{prefix}tokenizer",
            default=None,
            help=f"Local tokenizer directory, when --{prefix}model is not one (e.g. a model name on an "
            f"OpenAI-compatible server){same}.",
        ),
    ]


def generation_options(f):
    """Options for every command that plays games."""
    options = [
        *_seat_options("", "both seats"),
        *_seat_options("partner-", "seat 1 (cross-play, opponent pools)"),
        click.option(
            "--temperature",
            type=FiniteRange(min=0),
            default=Sampling.temperature,
            show_default=True,
            help="Sampling temperature (0: greedy).",
        ),
        click.option(
            "--top-p",
            type=FiniteRange(0, 1, min_open=True),
            default=Sampling.top_p,
            show_default=True,
            help="Nucleus sampling: keep the smallest set of tokens with this much probability.",
        ),
        click.option(
            "--max-new-tokens",
            type=click.IntRange(min=1),
            default=Sampling.max_new_tokens,
            show_default=True,
            help="Tokens per turn; a turn that does not end within it ends the game (max_new_tokens).",
        ),
        click.option(
            "--max-response-tokens",
            type=click.IntRange(min=1),
            default=None,
            help="Tokens a seat's context may grow past its first prompt (what training sees as its "
            "response); the turn that would pass it ends the game (context_length, reward 0). Set it "
            "to the training data.max_response_length, so that long games score 0 instead of being "
            "left out of training data and baselines. Default: no limit.",
        ),
        click.option(
            "--max-moves",
            type=click.IntRange(min=1),
            default=Limits.max_moves,
            show_default=True,
            help="Valid moves per game, both players together.",
        ),
        click.option(
            "--max-invalid",
            type=click.IntRange(min=1),
            default=Limits.max_invalid,
            show_default=True,
            help="Consecutive invalid moves by one player that end the game.",
        ),
        click.option(
            "--concurrency",
            type=click.IntRange(min=1),
            default=None,
            help="Games in flight. Default: what keeps the backend full (sglang: twice the requests its "
            "servers run at once, so a queue refills each batch slot a game frees while its turn is on the "
            "client; local: its batch size).",
        ),
        click.option(
            "--scripted-policy",
            type=click.Choice(SCRIPTED_POLICIES),
            default=None,
            help="Scripted players of a game with policies (default: the game's own): 'share' tells the "
            "partner part of what it sees (see --scripted-share) and proposes the best plan it knows; "
            "'teacher' plays the game's demonstrations for warm starts (its teacher knobs, e.g. everything "
            "it sees stated exactly as shown, then a proposal planned as --teacher-plan says); 'random' "
            "plays random legal moves of any game, its grammar without strategy (the games of a format "
            "warm start); 'minimax' and 'equilibrium' play a game's exact solution where it has one "
            "(TicTacToe, Kuhn Poker).",
        ),
        click.option(
            "--partner-scripted-policy",
            type=click.Choice(SCRIPTED_POLICIES),
            default=None,
            help="Scripted players in seat 1 (e.g. minimax against random; default: --scripted-policy).",
        ),
        click.option(
            "--teacher-plan",
            type=click.Choice(_teacher_plans()),
            default=None,
            help=teacher_plan_help(),
        ),
        click.option(
            "--scripted-share",
            type=click.FloatRange(0, 1),
            default=0.5,
            show_default=True,
            help="Scripted players (policy 'share'): share of their visible cells they tell the partner.",
        ),
        click.option(
            "--scripted-strength",
            type=click.FloatRange(0, 1),
            default=1.0,
            show_default=True,
            help="Scripted players with a strength: how hard they play, from 0 to 1 (e.g. how much "
            "they first ask for, strength x 10 points, conceding a point per counter-offer).",
        ),
        click.option(
            "--partner-scripted-strength",
            type=click.FloatRange(0, 1),
            default=None,
            help="Scripted players in seat 1 (cross-play of strengths; default: --scripted-strength).",
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=1),
            default=120.0,
            show_default=True,
            help="Seconds per server request.",
        ),
        click.option(
            "--max-retries",
            type=click.IntRange(min=0),
            default=5,
            show_default=True,
            help="Retries per request on connection errors, 429 and 5xx before a game is recorded failed.",
        ),
        click.option(
            "--max-batch",
            type=click.IntRange(min=1),
            default=None,
            help="llamacpp and local backends: games in flight (llamacpp, default 32) or sequences per "
            "forward pass (local, default 16).",
        ),
        click.option(
            "--gguf-weights",
            type=click.Choice(("auto", *gguf_export.DTYPES)),
            default=BackendOptions.gguf_weights,
            show_default=True,
            help="llamacpp backend: the precision llama.cpp plays the model in, exported once and cached. auto: "
            "bf16 where the CPU computes in it natively (AVX512_BF16), else f32. f32 holds the local backend's "
            "very weights; bf16, q8_0 and q4_0 (made from it by llama.cpp) decode faster, their logits differ "
            "from the local backend's (the warm model plays worse in q4_0), and records stay exact to the ids "
            "sampled. Ignored for a --model that is a .gguf file.",
        ),
        click.option(
            "--api-key-env",
            default="OPENAI_API_KEY",
            show_default=True,
            help="OpenAI backend: environment variable holding the API key.",
        ),
        click.option(
            "--openai-endpoint",
            type=click.Choice(["chat", "completions"]),
            default="chat",
            show_default=True,
            help="OpenAI backend: /v1/chat/completions (messages) or /v1/completions (token ids).",
        ),
        click.option(
            "--seed",
            type=click.IntRange(min=0),
            default=0,
            show_default=True,
            help="Seed of the instances (and of scripted players' choices).",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _known_game(ctx, param, name: str) -> str:
    try:
        for part in games.mixture(name):
            games.get(part)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None
    return name


def game_options(f):
    """Which game to play, and its options."""
    options = [
        click.option(
            "--game",
            default=games.UNNAMED,
            show_default=True,
            callback=_known_game,
            help=f"The game to play, by its registered name ({', '.join(games.names())}) or one of a family "
            f"({', '.join(games.families())}). Several joined by commas play a mix (play and init; iterate "
            "too): the instances are split evenly between the games, in order, each game on seeds of its own, "
            "e.g. textarena:TicTacToe-v0,textarena:KuhnPoker-v0,textarena:SimpleNegotiation-v0.",
        ),
        click.option(
            "--reward-mode",
            default=None,
            help="For a game with reward modes: what each seat's reward is, e.g. cooperative (both get the "
            "sum of points), semi-competitive (own points) or competitive (own minus partner's). "
            "Default: the game's.",
        ),
        click.option(
            "--skill",
            default=None,
            help="For a game with skill levels: the level a seat is asked to play at, in its prompt (e.g. "
            "novice, intermediate, expert): one level for both seats or 'SEAT0,SEAT1' (one may be empty). "
            "Scripted games at strengths 0.3 / 0.6 / 1 teach the three levels. Default: no level.",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


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
    game = games.get(opts.get("game", games.UNNAMED))
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
    for part in games.mixture(opts.get("game", games.UNNAMED)):
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
    game = games.get(opts.get("game", games.UNNAMED))()
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
    return [game_from({**opts, "game": part}) for part in games.mixture(opts.get("game", games.UNNAMED))]


def game_from(opts) -> GameConfig:
    """The game the options choose, with their limits and its options; a bad option is a usage error,
    and so is a mix of games (which `games_from` takes) where a command plays one game."""
    options = {k: opts[k] for k in ("reward_mode", "skill") if opts.get(k)}
    name = opts.get("game", games.UNNAMED)
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
