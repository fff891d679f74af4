#!/usr/bin/env bash
# Self-play iterations: generate with the current model -> convert -> train (offline GRPO) -> merge -> next model.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: run_selfplay_iteration.sh [--dry-run] [--help] [HYDRA_OVERRIDE...]

Runs NUM_ITERATIONS iterations under RUN_DIR/iter_NNN/: gen/ (games.jsonl, games.summary.json,
train/val parquet, from run_selfplay_generation.sh serving the current model), train/
(checkpoints/ and the merged hf/ model, from run_selfplay_training.sh MODE=offline) and report/
(selfplay-gen eval). The next iteration serves iter_NNN/train/hf. An iteration whose DONE
marker exists is skipped, so a stopped run resumes where it stopped. After each iteration
RUN_DIR/summary.tsv and RUN_DIR/summary.md list iteration, games, agreement rate, mean
normalized reward, training steps and checkpoint. Extra arguments go to verl (Hydra overrides).
--dry-run prints every command instead of running it.

Environment (default):
  NUM_ITERATIONS      iterations (3)
  GAMES_PER_ITER      games generated per iteration (256)
  EPOCHS_PER_ITER     training epochs per iteration (1)
  INITIAL_MODEL       Hugging Face model directory of iteration 1 (required)
  RUN_DIR             run directory (data/iterations)
  MAX_PROMPT_LENGTH   prompt limit for conversion and training (1024)
  MAX_RESPONSE_LENGTH response limit for conversion and training (3072)
  CONVERT_ARGS        conversion arguments ("--max-prompt-tokens MAX_PROMPT_LENGTH
                      --max-response-tokens MAX_RESPONSE_LENGTH")
  SELFPLAY_PYTHON     python with selfplay_gen importable (python3)
  SELFPLAY_GEN        selfplay-gen command (selfplay-gen if on PATH, else $SELFPLAY_PYTHON -m selfplay_gen.cli)
Everything else (GAMES_PER_INSTANCE, TEMPERATURE, MAX_MOVES, PORT, TP, DP, SGLANG_PYTHON, N_GPUS,
TRAIN_BATCH_SIZE, LR, VERL_PYTHON, ...) is read by run_selfplay_generation.sh / run_selfplay_training.sh.
EOF
}

DRY_RUN=0
overrides=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    -h|--help) usage; exit 0 ;;
    *) overrides+=("$arg") ;;
  esac
done

NUM_ITERATIONS=${NUM_ITERATIONS:-3}
GAMES_PER_ITER=${GAMES_PER_ITER:-256}
EPOCHS_PER_ITER=${EPOCHS_PER_ITER:-1}
INITIAL_MODEL=${INITIAL_MODEL:-}
RUN_DIR=${RUN_DIR:-data/iterations}
export MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-1024}
export MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-3072}
export CONVERT_ARGS=${CONVERT_ARGS:---max-prompt-tokens $MAX_PROMPT_LENGTH --max-response-tokens $MAX_RESPONSE_LENGTH}
export SELFPLAY_PYTHON=${SELFPLAY_PYTHON:-python3}
if [[ -z ${SELFPLAY_GEN:-} ]]; then
  if command -v selfplay-gen > /dev/null; then SELFPLAY_GEN=selfplay-gen; else SELFPLAY_GEN="$SELFPLAY_PYTHON -m selfplay_gen.cli"; fi
fi
export SELFPLAY_GEN
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dry=()
[[ $DRY_RUN -eq 0 ]] || dry=(--dry-run)

STEP=setup
on_exit() {
  local rc=$?
  if ((rc != 0)); then echo "run_selfplay_iteration.sh: step '$STEP' failed (exit $rc)" >&2; fi
}
trap on_exit EXIT

# run STEP COMMAND...: print the command; run it unless --dry-run.
run() {
  STEP=$1; shift
  printf '+'; printf ' %q' "$@"; printf '\n'
  [[ $DRY_RUN -eq 1 ]] || "$@"
}

# stage STEP COMMAND...: print and run a stage script, which itself honours --dry-run.
stage() {
  STEP=$1; shift
  printf '+'; printf ' %q' "$@"; printf '\n'
  "$@"
}

# rows FILE: rows of a parquet file (0 if it is missing).
rows() {
  "$SELFPLAY_PYTHON" -c 'import sys, os, pyarrow.parquet as pq
print(pq.ParquetFile(sys.argv[1]).metadata.num_rows if os.path.exists(sys.argv[1]) else 0)' "$1"
}

# summary_row ITER DIR: one TSV line from the generation summary and the checkpoint directory.
summary_row() {
  "$SELFPLAY_PYTHON" - "$1" "$2" <<'PY'
import json, sys
from pathlib import Path
iteration, root = sys.argv[1], Path(sys.argv[2])
gen = json.loads((root / "gen" / "games.summary.json").read_text())
steps = (root / "train" / "checkpoints" / "latest_checkpointed_iteration.txt").read_text().strip()
print("\t".join([iteration, str(gen["games"]), f"{gen['agreement_rate']:.4f}", f"{gen['mean_normalized_reward']:.4f}",
                 steps, str(root / "train" / "checkpoints" / f"global_step_{steps}")]))
PY
}

# write_summary: RUN_DIR/summary.tsv and summary.md from the rows of finished iterations (atomic).
write_summary() {
  local header=$'iteration\tgames\tagreement_rate\tmean_normalized_reward\ttraining_steps\tcheckpoint'
  { echo "$header"; cat "$RUN_DIR"/iter_*/summary_row.tsv 2> /dev/null || true; } > "$RUN_DIR/summary.tsv.tmp"
  awk -F'\t' 'NR == 1 { print "| " $1 " | " $2 " | " $3 " | " $4 " | " $5 " | " $6 " |"; print "|---|---|---|---|---|---|"; next }
              { print "| " $1 " | " $2 " | " $3 " | " $4 " | " $5 " | " $6 " |" }' \
    "$RUN_DIR/summary.tsv.tmp" > "$RUN_DIR/summary.md.tmp"
  mv "$RUN_DIR/summary.tsv.tmp" "$RUN_DIR/summary.tsv"
  mv "$RUN_DIR/summary.md.tmp" "$RUN_DIR/summary.md"
}

[[ -n $INITIAL_MODEL ]] || { echo "set INITIAL_MODEL (a Hugging Face model directory)" >&2; exit 2; }
[[ $DRY_RUN -eq 1 ]] || mkdir -p "$RUN_DIR"
model=$INITIAL_MODEL
for ((i = 1; i <= NUM_ITERATIONS; i++)); do
  dir=$RUN_DIR/$(printf 'iter_%03d' "$i")
  if [[ -e $dir/DONE ]]; then
    echo "iteration $i: done already ($dir/DONE), skipped"
    model=$dir/train/hf
    continue
  fi
  echo "=== iteration $i of $NUM_ITERATIONS: model $model -> $dir"
  [[ $DRY_RUN -eq 1 ]] || mkdir -p "$dir"
  stage "iteration $i: generate" env MODEL_NAME="$model" NUM_GAMES="$GAMES_PER_ITER" OUT_DIR="$dir/gen" \
    "$HERE/run_selfplay_generation.sh" "${dry[@]}"
  val=$dir/gen/val.parquet
  if [[ $DRY_RUN -eq 0 && $(rows "$val") -eq 0 ]]; then
    echo "iteration $i: no validation rows in $val; validating on train.parquet" >&2
    val=$dir/gen/train.parquet
  fi
  stage "iteration $i: train" env MODE=offline MODEL_PATH="$model" TRAIN_FILES="$dir/gen/train.parquet" \
    VAL_FILES="$val" OUT_DIR="$dir/train" EPOCHS="$EPOCHS_PER_ITER" EXPERIMENT="iter_$i" \
    "$HERE/run_selfplay_training.sh" "${dry[@]}" "${overrides[@]}"
  read -r -a gen_cmd <<< "$SELFPLAY_GEN"
  run "iteration $i: eval" "${gen_cmd[@]}" eval --from-games "iter_$i=$dir/gen/games.jsonl" --out "$dir/report" \
    --append-to "$RUN_DIR/report"
  STEP="iteration $i: summary"
  if [[ $DRY_RUN -eq 0 ]]; then
    summary_row "$i" "$dir" > "$dir/summary_row.tsv"
    write_summary
    touch "$dir/DONE"                          # written last: the iteration is complete
  fi
  model=$dir/train/hf
done
STEP=finished
[[ $DRY_RUN -eq 1 ]] || cat "$RUN_DIR/summary.md"
echo "final model: $model"
