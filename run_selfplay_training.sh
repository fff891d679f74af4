#!/usr/bin/env bash
# verl training (GRPO with the selfplay_gen plugin: MODE=offline replays games, MODE=online plays them; or
# MODE=sft), then the last checkpoint merged into a Hugging Face directory. The work is `selfplay-gen train`
# (selfplay_gen/iterate/); this script runs it with the settings in its environment: the variables --help
# names beside each setting (MODE=sft MODEL_PATH=... ..., or SELFPLAY_MODE=sft), a config file (--config FILE)
# and dotted overrides (lr=1e-5). Keys outside the settings' sections go to verl as Hydra overrides (last, so
# they win); --dry-run prints the commands instead.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$REPO
# the Python of `make gpu`'s training environment where it exists, unless SELFPLAY_PYTHON names another
exec "${SELFPLAY_PYTHON:-$(python3 "$REPO/selfplay_gen/environments.py" python selfplay)}" -m selfplay_gen.cli train --script-env "$@"
