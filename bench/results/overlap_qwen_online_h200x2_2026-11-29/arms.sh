# shellcheck shell=bash
# Arms for `offline_gpu/gpu_lease.sh run ROOT .lease/arms77.sh STEP...` on a make-gpu install, two H200s: GPU 0
# holds R1, R2 and Q, GPU 1 holds QB and QT (QK when there is room).
#   R1  issue 62: offline GRPO from the shipped warm start, 3 iterations of 1,024 games, one resident verl job
#   R2  the same with overlap one-step (R1+R2 side by side: the iterations-per-hour ratio)
#   Q   issue 59: matching from the rules alone with Qwen2.5-Coder-1.5B: format warm start on 1,024 random games,
#       online GRPO
#   QK  issue 63: Kuhn Poker from the rules alone with Qwen: no warm start, boxed moves, online GRPO
#   QT  the same, TicTacToe
#   QB  issue 59: matching from the rules alone with Qwen in SPIRAL's format (it may reason, its move in \boxed{}):
#       a short boxed format warm start (256 random games: raw, it makes 1 valid move in 10,
#       bench/results/qwen_matching_boxed_cpu/), online GRPO; 768 new tokens a turn, 6,144 a seat's game
# The Qwen arms skip their base evaluation (measured in bench/results/rules_alone_qwen_h200x2_2026-11-29/) and run
# with the model-sized defaults (gradient checkpointing on, 5,120 / 10,240 micro-batch tokens).
# Qwen: the GGUF's chunks received into QWEN_IN (prepare_qwen.sh receive); the first Qwen arm converts it to QWEN.
QWEN=${QWEN:-/tmp/qwen} QWEN_IN=${QWEN_IN:-/tmp/qwen-in} STEPS_Q=${STEPS_Q:-10} LR_Q=${LR_Q:-2e-5}
COMMON=(evaluation.test_split=false evaluation.human_games_per_instance=1 servers.start_tries=6 servers.retry_wait_s=20)
# each server's share of the GPU's memory ($1) and verl's rollout engine's ($2), as MEMS
mem() {
  MEMS=("servers.extra_args=--mem-fraction-static $1" servers.partner_mem_fraction="$1" servers.overlap_mem_fraction="$1"
    verl.gpu_memory_utilization="$2")
}
ONLINE=(trainer=grpo-online num_iterations=1 trainers.grpo_online.batch_size=16 trainers.grpo_online.lora_rank=16
  games_per_instance=8 trainers.grpo_online.test_instances=16 sampling.temperature=1.0 loss.clip_ratio_high=0.28
  loss.entropy_coeff=0.001 trainers.grpo_online.lr="$LR_Q" trainers.grpo_online.steps="$STEPS_Q"
  trainers.grpo_online.test_freq=5 verl.save_freq="$STEPS_Q" evaluation.instances=32 evaluation.games_per_instance=4)

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
R=(warm.policy=none trainer=grpo trainers.grpo.games_per_iter=1024 num_iterations=3 verl.resident=true
  verl.ppo_micro_tokens=8192)
arm_R1() { export CUDA_VISIBLE_DEVICES=0 && skip_base && mem 0.06 0.06 && iterate "${MEMS[@]}" "${R[@]}"; }
arm_R2() { export CUDA_VISIBLE_DEVICES=0 && skip_base && mem 0.06 0.06 && iterate "${MEMS[@]}" "${R[@]}" overlap=one-step; }
arm_Q() {
  export CUDA_VISIBLE_DEVICES=0 && skip_base && qwen_ready && mem 0.1 0.2 && iterate initial_model="$QWEN" "${MEMS[@]}" "${ONLINE[@]}" \
    warm.policy=format warm.games=1024 warm.epochs=1 game=matching
}
arm_QK() {
  export CUDA_VISIBLE_DEVICES=1 && skip_base && qwen_ready && mem 0.1 0.15 && iterate initial_model="$QWEN" "${MEMS[@]}" "${ONLINE[@]}" \
    warm.policy=none move_format=boxed game=textarena:KuhnPoker-v0
}
arm_QT() {
  export CUDA_VISIBLE_DEVICES=1 && skip_base && qwen_ready && mem 0.1 0.15 && iterate initial_model="$QWEN" "${MEMS[@]}" "${ONLINE[@]}" \
    warm.policy=none move_format=boxed game=textarena:TicTacToe-v0
}
arm_QB() {
  export CUDA_VISIBLE_DEVICES=1 && skip_base && qwen_ready && mem 0.1 0.15 && iterate initial_model="$QWEN" "${MEMS[@]}" "${ONLINE[@]}" \
    warm.policy=format warm.games=256 warm.epochs=1 move_format=boxed sampling.max_new_tokens=768 \
    verl.max_response_length=6144 game=matching
}
