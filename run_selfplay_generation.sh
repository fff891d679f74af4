#!/usr/bin/env bash
# Generate self-play games with an SGLang server, convert them to verl parquet, and (optionally) evaluate the
# served model on held-out (and the game's other) instances with the same server. The work is
# `selfplay-gen generate` (selfplay_gen/iterate/); this script runs it with the settings in its environment:
# the variables --help names beside each setting (MODEL_NAME=... NUM_GAMES=256 ..., or SELFPLAY_NUM_GAMES=256),
# a config file (--config FILE) and dotted overrides (sampling.temperature=0.7).
# --dry-run prints the commands instead of running them.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$REPO
# the Python of `make gpu`'s training environment where it exists, unless SELFPLAY_PYTHON names another
exec "${SELFPLAY_PYTHON:-$(python3 "$REPO/selfplay_gen/environments.py" python selfplay)}" -m selfplay_gen.cli generate --script-env "$@"
