# shellcheck shell=bash
# Arms for `offline_gpu/gpu_lease.sh run /tmp/r82 .lease/arms83.sh QB+G2` on a make-gpu install, two H200s, one Qwen run
# a GPU.
#   QB  issue 59: the boxed-matching online GRPO run of the lease before, continued from its finished iteration 1
#       (its full pack unpacked into /tmp/r82/QB before this runs: `gpu_lease.sh unpack /tmp/r82/QB DIR`): the
#       models refolded from the adapters (`gpu_learning.sh QWEN ARM_DIR restore`), iteration 2's partial stage
#       of the lease before dropped, then the same command with ITER_QB=2: iteration 2 (6 steps) and its
#       evaluation, on GPU 1.
#   G2  issue 62: Qwen generation's GPU utilization with more than one server on the GPU, side by side on GPU 0:
#       QB's iteration-1 model (once QB's arm has refolded it: QB/restored) plays the generation benchmark of 1,024
#       games in its boxed moves (768 tokens a turn, as QB's runs) on one server with graphs up to the games in
#       flight and mixed prefill/decode batches (the lease before's best, 38% busy with the format model), on two
#       such servers sharing the GPU behind sglang_router and on three; last, if the lease lasts, graphs alone
#       (mixed batches off), for a second reading of what mixed batches add (1.10x the lease before).
QWEN=${QWEN:-/tmp/qwen} QWEN_IN=${QWEN_IN:-/tmp/qwen-in} STEPS_Q=${STEPS_Q:-6} ITER_QB=${ITER_QB:-2} LR_Q=${LR_Q:-2e-5}
SAVE_Q=${SAVE_Q:-$STEPS_Q}
COMMON=(evaluation.test_split=false evaluation.human_games_per_instance=1 servers.start_tries=6 servers.retry_wait_s=20)
FAST=(verl.gradient_checkpointing=false verl.ppo_micro_tokens=10240)
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
    "${ONLINE[@]}" "${FAST[@]}" num_iterations="$ITER_QB" warm.policy=format warm.games=256 warm.epochs=1 \
    move_format=boxed sampling.max_new_tokens=768 verl.max_response_length=6144 game=matching
}
arm_G2() {
  local qb=${ARM_DIR%/*}/QB
  export CUDA_VISIBLE_DEVICES=0
  for _ in $(seq 120); do [[ -e $qb/restored ]] && break; sleep 5; done
  GEN_MODEL=$qb/run/iter_001/train/hf GEN_GAMES=1024 GEN_SEQUENTIAL=1 \
    GEN_ARGS="--no-flood --move-format boxed --max-new-tokens 768" \
    bash offline_gpu/gpu_speed.sh "$MODEL" "$ARM_DIR/speed" gen-graph-mixed gen-graph-mixed-2 gen-graph-mixed-3 gen-graph-batch
}
