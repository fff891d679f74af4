"""What the benchmarks in bench/ share: one command-line shape and one results format.

Every benchmark is run the same way,

    python bench/NAME.py [--out DIR] [--quick] [its own options]

and writes DIR/NAME.json and DIR/NAME.md (DIR defaults to bench/results/, where the figures the
README quotes live). `--quick` picks settings a CPU finishes in a minute or two; `make bench` runs
every CPU benchmark that way into data/bench/, so a trial run never replaces a committed result.

The JSON holds {"benchmark", "command", "machine", "settings", "results"}; the markdown holds a
title, the command, the side-by-side table, notes and the machine. Results are shared in git, so
paths in them are written relative to the repository (or with ~ for the home directory): a
results file names no directory of the machine it ran on.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import click

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"

out_option = click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=RESULTS,
    show_default="bench/results",
    help="Directory for NAME.json and NAME.md.",
)
quick_option = click.option(
    "--quick", is_flag=True, help="Small settings a CPU finishes in a minute or two (what `make bench` runs)."
)


def portable(value: Any) -> Any:
    """`value` with every path inside the repository made relative to it and the home directory
    written as ~, in strings, lists and dicts alike."""
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [portable(v) for v in value]
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str):
        value = value.replace(str(REPO) + os.sep, "").replace(str(REPO), ".")
        home = os.path.expanduser("~")
        if home not in ("", "/"):
            value = value.replace(home, "~")
    return value


def machine() -> dict:
    """What the figures depend on: processor, cores, Python, the libraries measured, the load."""
    info: dict[str, Any] = {
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_1m": round(os.getloadavg()[0], 2),  # shared machines: other work slows what is measured
    }
    for module in ("numpy", "torch", "pyarrow", "aiohttp"):
        if module in sys.modules:
            info[module] = getattr(sys.modules[module], "__version__", None)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def write(
    name: str, out: Path, title: str, settings: dict, results: dict, table: str, notes: str = ""
) -> tuple[Path, Path]:
    """Write OUT/NAME.json and OUT/NAME.md in the shared format, each whole or not at all."""
    from selfplay_gen.atomic import write_atomic

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    command = portable(" ".join(["python", f"bench/{name}.py", *sys.argv[1:]]))
    about = machine()
    document = portable(
        {"benchmark": name, "command": command, "machine": about, "settings": settings, "results": results}
    )
    json_path, md_path = out / f"{name}.json", out / f"{name}.md"
    write_atomic(json_path, json.dumps(document, indent=2) + "\n")
    text = f"# {title}\n\n`{command}`\n\n{table}\n\n" + (f"{notes}\n\n" if notes else "")
    text += "Machine: " + ", ".join(f"{k} {v}" for k, v in about.items()) + "\n"
    write_atomic(md_path, portable(text))
    return json_path, md_path
