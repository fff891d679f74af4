# shellcheck shell=bash
# Arms for `offline_gpu/gpu_lease.sh run /tmp/r84 .lease/arms90.sh QR3+QM3` on a make-gpu install, two H200s, one
# Qwen run a GPU; every game at temperature 1.0, the online stage's, so that every iteration is evaluated alike.
#   QR3 issue 59: raw Qwen in boxed matching whose table lists the cells a second time by paper, each paper's
#       reviewers highest first (commit 4e933d2): the base evaluated, two rounds of filtered BC on each seat's own
#       valid moves, from 4,096 games and then 2,048 (QR2's round from 1,024 trained on 54 rows), each evaluated,
#       then, in the same run, iteration 3 by online GRPO (6 steps, validated at 3 and 6), on GPU 0. Its first
#       prompts run to 973 tokens with the by-paper lines, close to the default limit of 1,024, so the limit is 1,280.
#   QM3 issue 63, continued: SPIRAL's three games from the model of QM3's first round (its run directory unpacked
#       into /tmp/r84/QM3 first, its unfinished second iteration removed): the second round of filtered BC on its
#       own valid moves, evaluated, then iteration 3 by online GRPO (6 steps), on GPU 1.
QWEN=${QWEN:-/tmp/qwen} QWEN_IN=${QWEN_IN:-/tmp/qwen-in} STEPS_Q=${STEPS_Q:-10} LR_Q=${LR_Q:-2e-5}
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
# the shipped warm start or a base measured before: no base evaluation
skip_base() { mkdir -p "$ARM_DIR/run/base" && touch "$ARM_DIR/run/base/DONE"; }
# Qwen as a Hugging Face directory, converted once by whichever Qwen arm comes first
qwen_ready() {
  (
    flock 9
    [[ -f $QWEN/config.json ]] || PYTHON=$SGLANG_PYTHON FP32_REFERENCE=0 bash offline_gpu/prepare_qwen.sh convert "$QWEN_IN" "$QWEN"
  ) 9> /tmp/qwen.lock
}
# each seat's own valid moves, reasoning and all: the format start from the model's own play
OWN=(warm.policy=none trainer=filtered-bc trainers.filtered_bc.valid_moves=true trainers.filtered_bc.games_per_iter=1024
  num_iterations=2 move_format=boxed sampling.temperature=1.0 evaluation.instances=32 evaluation.games_per_instance=4)
arm_QR3() {
  export CUDA_VISIBLE_DEVICES=0 && qwen_ready && mem 0.15 0.3 \
    && iterate initial_model="$QWEN" "${MEMS[@]}" "${OWN[@]}" num_iterations=1 trainers.filtered_bc.games_per_iter=4096 \
      sampling.max_new_tokens=768 verl.max_prompt_length=1280 game=matching \
    && iterate initial_model="$QWEN" "${MEMS[@]}" "${OWN[@]}" num_iterations=2 trainers.filtered_bc.games_per_iter=2048 \
      sampling.max_new_tokens=768 verl.max_prompt_length=1280 game=matching \
    && iterate initial_model="$QWEN" "${MEMS[@]}" "${ONLINE[@]}" trainers.grpo_online.steps=6 verl.save_freq=6 \
      num_iterations=3 warm.policy=none move_format=boxed sampling.max_new_tokens=768 verl.max_prompt_length=1280 \
      verl.max_response_length=6144 game=matching
}
SPIRAL_GAMES=textarena:TicTacToe-v0,textarena:KuhnPoker-v0,textarena:SimpleNegotiation-v0
arm_QM3() {
  export CUDA_VISIBLE_DEVICES=1 && qwen_ready && mem 0.1 0.2 && rm -rf "$ARM_DIR/run/iter_002" \
    && [[ -f $ARM_DIR/run/iter_001/DONE ]] \
    && iterate initial_model="$QWEN" "${MEMS[@]}" "${OWN[@]}" sampling.max_new_tokens=1024 evaluation.retention=true \
      game="$SPIRAL_GAMES" \
    && iterate initial_model="$QWEN" "${MEMS[@]}" "${ONLINE[@]}" trainers.grpo_online.batch_size=18 \
      trainers.grpo_online.steps=6 verl.save_freq=6 num_iterations=3 warm.policy=none move_format=boxed \
      sampling.max_new_tokens=1024 verl.max_response_length=8192 evaluation.retention=true game="$SPIRAL_GAMES"
}

# Added during the lease once QR3 had stopped (README): the base alone at temperature 0.7, the CPU pre-screen's,
# on GPU 0, from a second `gpu_lease.sh run /tmp/r84 armsT.sh QT` (this file sourced first).
arm_QT() {
  export CUDA_VISIBLE_DEVICES=0 && mem 0.15 0.3 \
    && iterate initial_model="$QWEN" "${MEMS[@]}" "${OWN[@]}" num_iterations=0 sampling.temperature=0.7 \
      evaluation.human_games_per_instance=1 sampling.max_new_tokens=768 verl.max_prompt_length=1280 game=matching
}
