# shellcheck shell=bash
# Arms for `offline_gpu/gpu_lease.sh run /tmp/r82 .lease/arms85.sh QB+QM` on a make-gpu install, two H200s, one Qwen run
# a GPU.
#   QB  issue 59: the boxed-matching online GRPO run, continued from the full pack of its last finished iteration
#       (unpacked into /tmp/r82/QB before this runs): the models refolded from the adapters, then ITER_QB (the
#       iteration after the packed one; the arm checks that iteration's predecessor has its trained.json) and its
#       evaluation, with the model-sized training defaults, on GPU 1: 12 steps, validated at 6 and 12 (its
#       iterations so far took 6 steps, each paying verl's start-up of about 250 s; 12 fit in the lease).
#   QM  issue 63: SPIRAL's three games at once, from raw Qwen in boxed moves, by online GRPO: TicTacToe, Kuhn Poker
#       and Simple Negotiation in every step's batch (18 groups of 8 games), 8 steps; the base evaluation first
#       (each game against its fixed references, and the retention check), then iteration 1's, on GPU 0.
QWEN=${QWEN:-/tmp/qwen} QWEN_IN=${QWEN_IN:-/tmp/qwen-in} STEPS_Q=${STEPS_Q:-12} ITER_QB=${ITER_QB:-3} LR_Q=${LR_Q:-2e-5}
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
  local last
  last=$ARM_DIR/run/iter_$(printf %03d $((ITER_QB - 1)))
  export CUDA_VISIBLE_DEVICES=1 && [[ -f $last/trained.json ]] && qwen_ready \
    && bash offline_gpu/gpu_learning.sh "$QWEN" "$ARM_DIR" restore && touch "$ARM_DIR/restored" \
    && mem 0.15 0.3 && iterate initial_model="$QWEN" "${MEMS[@]}" \
    "${ONLINE[@]}" trainers.grpo_online.test_freq=6 num_iterations="$ITER_QB" warm.policy=format warm.games=256 warm.epochs=1 \
    move_format=boxed sampling.max_new_tokens=768 verl.max_response_length=6144 game=matching
}
SPIRAL_GAMES=textarena:TicTacToe-v0,textarena:KuhnPoker-v0,textarena:SimpleNegotiation-v0
arm_QM() {
  export CUDA_VISIBLE_DEVICES=0 && qwen_ready && mem 0.1 0.2 && iterate initial_model="$QWEN" "${MEMS[@]}" \
    "${ONLINE[@]}" trainers.grpo_online.batch_size=18 trainers.grpo_online.steps=8 verl.save_freq=8 \
    trainers.grpo_online.test_freq=4 evaluation.retention=true warm.policy=none move_format=boxed num_iterations=1 \
    game="$SPIRAL_GAMES"
}
