#!/usr/bin/env bash
# Online GRPO with LoRA against filtered behaviour cloning and offline GRPO at equal GPU time, from the same
# warm start (the embedded SmolLM2-135M one, or WARM_MODEL), on the matching game: dev reward against GPU
# minutes for each.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: offline_gpu/gpu_rl.sh [--dry-run] [--detach] [--help] MODEL_DIR ROOT [PHASE...]

On a GPU machine (after `source offline_gpu/gpu_setup.sh`, so MODEL_DIR is $MODEL, the raw
SmolLM2-135M-Instruct), each trainer gets BUDGET_MIN (12) minutes of GPU time from the same warm start:
  warm     ROOT/embedded: the embedded warm start (selfplay_gen/data/warm_start) folded into MODEL_DIR,
           evaluated on dev (DEV_INSTANCES (64) x DEV_GAMES (8)) and the final splits, FINAL_SPLITS ("test":
           256 x 4; "test human" adds the 134 human instances x HUMAN_GAMES (2), a larger model's target),
           on which every trainer's last model is read too: the curves' point at minute 0. WARM_MODEL, a
           model directory (another warm start, e.g. a `gpu_learning.sh` run's ROOT/NAME/warm/train/hf),
           takes the embedded one's place; MAX_NEW_TOKENS (512) a turn in every game and rollout, more for
           a warm start on a teacher plan with long turns (selfplay-gen iterate --help, warm.teacher_plan)
  online   online GRPO (verl's self-play loop, `selfplay-gen train --mode online`), LoRA rank RL_LORA_RANK
           (32) at RL_LR (1e-4), ONLINE_INSTANCES (16) instances x 2 seats x 8 games a step in two updates,
           clip-higher 0.28; verl validates on the dev instances every ONLINE_TEST_FREQ (4) steps
           (a step of the 135M model took about 12 s with 16 instances, after about 2.5 minutes of start-up:
           bench/results/fsdp2_h200x2_2026-11-26/). verl saves every ONLINE_SAVE_EVERY (1) steps (a save
           writes the whole model and its optimizer: a larger model may save every few); kept are the regular
           checkpoints, every ONLINE_SAVE_FREQ (2, a multiple of it) steps, and the newest, so the steps after
           the last regular one are not lost when the budget stops verl (its start-up counts). verl runs in a
           Ray of its own (RAY_TMPDIR /tmp/ray_PORT), stopped alone: another run's Ray on the machine lives on.
           RL_TEMPERATURE (0.7) is the rollout's sampling temperature (evaluations stay at 0.7),
           ROLLOUT_PARTNER_TEMPERATURE the untrained seat's (0: greedy; default: the rollout's); ONLINE_ARGS
           are more verl overrides (Hydra), e.g. actor_rollout_ref.actor.entropy_coeff=0.001.
           The last checkpoint is merged and evaluated first, on dev and the final splits, so a run cut short
           still has its result; then each regular one (every ONLINE_SAVE_FREQ steps) on dev at the GPU minute
           it was saved
  fbc      filtered BC iterations (`selfplay-gen iterate`, TRAINER=filtered-bc, FBC_GAMES (1024) games an
           iteration, LoRA r16 at FBC_LR (1e-3); RL_LR and RL_LORA_RANK are online GRPO's alone) in one run
           that keeps its SGLang server between iterations and starts another only while one as long as the
           last ends within the budget (TIME_BUDGET_MIN), counting each iteration's generation, conversion,
           training and merge, not its evaluations; each iteration's model on dev, the last on the final splits
  grpo     offline GRPO iterations, as fbc: TRAINER=grpo (the games replayed by verl, which starts in each
           iteration and counts), GRPO_GAMES (512) games an iteration, LoRA r GRPO_LORA_RANK (16) at
           GRPO_LR (5e-5), verl in this run's Ray
  both     the trainers of TRAINERS ("fbc online"; "fbc online grpo" for all three) at once, a whole GPU
           each (one run's wall time): the first GPUs of CUDA_VISIBLE_DEVICES in order (0,1,... when unset;
           e.g. 2,3 on a larger machine beside other work), the first evaluating the warm start before its
           trainer; each logs to ROOT/logs/TRAINER_gpu.log
  collect  ROOT/results/rl_curve.{csv,json,md,png} (bench/analysis/rl_curve.py): trainer, GPU minutes,
           split, reward and its 95% interval (bootstrap over instances), the paired gain over the warm start;
           online GRPO's steps from verl's log (online_steps.csv, online_curves.png, and in rl_curve.md the
           slope of training reward, entropy and response length over the steps)
Default phases: warm online fbc collect; both collect where nvidia-smi lists two GPUs or more. Every
phase resumes where it stopped: online GRPO from verl's last checkpoint with the budget left, filtered BC
and offline GRPO from their last finished iteration; evaluations once.
Results and logs are copied to $OUT (at most 8 files) when OUT is set. --detach runs the phases in the
background (setsid; log ROOT/logs/gpu_rl.log; ROOT/DONE or ROOT/FAILED at the end), for budgets longer
than one call; call again without --detach later to go on or to collect (a foreground run cut off by
its call leaves its trainer running: use --detach). The whole run takes about 2 x BUDGET_MIN (one
BUDGET_MIN with `both`) plus 15-20 minutes of start-ups and evaluations on an H100; ONLINE_SAVE_FREQ=8
evaluates fewer checkpoints.
LoRA learning rate: LoRA wants about 10x full fine-tuning's rate (Schulman et al., "LoRA Without
Regret", 2025, RL included); full-fine-tuning GRPO here learned at 1e-5 and not below (bf16 rounding),
so 1e-4 with alpha = 2 x rank.
USAGE
}

DRY_RUN=0 DETACH=0
args=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    --detach) DETACH=1 ;;
    -h|--help) usage; exit 0 ;;
    *) args+=("$arg") ;;
  esac
done
((${#args[@]} >= 2)) || { usage >&2; exit 2; }
MODEL_DIR=${args[0]}
ROOT=${args[1]}
PHASES=("${args[@]:2}")
if ((!${#PHASES[@]})); then
  PHASES=(warm online fbc collect)
  (($(nvidia-smi -L 2> /dev/null | wc -l) < 2)) || PHASES=(both collect)
fi
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if ((DETACH && !DRY_RUN)); then
  mkdir -p "$ROOT/logs"
  rm -f "$ROOT/DONE" "$ROOT/FAILED"
  # shellcheck disable=SC2016  # $0 and $@ belong to the inner shell
  setsid nohup bash -c '"$@" && touch "$0/DONE" || touch "$0/FAILED"' "$ROOT" \
    bash "$REPO/offline_gpu/gpu_rl.sh" "$MODEL_DIR" "$ROOT" "${PHASES[@]}" > "$ROOT/logs/gpu_rl.log" 2>&1 < /dev/null &
  echo "gpu_rl: running in the background (pid $!), log $ROOT/logs/gpu_rl.log"
  exit 0
fi

BUDGET_S=$((${BUDGET_MIN:-12} * 60))
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$REPO
# the Pythons of `make gpu`'s environments where they exist, unless SELFPLAY_PYTHON, VERL_PYTHON, SGLANG_PYTHON name others
eval "$(python3 "$REPO/selfplay_gen/environments.py" exports)"
PY=$SELFPLAY_PYTHON
export SELFPLAY_GEN="$PY -m selfplay_gen.cli" SELFPLAY_CONVERT="$PY -m convert.cli"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 RAY_DEDUP_LOGS=0
export VERL_LOGGING_LEVEL=${VERL_LOGGING_LEVEL:-WARN}
export CUDA_DEVICE_ORDER=${CUDA_DEVICE_ORDER:-PCI_BUS_ID}  # nvidia-smi's numbering, which gpu_idle reads
WARM=${WARM_MODEL:-$ROOT/embedded/warm/train/hf}
RESULTS=$ROOT/results
POINTS=$RESULTS/points.tsv
DEV=(--instances dev --num-instances "${DEV_INSTANCES:-64}" -k "${DEV_GAMES:-8}")
TEST=(--instances test --num-instances "${TEST_INSTANCES:-256}" -k "${TEST_GAMES:-4}")
HUMAN=(--instances human -k "${HUMAN_GAMES:-2}")
# the splits of the final readings (the warm start's and each trainer's last model), beside dev
read -r -a FINAL <<< "${FINAL_SPLITS:-test}"
((${ONLINE_SAVE_FREQ:-2} % ${ONLINE_SAVE_EVERY:-1} == 0)) || {
  echo "gpu_rl: ONLINE_SAVE_FREQ ${ONLINE_SAVE_FREQ:-2} is no multiple of ONLINE_SAVE_EVERY ${ONLINE_SAVE_EVERY:-1}" >&2
  exit 2
}
for split in "${FINAL[@]}"; do
  [[ $split == test || $split == human ]] \
    || { echo "gpu_rl: FINAL_SPLITS: unknown split '$split' (test, human)" >&2; exit 2; }
done
# as selfplay-gen iterate evaluates (its filtered-BC points), so every point is read the same way
export MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-512}  # online GRPO's rollouts read it too
SAMPLING=(--temperature 0.7 --max-moves 30 --max-new-tokens "$MAX_NEW_TOKENS" --max-response-tokens 3072)
PORT=${PORT:-30000}
# this run's server: its pid and model in files named by its port, so runs on other GPUs keep their own
SERVER=$ROOT/logs/sglang_$PORT
[[ $DRY_RUN -eq 1 ]] || mkdir -p "$ROOT/logs" "$RESULTS"

run_cmd() {
  printf '+'; printf ' %q' "$@"; printf '\n'
  [[ $DRY_RUN -eq 1 ]] || "$@"
}

# serve MODEL: SGLang alone on the GPU (the project's launch arguments), in its own session.
serve() {
  local args
  read -r -a args <<< "$("$PY" -m selfplay_gen.serving sglang-args --python "$SGLANG_PYTHON" --model "$1")"
  echo "+ $SGLANG_PYTHON -m sglang.launch_server --model-path $1 --port $PORT ${args[*]}"
  [[ $DRY_RUN -eq 0 ]] || return 0
  setsid nohup "$SGLANG_PYTHON" -m sglang.launch_server --model-path "$1" --host 127.0.0.1 --port "$PORT" \
    --mem-fraction-static 0.8 "${args[@]}" > "$SERVER.log" 2>&1 < /dev/null &
  echo $! > "$SERVER.pid"
  echo "$1" > "$SERVER.model"
  until curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; do
    sleep 2
    kill -0 "$(cat "$SERVER.pid")" 2> /dev/null || { tail -20 "$SERVER.log" >&2; return 1; }
  done
}

# serving MODEL: whether this run's server is up with MODEL.
serving() {
  [[ $DRY_RUN -eq 0 && -f $SERVER.model && $(cat "$SERVER.model") == "$1" ]] || return 1
  curl -sf "http://127.0.0.1:$PORT/health" > /dev/null
}

# unserve: stop the server's process group, until the GPU memory is free again.
unserve() {
  [[ $DRY_RUN -eq 0 && -f $SERVER.pid ]] || return 0
  local pid
  pid=$(cat "$SERVER.pid")
  kill -- "-$pid" 2> /dev/null || true
  for _ in $(seq 60); do kill -0 "$pid" 2> /dev/null || break; sleep 1; done
  kill -9 -- "-$pid" 2> /dev/null || true
  rm -f "$SERVER.pid" "$SERVER.model"
  gpu_idle
}

# swap MODEL: the running server loads MODEL's weights in place, where MODEL is a checkpoint like the one
# it serves (seconds instead of a restart's minute or more); fails, saying why, otherwise.
swap() {
  [[ $DRY_RUN -eq 0 && -f $SERVER.model ]] || return 1
  "$PY" -m selfplay_gen.serving swap "http://127.0.0.1:$PORT" "$(cat "$SERVER.model")" "$1" || return 1
  echo "$1" > "$SERVER.model"
}

# evaluate TRAINER MINUTES MODEL LABEL DIR SPLIT...: MODEL on each SPLIT (dev, test, human) into DIR/SPLIT, once;
# each reading becomes a point of the curve. The server stays up for the next evaluation (`unserve`
# before anything else needs the GPU).
evaluate() {
  local trainer=$1 minutes=$2 model=$3 label=$4 dir=$5 split size
  shift 5
  for split in "$@"; do
    if [[ ! -e $dir/$split/metrics.json ]]; then
      serving "$model" || swap "$model" || { unserve; serve "$model"; }
      case $split in
        dev) size=("${DEV[@]}") ;;
        test) size=("${TEST[@]}") ;;
        human) size=("${HUMAN[@]}") ;;
      esac
      run_cmd "$PY" -m selfplay_gen.cli eval --backend sglang --base-url "http://127.0.0.1:$PORT" --model "$model" \
        "${SAMPLING[@]}" "${size[@]}" --label "$label" --out "$dir/$split" --resume --quiet
    fi
    point "$trainer" "$minutes" "$split" "$dir/$split/metrics.json"
  done
}

# point TRAINER MINUTES SPLIT METRICS: one row of ROOT/results/points.tsv (once per evaluation).
point() {
  [[ $DRY_RUN -eq 0 ]] || return 0
  grep -qF "$4" "$POINTS" 2> /dev/null || printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$POINTS"
}

# minutes SECONDS: as a decimal number of minutes
minutes() { awk -v s="$1" 'BEGIN { printf "%.2f", s / 60 }'; }

# gpu_idle: wait until no process holds this run's GPUs (CUDA_VISIBLE_DEVICES's, as nvidia-smi numbers them
# with CUDA_DEVICE_ORDER=PCI_BUS_ID; all of them when it is unset); one that still does after a minute is a
# leftover of this run's (a stopped trainer's rollout engine, a server) and is stopped by its pid.
gpu_idle() {
  [[ $DRY_RUN -eq 0 ]] && command -v nvidia-smi > /dev/null || return 0
  local pid mine=()
  [[ -z ${CUDA_VISIBLE_DEVICES:-} ]] || mine=(-i "$CUDA_VISIBLE_DEVICES")
  for _ in $(seq 30); do
    [[ -n $(nvidia-smi "${mine[@]}" --query-compute-apps=pid --format=csv,noheader 2> /dev/null) ]] || return 0
    sleep 2
  done
  for pid in $(nvidia-smi "${mine[@]}" --query-compute-apps=pid --format=csv,noheader 2> /dev/null); do
    echo "gpu_rl: stopping process $pid, still on the GPU" >&2
    kill -9 "$pid" 2> /dev/null || true
  done
}

# this run's Ray (its own temporary directory, short: Ray's socket paths are limited to 107 bytes), so stopping
# it leaves the Ray of a run on another GPU alone
RAY_DIR=/tmp/ray_$PORT

# stop_ray: verl's Ray processes, and the engines they started, outlive a stopped trainer: every process whose
# environment names this run's Ray directory is stopped, so the GPU is free.
stop_ray() {
  [[ $DRY_RUN -eq 0 ]] || return 0
  grep -lzx "RAY_TMPDIR=$RAY_DIR" /proc/[0-9]*/environ 2> /dev/null | cut -d/ -f3 \
    | xargs -r kill -9 2> /dev/null || true
  gpu_idle
}

# checkpoints_seen SECOND: online GRPO's checkpoints not yet noted, each with the GPU second it was seen at
# (ROOT/online/checkpoints.tsv). verl saves every step; kept are the regular ones (every ONLINE_SAVE_FREQ
# steps: the curve's) and the newest finished one (the result, when the budget stops verl).
checkpoints_seen() {
  local d=$ROOT/online ck step latest
  latest=$(cat "$d/train/checkpoints/latest_checkpointed_iteration.txt" 2> /dev/null || echo 0)
  for ck in "$d"/train/checkpoints/global_step_*; do
    [[ -d $ck ]] || continue
    step=${ck##*_}
    grep -q "^$step"$'\t' "$d/checkpoints.tsv" 2> /dev/null || printf '%s\t%s\n' "$step" "$1" >> "$d/checkpoints.tsv"
    ((step % ${ONLINE_SAVE_FREQ:-2} == 0 || step >= latest)) || rm -rf "$ck"
  done
}

# embed: the embedded warm start folded into MODEL_DIR as ROOT/embedded, once, unless WARM_MODEL names another.
embed() {
  [[ -n ${WARM_MODEL:-} || -e $ROOT/embedded/warm/DONE ]] \
    || run_cmd bash "$REPO/offline_gpu/gpu_learning.sh" "$MODEL_DIR" "$ROOT" embedded
}

warm() {
  embed
  evaluate warm 0 "$WARM" warm "$ROOT/warm_eval" dev "${FINAL[@]}"
  unserve
}

# online: verl's online GRPO under the budget, resumed from its last checkpoint; a poller notes the GPU
# second at which each checkpoint appears (ROOT/online/checkpoints.tsv) and the seconds spent (spent_s).
online() {
  local d=$ROOT/online spent=0 left start rc=0 poller instances=${ONLINE_INSTANCES:-16} pool=4096 steps=500
  # the budget ends the run; the step cap only has to lie beyond it, and the data (two seats of each
  # of the pool's instances a pass) has to fill the cap in whole batches, which the passes see to
  local epochs=$(((steps * instances + 2 * pool - 1) / (2 * pool)))
  [[ -e $d/data/test.parquet ]] || run_cmd "$PY" -m selfplay_gen.cli init --num-train "$pool" \
    --num-test "${DEV_INSTANCES:-64}" --seed 1000000 --out-dir "$d/data" --overwrite
  [[ $DRY_RUN -eq 1 ]] || spent=$(cat "$d/spent_s" 2> /dev/null || echo 0)
  left=$((BUDGET_S - spent))
  if [[ ! -e $d/TRAINED ]] && ((left > 60)); then
    local train=(env RAY_TMPDIR="$RAY_DIR" MODE=online MODEL_PATH="$WARM" TRAIN_FILES="$d/data/train.parquet"
      VAL_FILES="$d/data/test.parquet" OUT_DIR="$d/train" TRAIN_BATCH_SIZE="$instances"
      MINI_BATCH_SIZE=$((instances / 2)) ROLLOUT_N=8
      TOTAL_STEPS="$steps" EPOCHS="$epochs" SAVE_FREQ="${ONLINE_SAVE_EVERY:-1}" TEST_FREQ="${ONLINE_TEST_FREQ:-4}"
      LORA_RANK="${RL_LORA_RANK:-32}" LR="${RL_LR:-1e-4}" CLIP_RATIO_HIGH=0.28 "LOGGER=console,tensorboard"
      TEMPERATURE="${RL_TEMPERATURE:-0.7}" EXPERIMENT=online_grpo_lora "$REPO/run_selfplay_training.sh")
    local extra
    read -r -a extra <<< "${ONLINE_ARGS:-}"
    train+=("${extra[@]}")
    echo "=== online GRPO: ${left} s of GPU time left; a checkpoint every ${ONLINE_SAVE_EVERY:-1} steps"
    if [[ $DRY_RUN -eq 1 ]]; then
      "${train[@]}" --dry-run
      return 0
    fi
    unserve  # the GPU is verl's
    start=$(date +%s)
    (
      while sleep 5; do
        checkpoints_seen $((spent + $(date +%s) - start))
        echo $((spent + $(date +%s) - start)) > "$d/spent_s"
      done
    ) &
    poller=$!
    mkdir -p "$RAY_DIR"
    timeout --kill-after=30 "$left" "${train[@]}" > "$ROOT/logs/online_train.log" 2>&1 || rc=$?
    kill "$poller" 2> /dev/null || true
    checkpoints_seen $((spent + $(date +%s) - start))
    echo $((spent + $(date +%s) - start)) > "$d/spent_s"
    stop_ray
    # 124/137: the budget ran out (the point of the phase); anything else is a failure
    if ((rc != 0 && rc != 124 && rc != 137)); then
      tail -40 "$ROOT/logs/online_train.log" >&2
      echo "gpu_rl: online GRPO failed (exit $rc); log $ROOT/logs/online_train.log" >&2
      exit "$rc"
    fi
  fi
  [[ $DRY_RUN -eq 0 ]] || return 0
  # only checkpoints verl finished writing (a save cut off by the budget is not one)
  local latest step seconds steps=() minutes_of=()
  latest=$(cat "$d/train/checkpoints/latest_checkpointed_iteration.txt" 2> /dev/null || echo 0)
  while IFS=$'\t' read -r step seconds; do
    ((step <= latest)) || continue
    steps+=("$step") minutes_of+=("$(minutes "$seconds")")
  done < <(cat "$d/checkpoints.tsv" 2> /dev/null)
  ((${#steps[@]})) || { echo "gpu_rl: online GRPO finished no checkpoint in its budget" >&2; exit 1; }
  touch "$d/TRAINED"
  # the last checkpoint first, on dev and the final splits (the trainer's result), then the earlier regular
  # ones on dev (the curve; checkpoints.tsv also notes those removed between them), each merged just before
  # its evaluation: a run cut short still has its result
  local i last=$((${#steps[@]} - 1))
  for ((i = last; i >= 0; i--)); do
    ((i == last || steps[i] % ${ONLINE_SAVE_FREQ:-2} == 0)) || continue
    local splits=(dev) hf=$d/step_${steps[$i]}/hf
    ((i < last)) || splits+=("${FINAL[@]}")
    if [[ ! -e $hf/config.json ]]; then
      "$VERL_PYTHON" -m selfplay_gen.verl.merge_lora --checkpoint "$d/train/checkpoints/global_step_${steps[$i]}/actor" \
        "$hf" > "$ROOT/logs/online_merge.log" 2>&1 < /dev/null
    fi
    evaluate online-grpo-lora "${minutes_of[$i]}" "$hf" "online@${steps[$i]}" "$d/step_${steps[$i]}" "${splits[@]}"
  done
  unserve
}

# iterations KIND: filtered BC (fbc) or offline GRPO (grpo) iterations from the warm start in one `selfplay-gen
# iterate` run, which keeps its SGLang server from one iteration to the next and starts another iteration only
# while one as long as the last still ends within the budget (TIME_BUDGET_MIN: each iteration's generation,
# conversion, training and merge count, not its evaluations); then each iteration's dev reading is a point of
# the curve, and the last iteration's model is read on the final splits.
iterations() {
  local kind=$1 d=$ROOT/$1 trainer label name settings
  # online GRPO's learning rate and rank are its own (the iteration reads the same names): each kind has its own
  case $kind in
    fbc)
      trainer=filtered-bc label=filtered-bc name="filtered BC"
      settings=(${FBC_LR:+RL_LR="$FBC_LR"} GAMES_PER_ITER="${FBC_GAMES:-1024}") ;;
    grpo)
      trainer=grpo label=offline-grpo-lora name="offline GRPO"
      settings=(RL_LR="${GRPO_LR:-5e-5}" RL_LORA_RANK="${GRPO_LORA_RANK:-16}" GAMES_PER_ITER="${GRPO_GAMES:-512}"
        RAY_TMPDIR="$RAY_DIR") ;;
  esac
  if [[ $DRY_RUN -eq 0 ]]; then
    mkdir -p "$d/base/eval" && touch "$d/base/DONE" "$d/base/eval/DONE"  # the warm start: evaluated in `warm`
  fi
  # as many iterations as the budget holds (a dry run, which spends nothing, shows the first)
  local most=${MAX_ITERATIONS:-100}
  ((!DRY_RUN)) || most=1
  local iterate=(env -u RL_LR -u RL_LORA_RANK "${settings[@]}" RUN_DIR="$d" INITIAL_MODEL="$WARM" WARM_START=none
    TRAINER="$trainer" NUM_ITERATIONS="$most" TIME_BUDGET_MIN="$(minutes "$BUDGET_S")"
    EVAL_INSTANCES="${DEV_INSTANCES:-64}" EVAL_GAMES_PER_INSTANCE="${DEV_GAMES:-8}" TEST_SPLIT=false PORT="$PORT"
    "$REPO/run_selfplay_iteration.sh")
  echo "=== $name iterations while one more fits in ${BUDGET_S} s (log $ROOT/logs/$kind.log)"
  if [[ $DRY_RUN -eq 1 ]]; then
    "${iterate[@]}" --dry-run
    return 0
  fi
  unserve  # the iteration run starts its own server on PORT
  "${iterate[@]}" > "$ROOT/logs/$kind.log" 2>&1 \
    || { tail -40 "$ROOT/logs/$kind.log" >&2; echo "gpu_rl: $name iterations failed" >&2; exit 1; }
  [[ $kind != grpo ]] || stop_ray
  # the GPU minutes through each finished iteration, as the iteration run counted them against the budget
  local minutes_through stage spent last=
  while read -r minutes_through stage; do
    point "$label" "$minutes_through" dev "$stage/eval/heldout/metrics.json"
    spent=$minutes_through last=$stage
  done < <("$PY" -c 'import sys
from pathlib import Path
from selfplay_gen.iterate.decisions import finished_iterations
spent = 0.0
for stage, minutes in finished_iterations(Path(sys.argv[1])):
    spent += minutes
    print(f"{spent:.2f}", stage)' "$d")
  [[ -n $last ]] || { echo "gpu_rl: $name finished no iteration (log $ROOT/logs/$kind.log)" >&2; exit 1; }
  evaluate "$label" "$spent" "$last/train/hf" "iter_$((10#${last##*_}))" "$last/eval" "${FINAL[@]}"
  unserve
}

# both: the trainers of TRAINERS at once, one GPU each (the first ones of CUDA_VISIBLE_DEVICES, in order), each
# a gpu_rl.sh of its own phases with a port of its own (PORT, PORT + 2, ...); the first GPU evaluates the warm
# start before its trainer; fails when any does.
both() {
  local rc=0 pids=() half=(bash "$REPO/offline_gpu/gpu_rl.sh") gpus trainers i
  read -r -a trainers <<< "${TRAINERS:-fbc online}"
  IFS=, read -r -a gpus <<< "${CUDA_VISIBLE_DEVICES:-0,1,2,3}"
  ((${#gpus[@]} >= ${#trainers[@]})) || {
    echo "gpu_rl: both needs ${#trainers[@]} GPUs (${trainers[*]}); CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES" >&2
    exit 2
  }
  embed  # once, before the trainers read it
  ((!DRY_RUN)) || half+=(--dry-run)
  local runs=() logs=() listing=
  for i in "${!trainers[@]}"; do
    local phases=("${trainers[$i]}")
    ((i > 0)) || phases=(warm "${phases[@]}")
    # a command line, quoted for eval: bash keeps no arrays of arrays
    runs[i]=$(printf 'env CUDA_VISIBLE_DEVICES=%s PORT=%s' "${gpus[$i]}" $((PORT + 2 * i))
      printf ' %q' "${half[@]}" "$MODEL_DIR" "$ROOT" "${phases[@]}")
    logs[i]=$ROOT/logs/${trainers[$i]}_gpu.log
    listing+="${trainers[$i]} on GPU ${gpus[$i]}, "
  done
  echo "=== both: ${listing}the warm start's evaluation first on GPU ${gpus[0]} (logs $ROOT/logs/TRAINER_gpu.log)"
  for ((i = ${#trainers[@]} - 1; i >= 0; i--)); do
    printf '+ %s%s\n' "${runs[$i]}" "$( ((i == 0)) || echo ' &')"
  done
  if ((DRY_RUN)); then
    for ((i = ${#trainers[@]} - 1; i >= 0; i--)); do eval "${runs[$i]}"; done
    return 0
  fi
  for ((i = ${#trainers[@]} - 1; i > 0; i--)); do
    eval "${runs[$i]}" > "${logs[$i]}" 2>&1 < /dev/null &
    pids+=($!)
  done
  eval "${runs[0]}" > "${logs[0]}" 2>&1 < /dev/null || rc=$?
  for i in "${pids[@]}"; do wait "$i" || rc=$?; done
  if ((rc != 0)); then
    tail -n 20 "${logs[@]}" >&2
    echo "gpu_rl: a trainer of \`both\` failed (exit $rc); logs: ${logs[*]}" >&2
    exit "$rc"
  fi
}

collect() {
  local online_log=()
  [[ ! -e $ROOT/online/train/verl.log ]] || online_log=(--online-log "$ROOT/online/train/verl.log")
  run_cmd "$PY" "$REPO/bench/analysis/rl_curve.py" "$RESULTS" "${online_log[@]}"
  [[ $DRY_RUN -eq 0 && -n ${OUT:-} ]] || return 0
  mkdir -p "$OUT"
  # at most 8 files: the curve, online GRPO's steps (verl's own validation among them), the logs' ends
  local file
  for file in rl_curve.{csv,json,md,png} online_steps.csv online_curves.png; do
    cp "$RESULTS/$file" "$OUT/" 2> /dev/null || true
  done
  tail -n 60 "$ROOT"/logs/*.log > "$OUT/gpu_rl_logs.txt" 2> /dev/null || true
  cp "$ROOT/fbc/summary.md" "$OUT/fbc_summary.md" 2> /dev/null || true
}

for phase in "${PHASES[@]}"; do
  case "$phase" in
    warm) warm ;;
    online) online ;;
    fbc | grpo) iterations "$phase" ;;
    both) both ;;
    collect) collect ;;
    *) echo "unknown phase '$phase' (warm, online, fbc, grpo, both, collect)" >&2; exit 2 ;;
  esac
done
