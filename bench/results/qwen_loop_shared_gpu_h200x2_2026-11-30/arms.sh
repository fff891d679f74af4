# shellcheck shell=bash
# Arms for `offline_gpu/gpu_lease.sh run /tmp/r82 .lease/arms84.sh QB+G3` on a make-gpu install, two H200s, one Qwen run
# a GPU.
#   QB  issue 59: the boxed-matching online GRPO run, continued from its finished and evaluated iteration 1 (the
#       full pack of its adapters with the slim pack's evaluation laid over it, unpacked into /tmp/r82/QB before
#       this runs): the models refolded from the adapters (`gpu_learning.sh QWEN ARM_DIR restore`), then
#       ITER_QB=2: iteration 2 (6 steps) again, with the model-sized training defaults (gradient checkpointing on,
#       micro-batches sized from the vocabulary; the lease before ran out of memory at step 5 without them), and
#       its evaluation, on GPU 1.
#   G3  issue 62: the loop's own generation step with one, two and three SGLang servers sharing GPU 0
#       (servers.workers_per_gpu), side by side: QB's iteration-1 model (once QB's arm has refolded it:
#       QB/restored) plays iteration 1's 1,024 games in boxed moves (768 tokens a turn) with mixed
#       prefill/decode batches; each run is stopped once its games are converted (its timings.json: the step's
#       wall time, the servers' start-up apart, and GPU busy).
QWEN=${QWEN:-/tmp/qwen} QWEN_IN=${QWEN_IN:-/tmp/qwen-in} STEPS_Q=${STEPS_Q:-6} ITER_QB=${ITER_QB:-2} LR_Q=${LR_Q:-2e-5}
SAVE_Q=${SAVE_Q:-$STEPS_Q}
COMMON=(evaluation.test_split=false evaluation.human_games_per_instance=1 servers.start_tries=6 servers.retry_wait_s=20)
# each server's share of the GPU's memory ($1) and verl's rollout engine's ($2), as MEMS
mem() {
  MEMS=("servers.extra_args=--mem-fraction-static $1" servers.partner_mem_fraction="$1" servers.overlap_mem_fraction="$1"
    verl.gpu_memory_utilization="$2")
}
ONLINE=(trainer=grpo-online trainers.grpo_online.batch_size=16 trainers.grpo_online.lora_rank=16
  games_per_instance=8 trainers.grpo_online.test_instances=16 sampling.temperature=1.0 loss.clip_ratio_high=0.28
  loss.entropy_coeff=0.001 trainers.grpo_online.lr="$LR_Q" trainers.grpo_online.steps="$STEPS_Q"
  trainers.grpo_online.test_freq=3 verl.save_freq="$SAVE_Q" evaluation.instances=32 evaluation.games_per_instance=4)

# a run of the loop in ARM_DIR/run with this arm's ports
iterate() {
  export RAY_TMPDIR=/tmp/ray_${ARM_DIR##*/} VERL_LOGGING_LEVEL=WARN && mkdir -p "$RAY_TMPDIR"
  ./run_selfplay_iteration.sh run_dir="$ARM_DIR/run" servers.port="$PORT_BASE" verl.master_port=$((PORT_BASE + 90)) \
    "${COMMON[@]}" "$@"
}
# the shipped warm start was measured before: no base evaluation where the arm starts from it
skip_base() { mkdir -p "$ARM_DIR/run/base" && touch "$ARM_DIR/run/base/DONE"; }
# Qwen as a Hugging Face directory, converted once by whichever Qwen arm comes first
qwen_ready() {
  (
    flock 9
    [[ -f $QWEN/config.json ]] || PYTHON=$SGLANG_PYTHON FP32_REFERENCE=0 bash offline_gpu/prepare_qwen.sh convert "$QWEN_IN" "$QWEN"
  ) 9> /tmp/qwen.lock
}
arm_QB() {
  export CUDA_VISIBLE_DEVICES=1 && [[ -f $ARM_DIR/run/iter_001/trained.json ]] && qwen_ready \
    && bash offline_gpu/gpu_learning.sh "$QWEN" "$ARM_DIR" restore && touch "$ARM_DIR/restored" \
    && rm -rf "$ARM_DIR/run/iter_002" \
    && mem 0.15 0.3 && iterate initial_model="$QWEN" "${MEMS[@]}" \
    "${ONLINE[@]}" num_iterations="$ITER_QB" warm.policy=format warm.games=256 warm.epochs=1 \
    move_format=boxed sampling.max_new_tokens=768 verl.max_response_length=6144 game=matching
}
# iteration 1's generation step of a run in ARM_DIR/wN with N servers on the GPU, up to its games' conversion,
# then stopped with its servers: the initial model counts as evaluated, so the games play alone on the servers
gen_step() {
  local workers=$1 qb=${ARM_DIR%/*}/QB dir=$ARM_DIR/w$1 pid
  mkdir -p "$dir/base/eval" /tmp/ray_G3 && touch "$dir/base/DONE" "$dir/base/eval/DONE"
  RAY_TMPDIR=/tmp/ray_G3 setsid ./run_selfplay_iteration.sh run_dir="$dir" servers.port="$PORT_BASE" \
    "${COMMON[@]}" initial_model="$qb/run/iter_001/train/hf" warm.policy=none trainer=grpo num_iterations=1 \
    trainers.grpo.games_per_iter=1024 games_per_instance=8 move_format=boxed sampling.max_new_tokens=768 \
    verl.max_response_length=6144 game=matching servers.workers_per_gpu="$workers" \
    "servers.extra_args=--enable-mixed-chunk" > "$dir.log" 2>&1 &
  pid=$!
  until grep -qs '"convert"' "$dir/iter_001/timings.json"; do kill -0 "$pid" 2> /dev/null || break; sleep 2; done
  kill -TERM -- "-$pid" 2> /dev/null
  wait "$pid"
  sleep 10 && nvidia-smi --query-gpu=index,memory.used --format=csv,noheader
  cat "$dir/iter_001/timings.json"
}
arm_G3() {
  export CUDA_VISIBLE_DEVICES=0
  for _ in $(seq 120); do [[ -e ${ARM_DIR%/*}/QB/restored ]] && break; sleep 5; done
  gen_step 1 && gen_step 2 && gen_step 3
}
