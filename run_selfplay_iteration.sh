#!/usr/bin/env bash
# Self-play iterations of any game: evaluate the initial model, warm-start it if it cannot play, then per
# iteration generate with the current model on new instances, convert, train and merge; every model is
# evaluated; checkpoints of a competitive game play each other (cross-play). The loop is
# `selfplay-gen iterate` (selfplay_gen/iterate/); this script runs it with the settings in its environment:
# the variables --help names beside each setting (TRAINER=filtered-bc NUM_ITERATIONS=2 ..., or
# SELFPLAY_NUM_ITERATIONS=2), a config file (--config RUN_DIR/config.yaml) and dotted overrides
# (trainers.grpo.lr=1e-5); keys outside the settings' sections go to verl (Hydra overrides); --dry-run prints
# every command instead of running it.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$REPO
# the Python of `make gpu`'s training environment where it exists, unless SELFPLAY_PYTHON names another
exec "${SELFPLAY_PYTHON:-$(python3 "$REPO/selfplay_gen/environments.py" python selfplay)}" -m selfplay_gen.cli iterate --script-env "$@"
