"""The GPU stack's two Pythons: the serving environment (SGLang) and the training environment (verl with
SGLang for its rollout, and the loop itself), which `make gpu` creates beside `.venv`, each with versions
tested together (the pins in gpu/requirements-*.txt). They are two because their pins conflict: SGLang
0.5.12 pins transformers 5.6.0, verl 0.9.1 wants below 5.11 and not 5.6.0.

The stages find them without a variable: SGLANG_PYTHON, VERL_PYTHON and SELFPLAY_PYTHON name other
Pythons, and unset, each defaults to its environment where it exists, else to `python3`.

Standard library only, so that it runs before any environment exists (`make gpu`) and from the shell
scripts, which ask it for their Python:

    python3 selfplay_gen/environments.py python selfplay    # or: eval "$(... exports)"
    python3 selfplay_gen/environments.py create [--wheelhouse DIR] [--python python3.12]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PINS = REPO / "gpu"
# installed into both environments where the index or wheelhouse has them: SGLang's fast kernels
KERNELS = "requirements-kernels.txt"
# what the pinned sets go on top of; installed (with dependencies) only where the base Python lacks torch
BASE = "requirements-base.txt"
# the Python the pins were built and tested for
TESTED_PYTHON = (3, 12)


@dataclass(frozen=True)
class Environment:
    """One of the GPU stack's environments: where it lives and which pins it holds."""

    name: str
    purpose: str
    variable: str  # the environment variable that names another Python for it
    requirements: tuple[str, ...]  # files under gpu/, installed in order: a later pin replaces an earlier one

    @property
    def path(self) -> Path:
        return REPO / f".venv-{self.name}"

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def default_python(self) -> str:
        """Its Python where `make gpu` created it, else `python3`."""
        return str(self.python) if self.python.exists() else "python3"

    def pins(self, with_kernels: bool = True) -> dict[str, str]:
        """The tested version of each package, by normalized name; a later file's pin wins."""
        out: dict[str, str] = {}
        for name in self.requirements + ((KERNELS,) if with_kernels else ()):
            out.update(read_pins(PINS / name))
        return out


SERVE = Environment("serve", "SGLang's servers", "SGLANG_PYTHON", ("requirements-serve.txt",))
TRAIN = Environment(
    "train",
    "verl's training with its SGLang rollout, and the loop",
    "VERL_PYTHON",
    ("requirements-serve.txt", "requirements-train.txt"),
)
ENVIRONMENTS = (SERVE, TRAIN)


def normalize(name: str) -> str:
    """A distribution name as packaging compares it (PEP 503)."""
    return "-".join(part for part in name.lower().replace("_", "-").replace(".", "-").split("-") if part)


def read_pins(path: Path) -> dict[str, str]:
    """NAME==VERSION lines of a requirements file (comments and blank lines skipped), by normalized name."""
    out = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        name, sep, version = text.partition("==")
        if not sep or not name.strip() or not version.strip():
            raise ValueError(f"{path}:{number}: {text!r} is not an exact pin NAME==VERSION")
        out[normalize(name)] = version.strip()
    return out


def sglang_python() -> str:
    return SERVE.default_python()


def verl_python() -> str:
    return TRAIN.default_python()


def selfplay_python() -> str:
    """The loop runs where verl does: the training environment holds selfplay-gen's needs and both stacks'."""
    return TRAIN.default_python()


DEFAULTS = {"serve": sglang_python, "train": verl_python, "selfplay": selfplay_python}
VARIABLES = {"SGLANG_PYTHON": sglang_python, "VERL_PYTHON": verl_python, "SELFPLAY_PYTHON": selfplay_python}


def exports() -> str:
    """Shell lines that give each variable its default where it is unset (`eval` in a script)."""
    return "".join(
        f'[ -n "${{{name}:-}}" ] || {name}={shlex.quote(function())}; export {name}\n'
        for name, function in VARIABLES.items()
    )


# --------------------------------------------------------------------------- creating them (make gpu)


def run(command: list[str]) -> None:
    print("+ " + " ".join(command), file=sys.stderr, flush=True)
    subprocess.run(command, check=True)


# what `make gpu` asks of the Python it makes the environments from
_BASE_PROBE = """
import importlib.metadata as m, json, site, sys
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return None
print(json.dumps({"python": list(sys.version_info[:2]), "torch": version("torch"), "pip": version("pip"),
                  "site": site.getsitepackages()}))
"""


@dataclass(frozen=True)
class Base:
    """The Python the environments are made from, and what it holds."""

    python: str
    version: tuple[int, int]
    torch: str | None
    pip: tuple[int, ...]
    site: tuple[str, ...]  # its site-packages directories

    @classmethod
    def of(cls, python: str) -> Base:
        done = subprocess.run([python, "-c", _BASE_PROBE], capture_output=True, text=True, check=True)
        found = json.loads(done.stdout)
        pip = tuple(int(part) for part in (found["pip"] or "0").split(".")[:2] if part.isdigit())
        return cls(python, tuple(found["python"]), found["torch"], pip, tuple(found["site"]))


def create(env: Environment, base: Base, wheelhouse: Path | None) -> None:
    """`env` as a venv of `base`. Where `base` has the tested torch the venv sees `base`'s packages
    behind its own (no download of torch and CUDA; `site.addsitedir` in a .pth file, which also works
    where `base` is itself a venv, as the GPU images' python3 is), else it gets requirements-base.txt.
    Then the pins with the kernels that are to be had, in one pip run (a later set's pin replacing an
    earlier one's), and this checkout on its path. With `wheelhouse`, from that directory alone (no
    index). The venv has no pip of its own: `base`'s pip installs into it (`pip --python`)."""
    tested_torch = read_base_torch()
    reuse = base.torch is not None and base.torch.split("+")[0] == tested_torch
    print(
        f"environments: {env.name} ({env.purpose}) at {env.path}: "
        + (f"reusing {base.python}'s torch {base.torch}" if reuse else f"torch {tested_torch} (requirements-base.txt)"),
        file=sys.stderr,
    )
    run([base.python, "-m", "venv", "--clear", "--without-pip", str(env.path)])
    site = subprocess.run(
        [str(env.python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # this checkout importable, as an editable install makes it (without a build backend in the environment)
    lines = [str(REPO)] + [f"import site; site.addsitedir({path!r})" for path in (base.site if reuse else ())]
    (Path(site) / "selfplay_gen.pth").write_text("\n".join(lines) + "\n")
    source = ["--no-index", "--find-links", str(wheelhouse)] if wheelhouse else []
    pip = [base.python, "-m", "pip", "--python", str(env.python), "install", "--disable-pip-version-check", *source]
    if not reuse:
        run([*pip, "-r", str(PINS / BASE)])
    kernels = read_pins(PINS / KERNELS)
    lacking = {
        name: version for name, version in kernels.items() if wheelhouse and not has_wheel(wheelhouse, name, version)
    }
    pins = {**env.pins(with_kernels=False), **{k: v for k, v in kernels.items() if k not in lacking}}
    try:
        install(pip, pins)
    except subprocess.CalledProcessError:
        if not set(pins) & set(kernels):
            raise
        install(pip, env.pins(with_kernels=False))  # the index may lack a kernel: the stack without them
        lacking = kernels
    for name, version in lacking.items():
        print(f"environments: {name}=={version} is not to be had; SGLang falls back without it", file=sys.stderr)


def install(pip: list[str], pins: dict[str, str]) -> None:
    """The pins in one pip run, without dependency resolution (they are the whole tested set)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", prefix="pins-") as listed:
        listed.write("".join(f"{name}=={version}\n" for name, version in pins.items()))
        listed.flush()
        run([*pip, "--no-deps", "-r", listed.name])


def has_wheel(directory: Path, name: str, version: str) -> bool:
    """Whether `directory` holds a wheel of `name` at `version` (wheel file names spell names with `_`)."""
    prefix = f"{normalize(name).replace('-', '_')}-{version}-"
    return any(path.name.lower().startswith(prefix) for path in directory.glob("*.whl"))


def read_base_torch() -> str:
    for line in (PINS / BASE).read_text().splitlines():
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep and normalize(name) == "torch":
            return version.strip()
    raise ValueError(f"{PINS / BASE}: no torch==VERSION line")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    which = commands.add_parser("python", help="print the Python a stage runs by default")
    which.add_argument("stage", choices=sorted(DEFAULTS))
    commands.add_parser("exports", help="print shell lines that default SGLANG_PYTHON, VERL_PYTHON, SELFPLAY_PYTHON")
    made = commands.add_parser("create", help="create both environments, then run `selfplay-gen doctor` in them")
    made.add_argument("--python", default="python3", help="the Python the environments are made from")
    made.add_argument("--wheelhouse", type=Path, help="install from this directory alone (make wheelhouse), no index")
    made.add_argument("--no-doctor", action="store_true", help="do not run the doctor at the end")
    args = parser.parse_args(argv)
    if args.command == "python":
        print(DEFAULTS[args.stage]())
        return 0
    if args.command == "exports":
        print(exports(), end="")
        return 0
    if args.wheelhouse is not None and not args.wheelhouse.is_dir():
        parser.error(f"--wheelhouse {args.wheelhouse}: no such directory")
    base = Base.of(args.python)
    if base.pip < (22, 3):
        parser.error(f"{args.python}'s pip is older than 22.3 (no --python): {args.python} -m pip install -U pip")
    if base.version != TESTED_PYTHON:
        print(
            f"environments: WARNING: {args.python} is Python {'.'.join(map(str, base.version))}; the pins are built "
            f"and tested for {'.'.join(map(str, TESTED_PYTHON))} (give GPU_PYTHON=python3.12)",
            file=sys.stderr,
        )
    try:
        for env in ENVIRONMENTS:
            create(env, base, args.wheelhouse)
    except subprocess.CalledProcessError as err:
        print(f"environments: failed: {' '.join(map(str, err.cmd))} (exit {err.returncode})", file=sys.stderr)
        return 1
    if args.no_doctor:
        return 0
    return subprocess.run([str(TRAIN.python), "-m", "selfplay_gen.cli", "doctor"]).returncode


if __name__ == "__main__":
    sys.exit(main())
