"""`selfplay-gen doctor`: can the GPU loop run on this machine, and what would make it faster?

One line per check, each `ok`, `warn` (runs, but slower or untested) or `FAIL` (the loop cannot run),
with the fix beside what is wrong, then a verdict; the exit status is 1 when a check failed. It asks:
the GPUs (nvidia-smi) with their memory, the driver and the CUDA it supports; each environment
(`selfplay_gen.environments`: the Pythons the stages run) with its torch and the versions of its
packages against the pins they were tested with; which SGLang kernels and backends each has and the
fallbacks it will start with (`selfplay_gen.serving`, the one home of that knowledge); the tools that
SGLang compiles kernels with on first use; the server ports; free disk; and a model directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click

from . import environments, serving
from .environments import Environment
from .iterate.config import Iteration, ServerSettings

GIB = 1 << 30
# free disk below which a run cannot hold a stage's checkpoints (fail), or may run out over iterations (warn)
DISK_FAIL_GIB = 10
DISK_WARN_GIB = 50
# the packages whose version says most about whether the stack runs as tested
CORE = ("torch", "sglang", "sglang-kernel", "flashinfer-python", "transformers", "verl", "ray")
WHAT_NEEDS = {"serve": "sglang", "train": "verl"}
# the Python the inspection runs in each environment: versions by metadata (nothing heavy imported but
# torch, for its CUDA build and the GPUs it sees), and libnuma, which sgl-kernel's ops link against
_INSPECT = """
import ctypes, importlib.metadata as md, json, platform, sys
out = {"python": platform.python_version(), "executable": sys.executable, "versions": {}}
for name in sys.argv[1:]:
    try:
        out["versions"][name] = md.version(name)
    except md.PackageNotFoundError:
        pass
try:
    import torch
    out["torch"] = {"cuda": torch.version.cuda, "available": torch.cuda.is_available(),
                    "devices": torch.cuda.device_count()}
except Exception as err:
    out["torch_error"] = f"{type(err).__name__}: {err}"
try:
    ctypes.CDLL("libnuma.so.1")
    out["libnuma"] = True
except OSError:
    out["libnuma"] = False
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    name: str
    status: str  # "ok" | "warn" | "FAIL"
    detail: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.status:<4}  {self.name:<22}  {self.detail}" + (f"  -> fix: {self.fix}" if self.fix else "")


def ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def warn(name: str, detail: str, fix: str = "") -> Check:
    return Check(name, "warn", detail, fix)


def fail(name: str, detail: str, fix: str = "") -> Check:
    return Check(name, "FAIL", detail, fix)


def _run(command: list[str], timeout: float = 60) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None


# --------------------------------------------------------------------------- the machine


def gpus() -> tuple[list[Check], str | None]:
    """A line per GPU and one for the driver; the CUDA version the driver supports (None: unknown)."""
    if shutil.which("nvidia-smi") is None:
        return [
            fail("gpu", "no nvidia-smi: no NVIDIA driver here", "a machine with NVIDIA GPUs and their driver")
        ], None
    query = "index,name,memory.total,memory.used,driver_version"
    listed = _run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"])
    if listed is None or listed.returncode != 0:
        said = (listed.stderr or listed.stdout).strip() if listed else "did not answer"
        return [fail("gpu", f"nvidia-smi failed: {said}", "check the driver (nvidia-smi must list the GPUs)")], None
    checks, drivers = [], set()
    for row in filter(None, (line.strip() for line in listed.stdout.splitlines())):
        try:
            index, name, total, used, driver = (field.strip() for field in row.split(","))
            free = int(total) - int(used)
        except ValueError:
            return [fail("gpu", f"nvidia-smi said {row!r}", "check the driver (nvidia-smi must list the GPUs)")], None
        drivers.add(driver)
        checks.append(ok(f"gpu {index}", f"{name}, {int(total)} MiB, {free} MiB free"))
    if not checks:
        return [fail("gpu", "nvidia-smi lists no GPU", "a machine with NVIDIA GPUs")], None
    header = _run(["nvidia-smi"])
    found = re.search(r"CUDA Version:\s*([\d.]+)", header.stdout) if header else None
    cuda = found.group(1) if found else None
    checks.append(ok("driver", f"{', '.join(sorted(drivers))}, CUDA {cuda or 'unknown'}"))
    return checks, cuda


def compilers() -> Check:
    """SGLang compiles small CUDA kernels on a server's first start, and flashinfer its own without its
    prebuilt kernels: with nvcc, a host C++ compiler and ninja."""
    missing = [tool for tool in ("nvcc", "c++", "ninja") if shutil.which(tool) is None]
    if missing:
        return warn(
            "compilers",
            f"not on PATH: {', '.join(missing)} (SGLang compiles kernels with them on a server's first start)",
            "the CUDA toolkit's bin/ on PATH, a C++ compiler and ninja",
        )
    return ok("compilers", "nvcc, c++ and ninja on PATH")


def ports(port: int) -> Check:
    """The server's port and its partner's (PORT + 1), as `iterate` starts them."""
    taken = []
    for candidate in (port, port + 1):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", candidate))
            except OSError:
                taken.append(candidate)
    if taken:
        return fail(
            "ports",
            f"in use: {', '.join(map(str, taken))}",
            "stop what listens there, or give another PORT (--port)",
        )
    return ok("ports", f"{port} and {port + 1} free")


def disk(where: Path) -> Check:
    """Free space where the run writes (checkpoints, merged models, games)."""
    probe = where
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free / GIB
    detail = f"{free:.0f} GiB free at {where}"
    if free < DISK_FAIL_GIB:
        return fail("disk", detail, f"at least {DISK_FAIL_GIB} GiB free (checkpoints of one stage)")
    if free < DISK_WARN_GIB:
        return warn("disk", detail, f"{DISK_WARN_GIB} GiB or more for several iterations' checkpoints")
    return ok("disk", detail)


def model(path: Path) -> Check:
    """A Hugging Face model directory SGLang and verl can load: its config, every weight file its index
    names, a tokenizer and a chat template."""
    if not (path / "config.json").is_file():
        return fail("model", f"{path}: no config.json", "a Hugging Face model directory (save_pretrained)")
    try:
        json.loads((path / "config.json").read_text())
    except ValueError as err:
        return fail("model", f"{path / 'config.json'}: not JSON ({err})", "a complete copy of the model")
    missing = []
    index = next(iter(sorted(path.glob("*.safetensors.index.json"))), None)
    if index is not None:
        try:
            shards = set(json.loads(index.read_text())["weight_map"].values())
        except (ValueError, KeyError, AttributeError) as err:
            return fail("model", f"{index}: no weight_map ({err})", "a complete copy of the model")
        missing += sorted(shard for shard in shards if not (path / shard).is_file())
    elif not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        missing.append("weights (*.safetensors)")
    if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer.model", "vocab.json")):
        missing.append("tokenizer (tokenizer.json)")
    template = (path / "chat_template.jinja").is_file()
    if not template and (path / "tokenizer_config.json").is_file():
        try:
            template = "chat_template" in json.loads((path / "tokenizer_config.json").read_text())
        except ValueError:
            template = False
    if not template:
        missing.append("chat template (chat_template.jinja or tokenizer_config.json's chat_template)")
    if missing:
        return fail("model", f"{path}: missing {', '.join(missing)}", "a complete copy of the model")
    return ok("model", f"{path}: config, weights, tokenizer and chat template")


# --------------------------------------------------------------------------- an environment


def resolve(env: Environment) -> tuple[str, str]:
    """The Python that runs `env`'s stages, and how it was found."""
    given = os.environ.get(env.variable)
    if given:
        return given, f"from {env.variable}"
    python = env.default_python()
    return python, ("made by make gpu" if python != "python3" else "python3: no .venv-" + env.name)


def inspect(python: str, names: list[str]) -> dict | None:
    done = _run([python, "-c", _INSPECT, *names], timeout=300)
    if done is None or done.returncode != 0:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def environment(env: Environment, driver_cuda: str | None, have_gpus: bool) -> Iterator[Check]:
    """`env`'s Python, torch, pinned versions, and SGLang's kernels and fallbacks there."""
    python, how = resolve(env)
    name = env.name
    make = "make gpu (or make gpu WHEELHOUSE=DIR on a machine without an index)"
    pins = env.pins(with_kernels=False)
    found = inspect(python, [*pins, "torch"])
    if found is None:
        yield fail(name, f"{python} ({how}) does not run", make)
        return
    tested = ".".join(map(str, environments.TESTED_PYTHON))
    line = f"{found['executable']} ({how}), Python {found['python']}"
    yield ok(name, line) if found["python"].startswith(tested + ".") else warn(name, line + f", tested: {tested}", make)
    versions = {environments.normalize(k): v for k, v in found["versions"].items()}
    torch = versions.get("torch")
    if torch is None or "torch" not in found:
        yield fail(f"{name} torch", found.get("torch_error", "not installed"), make)
    else:
        info = found["torch"]
        detail = f"{torch}, CUDA {info['cuda']}, sees {info['devices']} GPU(s)"
        base = environments.read_base_torch()
        if info["cuda"] is None:
            yield fail(f"{name} torch", detail + " (a CPU build)", f"torch {base} built for CUDA ({make})")
        elif driver_cuda and _version(info["cuda"]) > _version(driver_cuda):
            yield fail(
                f"{name} torch",
                detail + f": built for a newer CUDA than the driver's {driver_cuda}",
                f"a driver for CUDA {info['cuda']}, or a torch built for CUDA {driver_cuda}",
            )
        elif have_gpus and not info["available"]:
            yield fail(
                f"{name} torch", detail + ": CUDA is not available to it", "check the driver and CUDA_VISIBLE_DEVICES"
            )
        elif torch.split("+")[0] != base:
            yield warn(f"{name} torch", detail + f"; tested: {base}", make)
        else:
            yield ok(f"{name} torch", detail)
    missing = [package for package in pins if package not in versions]
    other = {p: versions[p] for p in pins if p in versions and versions[p] != pins[p]}
    needed = WHAT_NEEDS[name]
    if missing:
        yield fail(f"{name} packages", f"missing {len(missing)} of {len(pins)}: {listing(missing)}", make)
    elif other:
        core = [p for p in other if p in CORE]
        listed = listing(
            [f"{p} {v} (tested {pins[p]})" for p, v in sorted(other.items(), key=lambda kv: kv[0] not in core)]
        )
        yield warn(f"{name} packages", f"{len(other)} of {len(pins)} not as tested: {listed}", make)
    else:
        yield ok(f"{name} packages", f"all {len(pins)} as tested ({needed} {pins[environments.normalize(needed)]})")
    if "sglang" not in versions:
        return
    if not found["libnuma"]:
        yield fail(
            f"{name} libnuma",
            "libnuma.so.1 does not load (sgl-kernel's ops link against it)",
            "apt-get install libnuma1",
        )
    installed = serving.probe(python)
    for part in dict.fromkeys(serving.PROBED.values()):
        have = [module for module, what in serving.PROBED.items() if what == part and installed.get(module)]
        if have:
            yield ok(f"{name} kernels", f"{part}: {', '.join(have)}")
        else:
            yield warn(f"{name} kernels", f"{part}: missing", serving.FIXES[part])
    chosen = {fallback.setting: fallback for fallback in serving.fallbacks(installed)}
    for setting in ("attention", "sampling", "grammar"):
        if setting in chosen:
            fallback = chosen[setting]
            yield warn(f"{name} sglang {setting}", f"falls back to {fallback.used} ({fallback.lacking})", fallback.fix)
        else:
            yield ok(f"{name} sglang {setting}", "SGLang's own default")


def listing(names: list[str], shown: int = 8) -> str:
    """The first `shown` names, and how many more: a line stays readable with the whole stack missing."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])


# --------------------------------------------------------------------------- the report


def checks(port: int, run_dir: Path, model_dir: Path | None) -> Iterator[Check]:
    found, driver_cuda = gpus()
    yield from found
    have_gpus = any(check.status == "ok" and check.name.startswith("gpu ") for check in found)
    for env in environments.ENVIRONMENTS:
        yield from environment(env, driver_cuda, have_gpus)
    yield compilers()
    yield ports(port)
    yield disk(run_dir)
    yield model(model_dir) if model_dir else ok("model", "not checked (give --model DIR)")


def verdict(report: list[Check]) -> tuple[str, int]:
    failed = [check for check in report if check.status == "FAIL"]
    warned = [check for check in report if check.status == "warn"]
    if failed:
        return f"the loop cannot run: {len(failed)} check(s) failed ({', '.join(c.name for c in failed)})", 1
    if warned:
        return f"ready, with {len(warned)} warning(s): the loop runs, slower or with versions not tested together", 0
    return "ready: the loop runs as tested", 0


@click.command(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.option(
    "--port",
    envvar="PORT",
    type=int,
    default=ServerSettings().port,
    show_envvar=True,
    help="The servers' port (and + 1).",
)
@click.option(
    "--run-dir",
    envvar="RUN_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=Iteration().run_dir,
    show_envvar=True,
    help="Where the run writes (its free disk is checked).",
)
@click.option(
    "--model",
    "model_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="A model directory to check for completeness (config, weights, tokenizer, chat template).",
)
def doctor_command(port: int, run_dir: Path, model_dir: Path | None) -> None:
    """Check that the GPU loop can run here: GPUs, driver and CUDA, the serving and training environments
    against their tested pins, SGLang's kernels and the fallbacks it will use (each with its fix), the
    compilers, ports, disk and a model directory. One line per check; exit status 1 when the loop cannot run."""
    report = []
    for check in checks(port, run_dir, model_dir):
        click.echo(check.line())
        report.append(check)
    said, code = verdict(report)
    click.echo(f"verdict: {said}")
    raise SystemExit(code)
