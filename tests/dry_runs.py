"""Reading a dry run's output (`selfplay-gen iterate|generate --dry-run`): the configuration files its
`play` and `eval` commands read, which it prints as the here-documents that write them."""

from __future__ import annotations

import re
import shlex

import yaml

WRITE = re.compile(r"^\+ mkdir -p \S+ && cat > (\S+) <<'EOF'$")


def configs(output: str) -> dict[str, dict]:
    """{path: the YAML written there} of every here-document in a dry run's output."""
    found: dict[str, dict] = {}
    lines = output.splitlines()
    for i, line in enumerate(lines):
        written = WRITE.match(line)
        if written:
            end = lines.index("EOF", i)
            found[shlex.split(written.group(1))[0]] = yaml.safe_load("\n".join(lines[i + 1 : end]))
    return found


def config_of(line: str, output: str) -> dict:
    """The configuration a printed command reads: its --config file, as the dry run wrote it."""
    words = shlex.split(line.removeprefix("+ "))
    return configs(output)[words[words.index("--config") + 1]]
