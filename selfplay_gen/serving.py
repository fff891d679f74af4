"""An SGLang server from the outside, apart from generating (`backends/sglang.py`) and from the
processes of a run's servers (`iterate/server.py`): its launch and router command lines, a running
server's weights swapped in place and GPU memory released and resumed, and below, how to start
SGLang fast on the install at hand: SGLang's own defaults (CUDA graphs, its choice of
attention and sampling kernels, its grammar backend), and a fallback only for a part the install lacks.

The fallbacks, each said in the log with its reason:
- no FlashAttention-3 ops in sgl-kernel and no prebuilt flashinfer kernels: `--attention-backend
  triton` (flashinfer would compile its attention kernels with nvcc when the server starts);
- no prebuilt flashinfer kernels: `--sampling-backend pytorch` (likewise for its sampling kernels);
- no xgrammar: `--grammar-backend none` (the scheduler builds its default grammar backend at start and
  fails without it; games never constrain decoding).
Each fallback also says what brings the fast path (`FIXES`), which `selfplay-gen doctor` reports.
With the pytorch sampler, a model with a large vocabulary also gets `--max-running-requests`
(`model_args`): that sampler sorts every running request's whole distribution at each step, outside the
memory SGLang sizes its KV cache for, and at SGLang's own ceiling of 4,096 requests a 152k-token
vocabulary runs the GPU out of memory mid-run (bench/results/runner_8k_h100_2026-11-26/).
CUDA graphs stay on unless asked off (`cuda_graphs=False`, e.g. to debug a capture failure). The same
choice gives verl's rollout engine its `engine_kwargs.sglang.*` and `enforce_eager`.

The probe runs in the Python that will run SGLang (`--python`), which may not be this one:

    python -m selfplay_gen.serving sglang-args --python /opt/sglang/bin/python --model /models/qwen
    python -m selfplay_gen.serving verl-overrides --no-cuda-graphs
    python -m selfplay_gen.serving swap http://127.0.0.1:30000 /ckpt/iter_1 /ckpt/iter_2
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import click

from . import models

# module -> what its presence means; probed by import spec only, so nothing starts a GPU
PROBED = {
    "sgl_kernel.flash_ops": "FlashAttention-3 ops of sgl-kernel",
    "flashinfer_cubin": "prebuilt flashinfer kernels",
    "flashinfer_jit_cache": "prebuilt flashinfer kernels",
    "xgrammar": "xgrammar",
}
# what brings each part (the packages' pins are in gpu/requirements-*.txt)
FIXES = {
    "FlashAttention-3 ops of sgl-kernel": "the whole sglang-kernel wheel (`make wheelhouse` keeps it whole; the "
    "size-limited bundles of gpu/build_bundle.sh drop these ops)",
    "prebuilt flashinfer kernels": "flashinfer-cubin (gpu/requirements-kernels.txt; `make gpu`, or a wheelhouse "
    "that carries it)",
    "xgrammar": "xgrammar (gpu/requirements-kernels.txt; `make gpu`, or a wheelhouse that carries it)",
}


@dataclass(frozen=True)
class Fallback:
    """A setting SGLang gets in place of its own default, because the install lacks a part."""

    setting: str  # "attention"
    used: str  # the value SGLang is given: "triton"
    lacking: str  # what is missing, as the reasons say it
    fix: str  # what brings the fast path

    @property
    def reason(self) -> str:
        return f"{self.setting}: {self.used} ({self.lacking})"


def fallbacks(installed: dict[str, bool]) -> list[Fallback]:
    """The settings an install that has the modules `installed` marks True falls back on."""
    prebuilt_flashinfer = installed.get("flashinfer_cubin", False) or installed.get("flashinfer_jit_cache", False)
    out = []
    if not (installed.get("sgl_kernel.flash_ops", False) or prebuilt_flashinfer):
        fix = f"{FIXES['prebuilt flashinfer kernels']}, or {FIXES['FlashAttention-3 ops of sgl-kernel']}"
        out.append(Fallback("attention", "triton", "no FlashAttention-3 ops and no prebuilt flashinfer kernels", fix))
    if not prebuilt_flashinfer:
        out.append(
            Fallback("sampling", "pytorch", "no prebuilt flashinfer kernels", FIXES["prebuilt flashinfer kernels"])
        )
    if not installed.get("xgrammar", False):
        out.append(Fallback("grammar", "none", "no xgrammar; games do not constrain decoding", FIXES["xgrammar"]))
    return out


# SGLang's ceiling on running requests (its default never exceeds it)
SGLANG_MAX_RUNNING = 4096
# the GPU memory share of a lone server that names none, for servers that split one GPU between them
LONE_MEM_FRACTION = 0.8
# the largest decode batch SGLang captures a CUDA graph for by itself, for a server of TP < 4 on a GPU of 80 GB
# or more (`ServerArgs.cuda_graph_max_bs`; fewer on a smaller GPU)
SGLANG_GRAPH_BATCH = 256
GRAPH_OPTIONS = ("--cuda-graph-max-bs", "--cuda-graph-bs", "--disable-cuda-graph")
# running requests x vocabulary entries that the pytorch sampler fits beside a KV cache sized by
# --mem-fraction-static 0.8: the embedded model's vocabulary at SGLang's ceiling (the measured sizes that
# fit and did not are in bench/results/runner_8k_h100_2026-11-26/)
PYTORCH_SAMPLER_ELEMENTS = SGLANG_MAX_RUNNING * 49_152

# Waiting requests in order of the priority the players send (their game's depth), higher first. No
# preemption: a running turn is never evicted for a deeper one, which would throw away its decoded tokens.
# Requests without a priority (verl's rollout, a replay) rank as 0, in arrival order among themselves.
PRIORITY_ARGS = ["--enable-priority-scheduling", "--disable-priority-preemption", "--default-priority-value", "0"]

_PROBE = (
    "import importlib.util, json, sys\n"
    "def has(name):\n"
    "    try:\n"
    "        return importlib.util.find_spec(name) is not None\n"
    "    except (ImportError, ValueError):\n"
    "        return False\n"
    "print(json.dumps({name: has(name) for name in sys.argv[1:]}))\n"
)


@dataclass(frozen=True)
class ServerChoice:
    """SGLang settings for one install: `None` leaves a setting to SGLang's own default."""

    attention_backend: str | None
    sampling_backend: str | None
    grammar_backend: str | None
    cuda_graphs: bool
    reasons: tuple[str, ...]
    priority_scheduling: bool = False

    def sglang_args(self) -> list[str]:
        """`python -m sglang.launch_server` arguments."""
        args = []
        for flag, value in (
            ("--attention-backend", self.attention_backend),
            ("--sampling-backend", self.sampling_backend),
            ("--grammar-backend", self.grammar_backend),
        ):
            if value is not None:
                args += [flag, value]
        if self.priority_scheduling:
            args += PRIORITY_ARGS
        return args + ([] if self.cuda_graphs else ["--disable-cuda-graph"])

    def engine_kwargs(self) -> list[str]:
        """SGLang engine options as verl's `engine_kwargs.sglang` takes them ("attention_backend=triton")."""
        kwargs = {
            "attention_backend": self.attention_backend,
            "sampling_backend": self.sampling_backend,
            "grammar_backend": self.grammar_backend,
        }
        return [f"{k}={v}" for k, v in kwargs.items() if v is not None]

    def verl_overrides(self) -> list[str]:
        """Hydra overrides for verl's SGLang rollout engine (`enforce_eager` turns CUDA graphs off)."""
        return [f"+actor_rollout_ref.rollout.engine_kwargs.sglang.{kv}" for kv in self.engine_kwargs()] + [
            f"actor_rollout_ref.rollout.enforce_eager={not self.cuda_graphs}"
        ]


def choose(installed: dict[str, bool], cuda_graphs: bool = True, priority_scheduling: bool = False) -> ServerChoice:
    """The settings for an install that has the modules `installed` marks True."""
    used = {fallback.setting: fallback.used for fallback in fallbacks(installed)}
    reasons = [fallback.reason for fallback in fallbacks(installed)]
    reasons.append("CUDA graphs: on" if cuda_graphs else "CUDA graphs: off (asked for)")
    if priority_scheduling:
        reasons.append("scheduling: a game's later turns first (priority scheduling)")
    return ServerChoice(
        used.get("attention"),
        used.get("sampling"),
        used.get("grammar"),
        cuda_graphs,
        tuple(reasons),
        priority_scheduling,
    )


def with_own_args(install: Sequence[str], own: Sequence[str]) -> list[str]:
    """Server arguments: the install's (`ServerChoice.sglang_args`, its fallbacks) less every option
    that `own` sets, then `own`, so that a user's `--mem-fraction-static` adds to the fallbacks an
    install needs to start and a user's `--attention-backend` replaces the install's."""
    named = {arg.split("=", 1)[0] for arg in own if arg.startswith("--")}
    kept, dropping = [], False
    for arg in install:
        if arg.startswith("--"):
            dropping = arg.split("=", 1)[0] in named
        if not dropping:
            kept.append(arg)
    return [*kept, *own]


def option_value(args: Sequence[str], option: str) -> str | None:
    """The value `args` give `option` (`--option VALUE` or `--option=VALUE`; the last one given), or None."""
    value = None
    for arg, following in zip(args, [*args[1:], None]):
        if arg == option and following is not None and not following.startswith("--"):
            value = following
        elif arg.startswith(option + "="):
            value = arg.split("=", 1)[1]
    return value


def with_own_kwargs(install: Sequence[str], own: Sequence[str]) -> list[str]:
    """Engine options (`key=value`) of verl's rollout: the install's less every key `own` sets, then `own`."""
    named = {kv.split("=", 1)[0] for kv in own}
    return [kv for kv in install if kv.split("=", 1)[0] not in named] + list(own)


def served_dtype(model: str) -> str | None:
    """The dtype SGLang serves the checkpoint `model` in with `--dtype auto`: its config's, but float16 for a
    float32 checkpoint (bfloat16 for Gemma's), as SGLang's ModelConfig does; None for a model that is not a
    local checkpoint or names no dtype."""
    config = models.local_config(model)
    dtype = models.config_dtype(config)
    if dtype in ("float32", "float"):
        return "bfloat16" if str(config.get("model_type", "")).startswith("gemma") else "float16"
    return dtype


def model_args(args: Sequence[str], model: str) -> list[str]:
    """What a server with launch arguments `args` adds for `model` (see `running_cap`)."""
    return running_cap(args, models.vocab_size(model))


def running_cap(args: Sequence[str], vocab: int | None) -> list[str]:
    """Under the pytorch sampler, a cap on running requests that keeps its sort of a `vocab`-token
    distribution per request within `PYTORCH_SAMPLER_ELEMENTS` (a multiple of 64); nothing when `args`
    set the cap themselves, when SGLang's own ceiling is below it, or the vocabulary is unknown."""
    args = list(args)
    pytorch = any(a == "--sampling-backend" and b == "pytorch" for a, b in zip(args, args[1:]))
    if not pytorch or vocab is None or any(a.startswith("--max-running-requests") for a in args):
        return []
    cap = max(64, PYTORCH_SAMPLER_ELEMENTS // vocab // 64 * 64)
    return ["--max-running-requests", str(cap)] if cap < SGLANG_MAX_RUNNING else []


def graph_batch(games: int) -> int:
    """The largest decode batch a server that runs up to `games` requests at once captures a CUDA graph for:
    0 (SGLang's own) where SGLang's own covers them, else `games`, at most SGLang's ceiling of running
    requests. A decode step of a batch larger than the largest graph runs eagerly, the CPU launching each of
    its kernels, and a generation whose every game is in flight decodes at about that batch
    (bench/results/qwen_iteration_h200x2_2026-11-30/)."""
    return 0 if games <= SGLANG_GRAPH_BATCH else min(games, SGLANG_MAX_RUNNING)


def graph_args(args: Sequence[str], batch: int) -> list[str]:
    """What a server with launch arguments `args` adds for CUDA graphs up to `batch` (0: nothing); nothing
    where `args` choose the graphs' batch sizes themselves or turn CUDA graphs off."""
    own = any(arg.split("=", 1)[0] in GRAPH_OPTIONS for arg in args)
    return [] if own or batch <= 0 else ["--cuda-graph-max-bs", str(batch)]


def probe(python: str = sys.executable) -> dict[str, bool]:
    """Which of `PROBED` the Python `python` can import (by spec, nothing is imported)."""
    try:
        done = subprocess.run([python, "-c", _PROBE, *PROBED], capture_output=True, text=True, timeout=120, check=True)
    except (OSError, subprocess.SubprocessError) as err:
        raise click.ClickException(f"cannot probe the SGLang install with {python!r}: {err}") from None
    return json.loads(done.stdout)


# -- launching -------------------------------------------------------------------------------------


def launch_command(
    python: str, model: str, port: int, tp: int, args: Sequence[str] = (), host: str = "127.0.0.1"
) -> list[str]:
    """One SGLang server of `model` on `host`:`port` (this machine's loopback, or a cluster node's address)
    over `tp` GPUs, with launch arguments `args`."""
    where = ["--model-path", model, "--host", host, "--port", str(port), "--tp", str(tp)]
    return [python, "-m", "sglang.launch_server", *where, *args]


def router_command(
    python: str, port: int, workers: Sequence[str], metrics_port: int, args: Sequence[str] = ()
) -> list[str]:
    """An sglang_router on 127.0.0.1:`port` in front of the servers at `workers`, with router arguments
    `args`; its Prometheus metrics on `metrics_port` (the router's own default lets only one router run on
    a machine)."""
    router = [python, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(port)]
    router += ["--worker-urls", *workers]
    return router + ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port), *args]


# what SGLang logs when it found too little free GPU memory for its KV cache at start
NOT_ENOUGH_MEMORY = "Not enough memory"

# -- a running server's weights and memory ---------------------------------------------------------

# What a server keeps of the model it started with when it loads another's weights: the
# architecture (config.json), the generation defaults and the tokenizer. Two checkpoints whose files
# agree here can share a server.
SAME_CONFIG = ("config.json", "generation_config.json")
SAME_BYTES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt")
# Config keys that may differ between checkpoints one server takes in turn: where a checkpoint came from, and
# its dtype, since SGLang loads new weights into the served model's parameters in the dtype it started with
# (a run's float32 checkpoints swap into a server started on its initial model, and its evaluations keep one
# dtype).
CONFIG_NOTES = ("_name_or_path", "transformers_version", "dtype", "torch_dtype")


def swap_blocker(served: str, wanted: str) -> str | None:
    """Why a server of the checkpoint `served` cannot take `wanted`'s weights in place, or None when
    it can: both are directories whose config, generation defaults and tokenizer files agree. A
    config that is not JSON raises ValueError, naming the file."""
    old, new = Path(served), Path(wanted)
    for path in (old, new):
        if not (path / "config.json").is_file():
            return f"{path} has no config.json"
    for name in SAME_CONFIG + SAME_BYTES:
        a, b = old / name, new / name
        if a.is_file() != b.is_file():
            return f"{name} is in only one of {old} and {new}"
        if not a.is_file():
            continue
        if name in SAME_CONFIG:
            differ = _config(a) != _config(b)
        else:
            differ = a.read_bytes() != b.read_bytes()
        if differ:
            return f"their {name} differ"
    return None


def _config(path: Path) -> dict:
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not readable as JSON ({err})") from err
    return {key: value for key, value in config.items() if key not in CONFIG_NOTES}


def _json(url: str, body: dict | None, timeout: float) -> dict:
    """GET `url` (or POST `body` as JSON) and read its JSON answer; an HTTP error's JSON body too."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = json.loads(answer.read() or b"{}")
            return body if isinstance(body, dict) else {}  # SGLang's admin routes answer `null`
    except urllib.error.HTTPError as err:
        text = err.read().decode(errors="replace")
        try:
            answer = json.loads(text)
        except ValueError:
            answer = {"message": text.strip()}
        return {"success": False, "status": err.code, **(answer if isinstance(answer, dict) else {})}


def _refused(answer: dict) -> str | None:
    """Why an SGLang admin answer is a refusal (an HTTP error, `success: false`), or None."""
    if answer.get("success") is False or "error" in answer:
        error = answer.get("error")
        return (error.get("message") if isinstance(error, dict) else None) or answer.get("message") or str(answer)
    return None


def release_memory(url: str, timeout_s: float) -> str | None:
    """Have the SGLang server at `url` release its GPU memory: None once it did, else why not. A
    server started without --enable-memory-saver answers the request but keeps its memory, so
    /get_server_info must say the saver is on."""
    try:
        if not _json(f"{url}/get_server_info", None, 30).get("enable_memory_saver"):
            return "it was started without --enable-memory-saver"
        return _refused(_json(f"{url}/release_memory_occupation", {}, timeout_s))
    except (OSError, ValueError) as err:
        return str(err)


def resume_memory(url: str, timeout_s: float) -> str | None:
    """Have the SGLang server at `url` take back the GPU memory it released: None once it did, else why not."""
    try:
        return _refused(_json(f"{url}/resume_memory_occupation", {}, timeout_s))
    except (OSError, ValueError) as err:
        return str(err)


def load_weights(url: str, model: str, timeout_s: float) -> str | None:
    """Have the SGLang server at `url` load `model`'s weights in place (/update_weights_from_disk,
    which also flushes its prefix cache): None once /get_model_info names `model`, else why not."""
    try:
        answer = _json(f"{url}/update_weights_from_disk", {"model_path": model}, timeout_s)
        if not answer.get("success"):
            return answer.get("message") or f"answer {answer}"
        served = _json(f"{url}/get_model_info", None, 30).get("model_path")
    except (OSError, ValueError) as err:
        return str(err)
    return None if served == model else f"it reports model_path {served!r}"


# -- the command line ------------------------------------------------------------------------------


def _options(command):
    command = click.option("--python", default=sys.executable, show_default=True, help="The Python that runs SGLang.")(
        command
    )
    return click.option(
        "--cuda-graphs/--no-cuda-graphs", default=True, show_default=True, help="SGLang's CUDA graphs."
    )(command)


@click.group(help=__doc__)
def main() -> None:
    pass


def _print_choice(
    python: str,
    cuda_graphs: bool,
    who: str,
    arguments: Callable[[ServerChoice], list[str]],
    model: str | None = None,
    priority_scheduling: bool = False,
) -> None:
    """The choice for this install (and `model`) as `arguments` renders it on stdout, its reasons on stderr."""
    choice = choose(probe(python), cuda_graphs, priority_scheduling)
    rendered = arguments(choice)
    vocab = models.vocab_size(model) if model else None
    cap = running_cap(rendered, vocab)
    for reason in choice.reasons:
        click.echo(f"{who}: {reason}", err=True)
    if cap:
        click.echo(f"{who}: running requests: {cap[1]} (the pytorch sampler sorts {vocab} tokens for each)", err=True)
    click.echo(" ".join(rendered + cap))


@main.command("sglang-args", help="Print the launch_server arguments for this install (reasons on stderr).")
@_options
@click.option("--model", default=None, help="The checkpoint the server will load (its vocabulary sets a cap).")
@click.option(
    "--priority-scheduling/--no-priority-scheduling",
    default=False,
    show_default=True,
    help="Run waiting requests by the priority players send (their game's depth), deepest first.",
)
def sglang_args(python: str, cuda_graphs: bool, model: str | None, priority_scheduling: bool) -> None:
    _print_choice(python, cuda_graphs, "sglang server", ServerChoice.sglang_args, model, priority_scheduling)


@main.command("verl-overrides", help="Print verl's rollout-engine overrides for this install (reasons on stderr).")
@_options
def verl_overrides(python: str, cuda_graphs: bool) -> None:
    _print_choice(python, cuda_graphs, "verl rollout", ServerChoice.verl_overrides)


@main.command("swap")
@click.argument("url")
@click.argument("served")
@click.argument("model")
@click.option("--timeout", type=float, default=900.0, show_default=True, help="Seconds the load may take.")
def swap_command(url: str, served: str, model: str, timeout: float) -> None:
    """Have the server at URL, serving the checkpoint SERVED, load MODEL's weights in place; exit 1,
    saying why, when it cannot (another architecture or tokenizer, or the server refused)."""
    try:
        why = swap_blocker(served, model) or load_weights(url, model, timeout)
    except ValueError as err:
        why = str(err)
    if why is not None:
        raise click.ClickException(f"{url} keeps {served}: {why}")
    click.echo(f"{url} serves {model}")


if __name__ == "__main__":
    main()
