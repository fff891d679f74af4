# shellcheck shell=bash
# Arms for `offline_gpu/gpu_lease.sh run ROOT .lease/arms82.sh G+QB` on a make-gpu install, two H200s, one Qwen run
# a GPU.
#   G   issue 62: Qwen generation's GPU utilization, side by side on GPU 0. Qwen2.5-Coder-1.5B's format warm start on
#       1,024 random games (Q62B's), then the generation benchmark of 1,024 games with it on one server at a time,
#       four ways: SGLang's own CUDA graphs (decode batches up to 256), graphs up to the games in flight
#       (`serving.graph_batch`, what iterate gives its servers), SGLang's mixed prefill/decode batches, and both; the
#       runner's figures only (GPU busy % beside games/s). Then Q62B's offline GRPO (resident, overlap one-step,
#       no gradient checkpointing, 10,240-token micro-batches) for as long as the lease lasts, its servers with
#       iterate's own graphs: the wall-time table's utilization of generation.
#   QB  issue 59: matching from the rules alone with Qwen in SPIRAL's boxed format (boxed format warm start on 256
#       random games, online GRPO) on GPU 1, in iterations of STEPS_Q steps, each ending with its adapter saved so
#       that a full pack of a finished iteration carries the run to a later lease; updates without gradient
#       checkpointing in 10,240-token micro-batches (twice as fast a step in Q62B).
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
  export CUDA_VISIBLE_DEVICES=1 && skip_base && qwen_ready && mem 0.15 0.3 && iterate initial_model="$QWEN" "${MEMS[@]}" \
    "${ONLINE[@]}" "${FAST[@]}" num_iterations="$ITER_QB" warm.policy=format warm.games=256 warm.epochs=1 \
    move_format=boxed sampling.max_new_tokens=768 verl.max_response_length=6144 game=matching
}
Q62=(initial_model="$QWEN" "servers.extra_args=--mem-fraction-static 0.15" servers.partner_mem_fraction=0.15
  servers.overlap_mem_fraction=0.15 verl.gpu_memory_utilization=0.15 warm.policy=format warm.games=1024 warm.epochs=1
  game=matching trainer=grpo trainers.grpo.games_per_iter=1024 trainers.grpo.lora_rank=16 trainers.grpo.lr="$LR_Q"
  verl.resident=true sampling.temperature=1.0 evaluation.instances=32 evaluation.games_per_instance=4
  overlap=one-step "${FAST[@]}")
arm_G() {
  export CUDA_VISIBLE_DEVICES=0 && skip_base && qwen_ready && iterate "${Q62[@]}" num_iterations=0 \
    && GEN_MODEL=$ARM_DIR/run/warm/train/hf GEN_GAMES=1024 GEN_SEQUENTIAL=1 GEN_ARGS=--no-flood \
      bash offline_gpu/gpu_speed.sh "$MODEL" "$ARM_DIR/speed" gen-graphs gen-graph-batch gen-mixed gen-graph-mixed \
    && iterate "${Q62[@]}" num_iterations=2
}
