#!/usr/bin/env bash
# Speed runbook on one GPU (after `source offline_gpu/gpu_setup.sh`): the generation benchmark of the embedded warm
# start with SGLang's fast path and with CUDA graphs off, and the wall time of one filtered-BC iteration of
# 4,096 games with its evaluations, through the scripts (`fbc`) or `selfplay-gen iterate` (`iterate-fbc`), and a
# few steps of online GRPO with a LoRA adapter (`iterate-online`: the step rate, the merge of a GRPO adapter).
# `router-shared` plays the same games with one server (DP=1) and with two SGLang workers sharing the GPU behind
# the real sglang_router (DP=2 on one GPU: the routing and the runner's plumbing, not two GPUs' speed);
# `gen-8k` is the generation benchmark with 8,192 games in flight (each generation phase serves GEN_MODEL, by
# default the embedded warm start); `gen-priority` is the generation benchmark on a server that runs waiting
# requests by the priority the players send, their game's depth (`sglang-args --priority-scheduling`); `gen-decode4`
# on one that runs 4 decode steps between looks at its queue (fewer, larger prefill batches of the turns that
# arrived meanwhile); `gen-graph-batch` on one that captures CUDA graphs up to the decode batch of all the games in
# flight (`serving.graph_batch`, what `selfplay-gen iterate` gives its servers) rather than SGLang's own 256;
# `gen-mixed` on one that runs the turns that arrive in the decode batches (`--enable-mixed-chunk`), `gen-graph-mixed`
# on one with both, `gen-graph-mixed-2` and `-3` on two or three such servers sharing the GPU behind sglang_router
# (each its own scheduler process). Each reports its phases' GPU utilization beside games/s. `swap`
# checks a server that took another checkpoint's weights (/update_weights_from_disk) against one started on it:
# the same greedy games, token for token.
# On a machine with two GPUs: `dp-compare` plays DP_GAMES games through run_selfplay_generation.sh with DP=1 and
# then DP=2 (sglang_router in front of one worker per GPU; DP_COMPARE="1" plays DP=1 alone); `sft-compare` and
# `offline-compare` train the same SFT_STEPS / OFFLINE_STEPS steps on N_GPUS=2 and on N_GPUS=1 (the warm start's
# teacher chats; the DP=1 games as offline GRPO groups, OFFLINE_BATCH a step), `online-compare` ONLINE_STEPS steps
# of online GRPO (`online-batch` the same with ONLINE_BATCH (64) instances a step, where the rollout's throughput,
# not its longest games, sets the step); `iterate-2gpu` is one filtered-BC iteration of run_selfplay_iteration.sh
# with DP=2, N_GPUS=2. `iterate-fbc` runs with KEEP_SERVERS=False (a server per model), `iterate-kept` with True;
# `sft-profile` profiles two steps of the warm start's SFT job (bench/analysis/trace_summary.py reads the trace);
# `fsdp-compare` trains that job and online GRPO with FSDP_STRATEGY=fsdp2 and =fsdp (and the SFT job with 32k-token
# micro-batches), on each of FSDP_GPUS (1); `attention-compare` trains the SFT job and online GRPO with
# CUDNN_ATTENTION=True (PyTorch's choice) and =False on one GPU. `poll-compare` trains offline GRPO on the DP=1
# games (dp-compare first) on one GPU, sampling through selfplay_gen's replay buffer and through verl's own.
# `resident-compare` runs GRPO_ITERATIONS (2) offline GRPO iterations of 1,024 games from the warm start three ways,
# one after another: a verl job per iteration with its rollout engine (OFFLINE_ENGINE=True), without it (False), and
# one resident job for the run (RESIDENT_TRAINER=True); `overlap-compare` runs OVERLAP_ITERATIONS (4) of them with
# OVERLAP=off and =one-step. Each run's summary.md holds its wall-time table (start-up apart) and iterations per hour.
# Results in ROOT/speed/; each phase (or training job) is skipped once its result exists.
#   offline_gpu/gpu_speed.sh MODEL_DIR ROOT [embedded] [gen-graphs] [gen-priority] [gen-decode4] [gen-graph-batch]
#                            [gen-mixed] [gen-graph-mixed] [gen-graph-mixed-2] [gen-graph-mixed-3] [fbc] [gen-eager]
#                            [iterate-fbc] [iterate-kept] [iterate-online] [router-shared] [gen-8k] [swap]
#                            [dp-compare] [sft-compare] [sft-profile] [iterate-2gpu] [offline-compare]
#                            [online-compare] [online-batch] [fsdp-compare] [attention-compare] [poll-compare]
#                            [resident-compare] [overlap-compare]
set -euo pipefail
MODEL_DIR=$1 ROOT=$2
shift 2
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
OUT=$ROOT/speed
mkdir -p "$OUT" "$ROOT/logs"
WARM=$ROOT/embedded/warm/train/hf
SFT_JOB=(TRAIN_BATCH_SIZE=32 LORA_RANK=16 LR=1e-3)  # the warm start's SFT job
ONLINE_JOB=(TRAIN_BATCH_SIZE=16 MINI_BATCH_SIZE=8 LR=5e-5 LORA_RANK=16 MAX_NEW_TOKENS=640)  # 16 rows x 8 games a step
# offline GRPO, full fine-tuning; the rollout engine replays, plays nothing, so CUDA graphs would only slow its start
OFFLINE_JOB=(LR=1e-5 ENFORCE_EAGER=True)

# serve GRAPHS PORT [MEM_FRACTION] [MODEL]: SGLang on MODEL (default: the warm model) with the project's default
# arguments and SERVE_ARGS after them (alone on the GPU unless MEM_FRACTION leaves room for another)
serve() {
  local graphs=--cuda-graphs model=${4:-$WARM} priority=--no-priority-scheduling
  [[ $1 == 1 ]] || graphs=--no-cuda-graphs
  [[ ${PRIORITY:-0} == 0 ]] || priority=--priority-scheduling
  read -r -a args <<< "$(python3 -m selfplay_gen.serving sglang-args "$graphs" "$priority" --model "$model")"
  read -r -a extra <<< "${SERVE_ARGS:-}"
  setsid nohup python3 -m sglang.launch_server --model-path "$model" --host 127.0.0.1 --port "$2" \
    --mem-fraction-static "${3:-0.8}" "${args[@]}" "${extra[@]}" > "$ROOT/logs/sglang_$2.log" 2>&1 < /dev/null &
  echo $! > "$ROOT/logs/sglang_$2.pid"
  local start=$SECONDS
  until curl -sf "http://127.0.0.1:$2/health" > /dev/null; do
    sleep 2
    kill -0 "$(cat "$ROOT/logs/sglang_$2.pid")" 2> /dev/null || { tail -20 "$ROOT/logs/sglang_$2.log"; return 1; }
  done
  echo "server up in $((SECONDS - start)) s (${args[*]})" | tee -a "$OUT/server_start.txt"
}
# stop PORT: the server serve() started and its scheduler processes (its process group, since serve() starts it
# with setsid), until they are gone; other servers on the machine (another GPU's run) are left alone
stop() {
  local group
  group=$(cat "$ROOT/logs/sglang_$1.pid" 2> /dev/null) || return 0
  kill -- -"$group" 2> /dev/null || true
  # shellcheck disable=SC2009  # pgrep counts zombies, which hold no GPU memory
  for _ in $(seq 60); do ps -o stat= -g "$group" | grep -qv '^Z' || break; sleep 1; done
  kill -9 -- -"$group" 2> /dev/null || true
  sleep 3
}

# the kernel's accept-queue limits, to read a single server's connect timeouts against (uvicorn's backlog is
# 2048; bench/results/two_gpu_h100_2026-11-25/)
net_limits() {
  grep -H . /proc/sys/net/core/somaxconn /proc/sys/net/ipv4/tcp_max_syn_backlog > "$OUT/net.txt" || true
}

# route URL...: sglang_router on port 30100 in front of the servers at URL..., once it answers; `stop router` stops
# it as `stop` stops a server, by its process group
route() {
  setsid nohup python3 -m sglang_router.launch_router --host 127.0.0.1 --port 30100 --worker-urls "$@" \
    > "$ROOT/logs/router.log" 2>&1 < /dev/null &
  echo $! > "$ROOT/logs/sglang_router.pid"
  until curl -sf http://127.0.0.1:30100/health > /dev/null; do sleep 1; done
}

# memory_part SERVERS K: the --mem-fraction-static iterate gives the K-th (from 0) of SERVERS servers sharing a GPU,
# of a lone server's 0.8 (`iterate.server.memory_split`)
memory_part() {
  python3 -c 'import sys; from selfplay_gen.serving import option_value; from selfplay_gen.iterate.server import memory_split
print(option_value(memory_split(["--mem-fraction-static", "0.8"], int(sys.argv[1]), int(sys.argv[2])), "--mem-fraction-static"))' "$1" "$2"
}

# graph_args GAMES: the CUDA-graph arguments selfplay_gen gives a server that plays GAMES games at once
graph_args() {
  python3 -c 'import sys; from selfplay_gen import serving as s; print(*s.graph_args([], s.graph_batch(int(sys.argv[1]))))' "$1"
}

# generation NAME GRAPHS [GAMES [WORKERS]]; GEN_MODEL: another model than the embedded warm start (a Qwen
# checkpoint); GEN_ARGS: more bench/generation.py options (--no-flood: the runner's figures only). WORKERS > 1
# servers share this GPU (0.8 of its memory in equal parts) behind sglang_router on port 30100, each on
# 30100 + its number: a second scheduler process where one server's own CPU work between steps leaves the GPU idle
generation() {
  [[ ! -e $OUT/$1.DONE ]] || return 0
  local model=${GEN_MODEL:-$WARM} workers=${4:-1} more ports=(30100) urls=() port
  read -r -a more <<< "${GEN_ARGS:-}"
  net_limits
  if ((workers == 1)); then
    serve "$2" 30100 0.8 "$model"
  else
    ports=()
    for ((i = 1; i <= workers; i++)); do
      ports+=($((30100 + i)))
      urls+=("http://127.0.0.1:$((30100 + i))")
      serve "$2" $((30100 + i)) "$(memory_part "$workers" $((i - 1)))" "$model"
    done
    route "${urls[@]}"
  fi
  python3 "$REPO/bench/generation.py" --backend sglang --base-url http://127.0.0.1:30100 --tokenizer "$model" \
    --num-games "${3:-${GEN_GAMES:-2048}}" --sequential-games "${GEN_SEQUENTIAL:-16}" --games-per-instance 8 \
    --max-new-tokens 512 --max-moves 30 --out "$OUT/$1" "${more[@]}"
  curl -s "http://127.0.0.1:${ports[0]}/get_server_info" > "$OUT/$1.server_info.json" || true
  ((workers == 1)) || stop router
  for port in "${ports[@]}"; do
    stop "$port"
    # where each phase's wall time went on each server (start, ramp, full, drain, tail)
    python3 "$REPO/bench/analysis/server_timeline.py" "$ROOT/logs/sglang_$port.log" \
      --generation "$OUT/$1/generation.json" >> "$OUT/$1/server_timeline.md" 2>&1 || true
  done
  touch "$OUT/$1.DONE"
}

# router_shared: the runner through one server, then through sglang_router in front of two workers on this GPU
router_shared() {
  [[ ! -e $OUT/router_shared.DONE ]] || return 0
  local games=(--tokenizer "$WARM" --num-games "${ROUTER_GAMES:-2048}" --sequential-games 8 --games-per-instance 8
               --max-new-tokens 512 --max-moves 30 --no-flood)
  serve 1 30100 0.8
  python3 "$REPO/bench/generation.py" --backend sglang --base-url http://127.0.0.1:30100 "${games[@]}" \
    --out "$OUT/router_dp1"
  stop 30100
  serve 1 30101 0.4
  serve 1 30102 0.4
  route http://127.0.0.1:30101 http://127.0.0.1:30102
  curl -s http://127.0.0.1:30100/workers > "$OUT/router_dp2_workers.json"
  python3 "$REPO/bench/generation.py" --backend sglang --base-url http://127.0.0.1:30100 "${games[@]}" \
    --out "$OUT/router_dp2_shared"
  for port in 30101 30102; do  # each worker's decode log: how busy each one was
    grep -a "Decode batch" "$ROOT/logs/sglang_$port.log" > "$OUT/router_dp2_decode_$port.txt" || true
  done
  stop router
  stop 30101
  stop 30102
  touch "$OUT/router_shared.DONE"
}

# swap_check: the warm-start adapter folded into MODEL_DIR (a checkpoint of the same config and tokenizer) served
# twice: by a server started on MODEL_DIR that then loads its weights in place, and by a server started on it.
# 32 greedy games one at a time on each must be the same token for token; start-up and swap seconds in swap.md.
swap_check() {
  [[ ! -e $OUT/swap.DONE ]] || return 0
  local folded=$ROOT/swap/folded port=30100 games=(--instances dev --num-instances 32 -k 1 --temperature 0
    --concurrency 1 --quiet)
  mkdir -p "$ROOT/swap"
  [[ -e $folded/config.json ]] || python3 -c 'import sys; from pathlib import Path
from selfplay_gen.models import WARM_START_ADAPTER, fold_adapter
fold_adapter(Path(sys.argv[1]), WARM_START_ADAPTER, Path(sys.argv[2]))' "$MODEL_DIR" "$folded"
  local how model start
  for how in swapped started; do
    model=$folded
    [[ $how == started ]] || model=$MODEL_DIR
    start=$SECONDS
    serve 1 $port 0.8 "$model"
    echo "$how: server up in $((SECONDS - start)) s" | tee -a "$OUT/swap.md"
    if [[ $how == swapped ]]; then
      start=$SECONDS
      python3 -m selfplay_gen.serving swap "http://127.0.0.1:$port" "$MODEL_DIR" "$folded" | tee -a "$OUT/swap.md"
      echo "swapped: weights loaded in place in $((SECONDS - start)) s" | tee -a "$OUT/swap.md"
    fi
    python3 -m selfplay_gen.cli eval --backend sglang --base-url "http://127.0.0.1:$port" --model "$folded" \
      "${games[@]}" --out "$ROOT/swap/$how"
    stop $port
  done
  python3 - "$ROOT/swap/swapped/games" "$ROOT/swap/started/games" << 'PY' | tee -a "$OUT/swap.md"
import sys
from pathlib import Path
from selfplay_gen.records import read_games
def games(d):
    return {r["game_id"]: [p["token_ids"] for p in r["players"]] for f in sorted(Path(d).glob("*.jsonl")) for r in read_games(f)}
a, b = games(sys.argv[1]), games(sys.argv[2])
same = sum(a[k] == b.get(k) for k in a)
print(f"token-exact games: {same} of {len(a)} (the started server played {len(b)})")
PY
  touch "$OUT/swap.DONE"
}

# dp_compare: the same games from the user's script, one server, then DP=2 behind sglang_router (a GPU each)
dp_compare() {
  [[ ! -e $OUT/dp_compare.DONE ]] || return 0
  local dp
  net_limits
  for dp in ${DP_COMPARE:-1 2}; do
    # a seat's budget and the rows' limits as an iteration sets them, so offline-compare can train on these games
    env MODEL_NAME="$WARM" NUM_GAMES="${DP_GAMES:-4096}" DP="$dp" PORT=$((30100 + 10 * dp)) MAX_NEW_TOKENS=640 \
      MAX_RESPONSE_TOKENS=3072 CONVERT_ARGS="--max-prompt-tokens 1024 --max-response-tokens 3072" \
      OUT_DIR="$ROOT/dp$dp" "$REPO/run_selfplay_generation.sh" > "$ROOT/logs/dp$dp.log" 2>&1 \
      || { echo "DP=$dp failed: $ROOT/logs/dp$dp.log"; tail -20 "$ROOT/logs/dp$dp.log"; }
    cp "$ROOT/dp$dp/games.summary.json" "$OUT/dp${dp}_games.summary.json" || true
    grep -a "server\|router\|worker\|concurren" "$ROOT/logs/dp$dp.log" | head -20 > "$OUT/dp${dp}_log.txt" || true
  done
  touch "$OUT/dp_compare.DONE"
}

# train_one RUN MODE STEPS DATA [VAR=VALUE...] [-- VERL_OVERRIDE...]: one training job into ROOT/RUN, its
# settings as run_selfplay_training.sh's variables and verl overrides after --; verl's log in OUT/RUN.log
train_one() {
  local run=$1 mode=$2 steps=$3 data=$4 settings=() overrides=()
  shift 4
  while (($#)); do
    if [[ $1 == -- ]]; then shift; overrides=("$@"); break; fi
    settings+=("$1")
    shift
  done
  [[ ! -e $OUT/$run.log ]] || return 0
  env MODE="$mode" MODEL_PATH="$WARM" TRAIN_FILES="$data/train.parquet" VAL_FILES="$data/train.parquet" \
    OUT_DIR="$ROOT/$run" TOTAL_STEPS="$steps" "${settings[@]}" "$REPO/run_selfplay_training.sh" "${overrides[@]}" \
    > "$ROOT/logs/$run.log" 2>&1 || echo "$run failed: $ROOT/logs/$run.log"
  tr '\r' '\n' < "$ROOT/logs/$run.log" | grep -av "^\s*$" | tail -c 400000 > "$OUT/$run.log"
}

# train_compare NAME MODE STEPS DATA [VAR=VALUE...]: the same job on two GPUs, then on one, and their step table
train_compare() {
  local name=$1 mode=$2 steps=$3 data=$4 n
  shift 4
  for n in 2 1; do
    train_one "${name}_gpus$n" "$mode" "$steps" "$data" N_GPUS=$n "$@"
  done
  compare_steps "${name}_gpus1" "${name}_gpus2"
}

sft_data() {  # the warm start's training set: SFT_GAMES teacher games as chats, in ROOT/sft_data
  local data=$ROOT/sft_data
  [[ ! -e $data/train.parquet ]] || return 0
  mkdir -p "$data"
  python3 -m selfplay_gen.cli play --backend scripted --scripted-policy teacher --seed 500000000 \
    --num-games "${SFT_GAMES:-2048}" --games-per-instance 1 --out "$data/games.jsonl" --resume --quiet > /dev/null
  python3 -m convert.cli "$data/games.jsonl" --out-dir "$data" --overwrite --format sft --top-fraction 1 \
    --model "$WARM" --max-prompt-tokens 1024 --max-response-tokens 3072
}

sft_compare() {  # the warm start's job: its teacher chats, batch 32, LoRA r16
  sft_data
  train_compare sft sft "${SFT_STEPS:-30}" "$ROOT/sft_data" "${SFT_JOB[@]}"
}

sft_profile() {  # the warm start's SFT job on one GPU, steps 10-11 under torch's profiler: where a step goes
  sft_data
  env MODE=sft N_GPUS=1 MODEL_PATH="$WARM" TRAIN_FILES="$ROOT/sft_data/train.parquet" \
    VAL_FILES="$ROOT/sft_data/train.parquet" OUT_DIR="$ROOT/sft/profile" TOTAL_STEPS=12 "${SFT_JOB[@]}" \
    "$REPO/run_selfplay_training.sh" profiler.enable=True profiler.tool=torch \
    'profiler.ranks=[0]' "profiler.save_path=$ROOT/prof" 'trainer.profile_interval=[10,11]' \
    > "$ROOT/logs/sft_profile.log" 2>&1 || echo "the profiled SFT failed: $ROOT/logs/sft_profile.log"
  local trace
  for trace in "$ROOT"/prof/*.json*; do
    [[ -e $trace ]] || continue
    python3 "$REPO/bench/analysis/trace_summary.py" "$trace" --top 25 > "$OUT/sft_profile_$(basename "$trace" | cut -c1-60).txt"
  done
}

fsdp_compare() {  # FSDP_STRATEGY fsdp2 against fsdp: the warm start's SFT job, then online GRPO, LoRA r16 both
  sft_data
  online_data
  local strategy n micro
  # each job on every one of FSDP_GPUS before the next job, so a run cut short still holds whole pairs
  for strategy in fsdp2 fsdp2_32k fsdp; do
    # fsdp2_32k: a step's 33k tokens in 2 micro-batches on one GPU (1 a GPU on two) instead of 3 (2)
    micro=16384
    [[ $strategy != *_32k ]] || micro=32768
    for n in ${FSDP_GPUS:-1}; do
      train_one "sft_${strategy}_gpus$n" sft "${SFT_STEPS:-30}" "$ROOT/sft_data" N_GPUS="$n" \
        FSDP_STRATEGY="${strategy%_32k}" SFT_MICRO_TOKENS=$micro "${SFT_JOB[@]}"
    done
  done
  for strategy in fsdp2 fsdp; do
    for n in ${FSDP_GPUS:-1}; do
      train_one "online_${strategy}_gpus$n" online "${ONLINE_STEPS:-4}" "$ROOT/online_data" N_GPUS="$n" \
        FSDP_STRATEGY=$strategy "${ONLINE_JOB[@]}"
    done
  done
  # step times against FSDP1's, and each setting's on two GPUs against one
  local first run
  for n in ${FSDP_GPUS:-1}; do
    for first in sft online; do
      compare_steps "${first}_fsdp_gpus$n" "${first}_fsdp2_gpus$n" "${first}_fsdp2_32k_gpus$n"
    done
  done
  for run in sft_fsdp sft_fsdp2 sft_fsdp2_32k online_fsdp online_fsdp2; do
    compare_steps "${run}_gpus1" "${run}_gpus2"
  done
}

attention_compare() {  # SDPA's cuDNN backend (a plan per new micro-batch shape) against flash / memory-efficient
  sft_data
  online_data
  local setting
  for setting in True False; do
    train_one "sft_cudnn${setting}_gpus1" sft "${SFT_STEPS:-30}" "$ROOT/sft_data" CUDNN_ATTENTION=$setting \
      "${SFT_JOB[@]}"
  done
  compare_steps sft_cudnnTrue_gpus1 sft_cudnnFalse_gpus1
  for setting in True False; do
    train_one "online_cudnn${setting}_gpus1" online "${ONLINE_STEPS:-4}" "$ROOT/online_data" CUDNN_ATTENTION=$setting \
      "${ONLINE_JOB[@]}"
  done
  compare_steps online_cudnnTrue_gpus1 online_cudnnFalse_gpus1
}

compare_steps() {  # compare_steps RUN...: verl_steps.py's table of those of OUT/RUN.log that exist, into step_tables.md
  local logs=() run
  for run in "$@"; do
    [[ ! -e $OUT/$run.log ]] || logs+=("$OUT/$run.log")
  done
  ((${#logs[@]} > 1)) || return 0
  python3 "$REPO/bench/analysis/verl_steps.py" "${logs[@]}" >> "$OUT/step_tables.md" 2>&1 || true
  echo >> "$OUT/step_tables.md"
}

# offline GRPO on the DP=1 games, OFFLINE_BATCH (16, as an iteration trains them) groups a step. Another size runs
# as offline_bN on every group of those games, the constant ones too (zero advantage, the same work a step), since
# the games' trainable groups (about 116 of 2,048 games) hold too few steps of 64
offline_compare() {
  local batch=${OFFLINE_BATCH:-16} name=offline data=$ROOT/dp1
  if [[ $batch != 16 ]]; then
    name=offline_b$batch data=$ROOT/dp1_all_groups
    if [[ ! -e $data/train.parquet ]] && ! python3 -m convert.cli "$ROOT/dp1/games.jsonl" --out-dir "$data" \
      --overwrite --keep-constant-groups --max-prompt-tokens 1024 --max-response-tokens 3072 \
      > "$ROOT/logs/dp1_all_groups.log" 2>&1; then
      echo "offline-compare: conversion failed: $ROOT/logs/dp1_all_groups.log"; tail -3 "$ROOT/logs/dp1_all_groups.log"
      return 0
    fi
  fi
  train_compare "$name" offline "${OFFLINE_STEPS:-4}" "$data" TRAIN_BATCH_SIZE="$batch" \
    MINI_BATCH_SIZE=$((batch / 2)) "${OFFLINE_JOB[@]}"
}

# poll_compare: offline GRPO on one GPU at an iteration's 16 groups a step, sampled through selfplay_gen's
# replay buffer (it looks for a step's finished groups every 0.1 s) and through verl's own (every 2 s)
poll_compare() {
  local job=(TRAIN_BATCH_SIZE=16 MINI_BATCH_SIZE=8 "${OFFLINE_JOB[@]}")
  train_one offline_poll_quick_gpus1 offline "${OFFLINE_STEPS:-4}" "$ROOT/dp1" "${job[@]}"
  train_one offline_poll_verl_gpus1 offline "${OFFLINE_STEPS:-4}" "$ROOT/dp1" "${job[@]}" \
    -- trainer.v1.sampler.custom_sampler.path=null
  compare_steps offline_poll_verl_gpus1 offline_poll_quick_gpus1
}

online_data() {  # online GRPO's rows: 1,024 training instances (`selfplay-gen init`), in ROOT/online_data
  [[ -e $ROOT/online_data/train.parquet ]] \
    || python3 -m selfplay_gen.cli init --num-train 1024 --num-test 16 --out-dir "$ROOT/online_data"
}

online_compare() {  # online GRPO (verl's rollout plays the games), 16 instances x 8 games a step, LoRA r16
  online_data
  train_compare online online "${ONLINE_STEPS:-4}" "$ROOT/online_data" "${ONLINE_JOB[@]}"
}

online_batch() {  # online_compare with ONLINE_BATCH instances a step, two optimizer steps of half of them each
  local batch=${ONLINE_BATCH:-64}
  online_data
  train_compare "online_b$batch" online "${ONLINE_STEPS:-4}" "$ROOT/online_data" "${ONLINE_JOB[@]}" \
    TRAIN_BATCH_SIZE="$batch" MINI_BATCH_SIZE=$((batch / 2))
}

iterate_2gpu() {  # one filtered-BC iteration from the embedded warm start, every stage on both GPUs
  mkdir -p "$ROOT/two/base" && touch "$ROOT/two/base/DONE"
  env RUN_DIR="$ROOT/two" INITIAL_MODEL="$WARM" WARM_START=none TRAINER=filtered-bc NUM_ITERATIONS=1 DP=2 N_GPUS=2 \
    GAMES_PER_ITER="${ITER_GAMES:-2048}" MAX_NEW_TOKENS=640 "$REPO/run_selfplay_iteration.sh" > "$ROOT/logs/two.log" 2>&1 \
    || { echo "two-GPU iteration failed: $ROOT/logs/two.log"; tail -30 "$ROOT/logs/two.log"; }
  cp "$ROOT/two/summary.md" "$OUT/iterate_2gpu_summary.md" || true
}

# grpo_run NAME ITERATIONS SETTING...: offline GRPO iterations of 1,024 games from the warm start into ROOT/grpo_NAME,
# its base evaluation skipped (every arm starts from the same model), its summary to OUT/grpo_NAME_summary.md
grpo_run() {
  local name=$1 iterations=$2
  shift 2
  mkdir -p "$ROOT/grpo_$name/base" && touch "$ROOT/grpo_$name/base/DONE"
  env RUN_DIR="$ROOT/grpo_$name" INITIAL_MODEL="$WARM" WARM_START=none TRAINER=grpo NUM_ITERATIONS="$iterations" \
    GAMES_PER_ITER=1024 "$@" "$REPO/run_selfplay_iteration.sh" > "$ROOT/logs/grpo_$name.log" 2>&1
  cp "$ROOT/grpo_$name/summary.md" "$OUT/grpo_${name}_summary.md"
}

for phase in "$@"; do
  case "$phase" in
    embedded) bash "$REPO/offline_gpu/gpu_learning.sh" "$MODEL_DIR" "$ROOT" embedded ;;
    gen-graphs) generation generation_cuda_graphs 1 ;;
    gen-eager) generation generation_no_cuda_graphs 0 ;;
    gen-8k) generation generation_cuda_graphs_8192 1 8192 ;;
    gen-priority) PRIORITY=1 generation generation_priority 1 ;;
    gen-decode4) SERVE_ARGS="--num-continuous-decode-steps 4" generation generation_decode_steps_4 1 ;;
    gen-graph-batch) SERVE_ARGS=$(graph_args "${GEN_GAMES:-2048}") generation generation_graph_batch 1 ;;
    gen-mixed) SERVE_ARGS="--enable-mixed-chunk" generation generation_mixed_chunk 1 ;;
    gen-graph-mixed) SERVE_ARGS="$(graph_args "${GEN_GAMES:-2048}") --enable-mixed-chunk" \
      generation generation_graph_batch_mixed_chunk 1 ;;
    gen-graph-mixed-2) SERVE_ARGS="$(graph_args $((${GEN_GAMES:-2048} / 2))) --enable-mixed-chunk" \
      generation generation_graph_batch_mixed_chunk_2_workers 1 "${GEN_GAMES:-2048}" 2 ;;
    gen-graph-mixed-3) SERVE_ARGS="$(graph_args $((${GEN_GAMES:-2048} / 3))) --enable-mixed-chunk" \
      generation generation_graph_batch_mixed_chunk_3_workers 1 "${GEN_GAMES:-2048}" 3 ;;
    router-shared) router_shared ;;
    swap) swap_check ;;
    dp-compare) dp_compare ;;
    sft-compare) sft_compare ;;
    sft-profile) sft_profile ;;
    offline-compare) offline_compare ;;
    poll-compare) poll_compare ;;
    online-compare) online_compare ;;
    online-batch) online_batch ;;
    fsdp-compare) fsdp_compare ;;
    attention-compare) attention_compare ;;
    iterate-2gpu) iterate_2gpu ;;
    fbc)  # one iteration from the embedded warm start, everything at the scripts' defaults
      mkdir -p "$ROOT/fbc"
      [[ -e $ROOT/fbc/base/DONE ]] || { mkdir -p "$ROOT/fbc/base"; cp -r "$ROOT/embedded/base/." "$ROOT/fbc/base/"; }
      env RUN_DIR="$ROOT/fbc" INITIAL_MODEL="$WARM" WARM_START=none TRAINER=filtered-bc NUM_ITERATIONS=1 \
        GAMES_PER_ITER=4096 SELFPLAY_PYTHON=python3 VERL_PYTHON=python3 SGLANG_PYTHON=python3 \
        "$REPO/run_selfplay_iteration.sh" > "$ROOT/logs/fbc.log" 2>&1
      cp "$ROOT/fbc/summary.md" "$OUT/fbc_summary.md" ;;
    iterate-fbc)  # the same iteration through selfplay-gen iterate: one server per model, a wall-time table
      mkdir -p "$ROOT/ifbc/base" && touch "$ROOT/ifbc/base/DONE"
      env RUN_DIR="$ROOT/ifbc" INITIAL_MODEL="$WARM" WARM_START=none TRAINER=filtered-bc NUM_ITERATIONS=1 \
        GAMES_PER_ITER=4096 KEEP_SERVERS=False "$REPO/run_selfplay_iteration.sh" > "$ROOT/logs/ifbc.log" 2>&1
      cp "$ROOT/ifbc/summary.md" "$OUT/iterate_fbc_summary.md" ;;
    iterate-kept)  # iterate-fbc with KEEP_SERVERS=True (the servers release their memory while verl trains) and
      # KEPT_ITERATIONS (2) iterations: from the second on, an iteration is the steady state of a run (its input
      # model's evaluation beside its games on a server already up, training, merge, the new weights swapped in)
      mkdir -p "$ROOT/kept/base" && touch "$ROOT/kept/base/DONE"
      env RUN_DIR="$ROOT/kept" INITIAL_MODEL="$WARM" WARM_START=none TRAINER=filtered-bc \
        NUM_ITERATIONS="${KEPT_ITERATIONS:-2}" \
        GAMES_PER_ITER=4096 KEEP_SERVERS=True "$REPO/run_selfplay_iteration.sh" > "$ROOT/logs/kept.log" 2>&1
      cp "$ROOT/kept/summary.md" "$OUT/iterate_kept_summary.md" ;;
    iterate-online)  # online GRPO, LoRA r16; the input model's evaluation is the one iterate-fbc made
      mkdir -p "$ROOT/online/base" && touch "$ROOT/online/base/DONE"
      [[ ! -d $ROOT/ifbc/report ]] || { cp -r "$ROOT/ifbc/report" "$ROOT/online/"; cp -r "$ROOT/ifbc/base/eval" "$ROOT/online/base/"; }
      env RUN_DIR="$ROOT/online" INITIAL_MODEL="$WARM" WARM_START=none TRAINER=grpo-online NUM_ITERATIONS=1 \
        ONLINE_STEPS="${ONLINE_STEPS:-8}" SAVE_FREQ="${ONLINE_STEPS:-8}" RL_LORA_RANK=16 RL_LR="${ONLINE_LR:-5e-5}" \
        LOGGER=console,tensorboard "$REPO/run_selfplay_iteration.sh" > "$ROOT/logs/online.log" 2>&1
      cp "$ROOT/online/summary.md" "$OUT/iterate_online_summary.md" ;;
    resident-compare)  # offline GRPO a job per iteration (engine on, off) against one job for the run
      for arm in engine:OFFLINE_ENGINE=True replay:OFFLINE_ENGINE=False resident:RESIDENT_TRAINER=True; do
        grpo_run "${arm%%:*}" "${GRPO_ITERATIONS:-2}" "${arm#*:}"
      done ;;
    overlap-compare)  # offline GRPO with the next iteration's games played during training, and without
      for arm in sync:OVERLAP=off overlap:OVERLAP=one-step; do
        grpo_run "${arm%%:*}" "${OVERLAP_ITERATIONS:-4}" "${arm#*:}"
      done ;;
    *) echo "unknown phase $phase" >&2; exit 2 ;;
  esac
done
