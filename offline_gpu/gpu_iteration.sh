#!/usr/bin/env bash
# GPU runbook: ONE self-play iteration at tiny scale through the top-level scripts, then a few online steps.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: offline_gpu/gpu_iteration.sh [--dry-run] [--help] MODEL_DIR OUT_DIR

On a GPU machine (after `source install_site.sh site_serve.tar.xz site_train.tar.xz`), with
MODEL_DIR a Hugging Face model directory:
  1. generate 256 games (GAMES_PER_INSTANCE=8) with SGLang serving MODEL_DIR, convert them
  2. train 3 offline GRPO steps on them (replay) and merge the checkpoint into a HF model
  3. generate 32 games with the merged model
  4. write game-initialization data and train 2 online steps (self-play loop, ROLLOUT_N=4)
Each step is bounded by `timeout` (STEP_TIMEOUT seconds, 1200) and logs to OUT_DIR/logs/;
OUT_DIR/summary.md lists each step's status, time and results. The repository goes on
PYTHONPATH; selfplay-gen and selfplay-convert run as `python3 -m ...`.
USAGE
}

DRY_RUN=0
args=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    -h|--help) usage; exit 0 ;;
    *) args+=("$arg") ;;
  esac
done
[[ ${#args[@]} -eq 2 ]] || { usage >&2; exit 2; }
MODEL_DIR=${args[0]}
OUT=${args[1]}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STEP_TIMEOUT=${STEP_TIMEOUT:-1200}
STEPS=${STEPS:-gen1 train_offline gen2 init train_online}   # a subset runs only those (e.g. across calls)
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$REPO
# the Pythons of `make gpu`'s environments where they exist, unless SELFPLAY_PYTHON, VERL_PYTHON, SGLANG_PYTHON name others
eval "$(python3 "$REPO/selfplay_gen/environments.py" exports)"
export SELFPLAY_GEN="$SELFPLAY_PYTHON -m selfplay_gen.cli" SELFPLAY_CONVERT="$SELFPLAY_PYTHON -m convert.cli"
# as in offline_gpu/verl_smoke.sh: no NVLink multicast, quiet verl, Ray logs not deduplicated
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 RAY_DEDUP_LOGS=0
export VERL_LOGGING_LEVEL=${VERL_LOGGING_LEVEL:-WARN}
# tiny scale
export GAMES_PER_INSTANCE=8 MAX_MOVES=${MAX_MOVES:-12} MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-128}
export MAX_PROMPT_LENGTH=1024 MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-2048}
export TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-16} MICRO_BATCH_SIZE=${MICRO_BATCH_SIZE:-4} SAVE_FREQ=1000
export GPU_MEMORY_UTILIZATION=0.4 ENFORCE_EAGER=True USE_REMOVE_PADDING=False PORT=${PORT:-30000}
# the raw SmolLM2-135M never agrees, so every game scores 0: the invalid-move penalty gives its groups signal
export TEMPERATURE=${TEMPERATURE:-0.7} INVALID_MOVE_PENALTY=${INVALID_MOVE_PENALTY:-0.5}
export MAX_RESPONSE_TOKENS=$MAX_RESPONSE_LENGTH
export CONVERT_ARGS="--max-prompt-tokens $MAX_PROMPT_LENGTH --max-response-tokens $MAX_RESPONSE_LENGTH --invalid-move-penalty $INVALID_MOVE_PENALTY"
dry=()
[[ $DRY_RUN -eq 0 ]] || dry=(--dry-run)

[[ $DRY_RUN -eq 1 ]] || mkdir -p "$OUT/logs"
SUMMARY=$OUT/summary.md
[[ $DRY_RUN -eq 1 || -f $SUMMARY ]] || printf '| step | status | seconds | result |\n|---|---|---|---|\n' > "$SUMMARY"

# step NAME RESULT_FUNCTION RESULT_ARG COMMAND...: run COMMAND under timeout, log it, add a summary line.
step() {
  local name=$1 result=$2 result_arg=$3 started=$SECONDS rc=0
  shift 3
  [[ " $STEPS " == *" $name "* ]] || return 0
  echo "=== $name: $*"
  if [[ $DRY_RUN -eq 1 ]]; then   # stage scripts print their own commands; anything else is only shown
    if [[ " $* " == *" --dry-run "* ]]; then "$@"; fi
    return 0
  fi
  timeout "$STEP_TIMEOUT" "$@" > "$OUT/logs/$name.log" 2>&1 || rc=$?
  local status=ok
  ((rc == 0)) || status="FAILED (exit $rc$( ((rc == 124)) && echo ', timeout'))"
  printf '| %s | %s | %d | %s |\n' "$name" "$status" $((SECONDS - started)) "$( ((rc == 0)) && "$result" "$result_arg")" >> "$SUMMARY"
  if ((rc != 0)); then
    tail -40 "$OUT/logs/$name.log" >&2
    echo "step $name failed (exit $rc); log: $OUT/logs/$name.log" >&2
    exit "$rc"
  fi
}

games() {  # games FILE: "N games, agreement A, reward R" from the generation summary
  "$SELFPLAY_PYTHON" -c 'import json, sys; s = json.load(open(sys.argv[1]))
print("%d games, agreement %.3f, mean reward %.3f" % (s["games"], s["agreement_rate"], s["mean_reward"]))' "$1"
}
checkpoint() {  # checkpoint DIR: the merged model and the last step
  echo "step $(cat "$1/checkpoints/latest_checkpointed_iteration.txt") -> $1/hf"
}
listing() { find "$1" -maxdepth 1 -type f -printf '%f '; }

step gen1 games "$OUT/gen1/games.summary.json" \
  env MODEL_NAME="$MODEL_DIR" NUM_GAMES="${GEN1_GAMES:-256}" OUT_DIR="$OUT/gen1" "$REPO/run_selfplay_generation.sh" "${dry[@]}"
step train_offline checkpoint "$OUT/train_offline" \
  env MODE=offline MODEL_PATH="$MODEL_DIR" TRAIN_FILES="$OUT/gen1/train.parquet" VAL_FILES="$OUT/gen1/train.parquet" \
  OUT_DIR="$OUT/train_offline" TOTAL_STEPS=3 "$REPO/run_selfplay_training.sh" "${dry[@]}"
step gen2 games "$OUT/gen2/games.summary.json" \
  env MODEL_NAME="$OUT/train_offline/hf" NUM_GAMES="${GEN2_GAMES:-128}" OUT_DIR="$OUT/gen2" "$REPO/run_selfplay_generation.sh" "${dry[@]}"
read -r -a gen_cmd <<< "$SELFPLAY_GEN"
step init listing "$OUT/online" \
  "${gen_cmd[@]}" init --num-train 32 --num-test 4 --seed 100000 --out-dir "$OUT/online" --overwrite
step train_online checkpoint "$OUT/train_online" \
  env MODE=online MODEL_PATH="$OUT/train_offline/hf" TRAIN_FILES="$OUT/online/train.parquet" \
  VAL_FILES="$OUT/online/test.parquet" OUT_DIR="$OUT/train_online" TOTAL_STEPS=2 ROLLOUT_N=4 TRAIN_BATCH_SIZE=8 \
  MINI_BATCH_SIZE=8 "$REPO/run_selfplay_training.sh" "${dry[@]}" "+selfplay.invalid_move_penalty=$INVALID_MOVE_PENALTY"
[[ $DRY_RUN -eq 1 ]] || cat "$SUMMARY"
