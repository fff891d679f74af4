#!/usr/bin/env bash
# verl training (GRPO with the selfplay_gen plugin, or supervised fine-tuning), then the last checkpoint merged
# into a Hugging Face directory.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: run_selfplay_training.sh [--dry-run] [--help] [HYDRA_OVERRIDE...]

Trains MODEL_PATH with verl's GRPO (python -m verl.trainer.main_ppo) and this project's agent
loops, then merges the last checkpoint into OUT_DIR/hf. Extra arguments are passed to verl as
Hydra overrides (they come last, so they win). --dry-run prints the commands instead.

MODE=offline  replays converted games (selfplay-convert parquet, agent selfplay_replay): one row
              per group of K games, rollout.n=K (ROLLOUT_N, else rollout_n of the convert_summary.json
              next to TRAIN_FILES), verl's GRPO normalizes each group; sampled with TEMPERATURE/TOP_P
              as generated, stored logprobs as rollout logprobs with truncated importance sampling
MODE=sft      supervised fine-tuning with verl's own SFT trainer (torchrun -m selfplay_gen.verl.sft_trainer) on
              multi-turn chats (selfplay-convert --format sft parquet, column `messages`), loss on the
              assistant turns only: the warm start on teacher games, and filtered behaviour cloning on
              the best self-play games. LORA_RANK > 0 trains a LoRA adapter (verl saves it apart as
              hf/lora_adapter/; selfplay_gen.verl.merge_lora folds it into hf/ so hf/ is the trained model)
MODE=online   plays fresh games in both seats during rollout (selfplay-gen init parquet, agent
              selfplay_online, rollout.n=ROLLOUT_N games per (instance, seat) row = one GRPO group)

Environment (default):
  MODE                   offline | online | sft (offline)
  MODEL_PATH             Hugging Face model directory to train (required)
  TRAIN_FILES            training parquet (data/selfplay/train.parquet; online: data/online/train.parquet)
  VAL_FILES              validation parquet (data/selfplay/val.parquet; online: data/online/test.parquet)
  OUT_DIR                checkpoints/ and hf/ go here (data/train)
  N_GPUS, NNODES         GPUs per node, nodes (1, 1). Several nodes: offline and online run once, on the head
                         of a Ray cluster (`ray start --head` there, `ray start --address=HEAD:6379` on the others);
                         sft runs once on every node, with NODE_RANK (0 on the first) and MASTER_ADDR (the first
                         node's address; MASTER_PORT 29500), through torchrun's rendezvous
  TRAIN_BATCH_SIZE       rows per step (64)
  MINI_BATCH_SIZE        PPO mini-batch (TRAIN_BATCH_SIZE)
  MICRO_BATCH_SIZE       micro-batch per GPU for updates and log-probs (4)
  EPOCHS                 passes over TRAIN_FILES (1)
  TOTAL_STEPS            stop after this many steps (unset: EPOCHS decide)
  LR                     learning rate (GRPO 1e-6, sft 1e-4)
  MAX_PROMPT_LENGTH      data.max_prompt_length (1024)
  MAX_RESPONSE_LENGTH    data.max_response_length (3072)
  MAX_LENGTH             sft: tokens per chat, data.max_length (MAX_PROMPT_LENGTH + MAX_RESPONSE_LENGTH)
  LORA_RANK, LORA_ALPHA  sft: LoRA rank (0: full fine-tuning) and alpha (0, 2 x LORA_RANK)
  SFT_MICRO_TOKENS       sft: tokens per micro-batch, data.max_token_len_per_gpu (16384)
  SFT_ARGS               sft: extra Hydra overrides for verl's SFT trainer, e.g. "model.enable_gradient_checkpointing=True" ("")
  ROLLOUT_N              games per row (online 8; offline: rollout_n from convert_summary.json)
  TOP_P                  rollout top_p, as generated (1.0)
  ROLLOUT_IS             offline: algorithm.rollout_correction.rollout_is, token | sequence (token)
  ROLLOUT_IS_THRESHOLD   offline: upper bound of the truncated importance weights (2.0)
  MAX_MOVES              online: valid moves per game (30)
  MAX_NEW_TOKENS         online: new tokens per turn (256)
  TEMPERATURE            rollout sampling temperature, as generated (1.0)
  ROLLOUT_TP             rollout tensor-parallel size (1)
  GPU_MEMORY_UTILIZATION rollout KV-cache share of GPU memory (0.4)
  SAVE_FREQ              checkpoint every N steps; the last step is always saved (50)
  TEST_FREQ              validate every N steps, -1 = never (-1)
  EXPERIMENT             trainer.experiment_name (selfplay-MODE)
  ATTN_IMPL              training attention implementation (sdpa; verl's default needs flash-attn)
  USE_REMOVE_PADDING     actor_rollout_ref.model.use_remove_padding (False)
  CUDA_GRAPHS            1: the rollout engine's CUDA graphs (SGLang's default) | 0: enforce_eager (1)
  SGLANG_ENGINE_KWARGS   engine options passed to verl's SGLang rollout (SGLang's defaults, with a fallback
                         only for what the install lacks: python -m selfplay_gen.serving verl-overrides)
  VERL_PYTHON            python with verl (python3); this repository is appended to PYTHONPATH
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

MODE=${MODE:-offline}
case "$MODE" in
  offline) data_default=data/selfplay; val_name=val.parquet; agent_n=${ROLLOUT_N:-} ;;
  sft) data_default=data/sft; val_name=val.parquet; agent_n=1; lr_default=1e-4 ;;
  online) data_default=data/online; val_name=test.parquet; agent_n=${ROLLOUT_N:-8} ;;
  *) echo "MODE must be offline, online or sft, not '$MODE'" >&2; exit 2 ;;
esac
MODEL_PATH=${MODEL_PATH:-}
TRAIN_FILES=${TRAIN_FILES:-$data_default/train.parquet}
VAL_FILES=${VAL_FILES:-$data_default/$val_name}
OUT_DIR=${OUT_DIR:-data/train}
N_GPUS=${N_GPUS:-1}
NNODES=${NNODES:-1}
TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-64}
MINI_BATCH_SIZE=${MINI_BATCH_SIZE:-$TRAIN_BATCH_SIZE}
MICRO_BATCH_SIZE=${MICRO_BATCH_SIZE:-4}
EPOCHS=${EPOCHS:-1}
TOTAL_STEPS=${TOTAL_STEPS:-}
LR=${LR:-${lr_default:-1e-6}}
MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-1024}
MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-3072}
MAX_LENGTH=${MAX_LENGTH:-$((MAX_PROMPT_LENGTH + MAX_RESPONSE_LENGTH))}
LORA_RANK=${LORA_RANK:-0}
LORA_ALPHA=${LORA_ALPHA:-$((2 * LORA_RANK))}
SFT_MICRO_TOKENS=${SFT_MICRO_TOKENS:-16384}
SFT_ARGS=${SFT_ARGS:-}
MAX_MOVES=${MAX_MOVES:-30}
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-256}
TEMPERATURE=${TEMPERATURE:-1.0}
TOP_P=${TOP_P:-1.0}
ROLLOUT_IS=${ROLLOUT_IS:-token}
ROLLOUT_IS_THRESHOLD=${ROLLOUT_IS_THRESHOLD:-2.0}
ROLLOUT_TP=${ROLLOUT_TP:-1}
GPU_MEMORY_UTILIZATION=${GPU_MEMORY_UTILIZATION:-0.4}
SAVE_FREQ=${SAVE_FREQ:-50}
TEST_FREQ=${TEST_FREQ:--1}
EXPERIMENT=${EXPERIMENT:-selfplay-$MODE}
ATTN_IMPL=${ATTN_IMPL:-sdpa}
USE_REMOVE_PADDING=${USE_REMOVE_PADDING:-False}
CUDA_GRAPHS=${CUDA_GRAPHS:-1}
VERL_PYTHON=${VERL_PYTHON:-python3}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$REPO
if [[ -z ${SGLANG_ENGINE_KWARGS+set} ]]; then
  graphs=--cuda-graphs
  [[ $CUDA_GRAPHS == 1 ]] || graphs=--no-cuda-graphs
  read -r -a chosen <<< "$("$VERL_PYTHON" -m selfplay_gen.serving verl-overrides --python "$VERL_PYTHON" "$graphs")"
  SGLANG_ENGINE_KWARGS=
  for o in "${chosen[@]}"; do
    case "$o" in
      actor_rollout_ref.rollout.enforce_eager=*) ENFORCE_EAGER=${ENFORCE_EAGER:-${o#*=}} ;;
      *) SGLANG_ENGINE_KWARGS+="${SGLANG_ENGINE_KWARGS:+ }${o#+actor_rollout_ref.rollout.engine_kwargs.sglang.}" ;;
    esac
  done
fi
ENFORCE_EAGER=${ENFORCE_EAGER:-$([[ $CUDA_GRAPHS == 1 ]] && echo False || echo True)}

STEP=setup
on_exit() {
  local rc=$?
  if ((rc != 0)); then echo "run_selfplay_training.sh: step '$STEP' failed (exit $rc)" >&2; fi
}
trap on_exit EXIT

# run STEP COMMAND...: print the command; run it unless --dry-run.
run() {
  STEP=$1; shift
  printf '+'; printf ' %q' "$@"; printf '\n'
  [[ $DRY_RUN -eq 1 ]] || "$@"
}

# merge: the last checkpoint into OUT_DIR/hf (GRPO saves the weights under actor/, SFT at the step's top).
merge() {
  STEP=find-checkpoint
  local last=N dir
  if [[ $DRY_RUN -eq 0 ]]; then
    last=$(cat "$CKPT_DIR/latest_checkpointed_iteration.txt" 2> /dev/null \
           || find "$CKPT_DIR" -maxdepth 1 -name 'global_step_*' -printf '%f\n' | sed 's/global_step_//' | sort -n | tail -1)
    [[ -n $last && -d $CKPT_DIR/global_step_$last ]] || { echo "no checkpoint under $CKPT_DIR" >&2; exit 1; }
  fi
  dir=$CKPT_DIR/global_step_$last
  [[ ! -d $dir/actor ]] || dir=$dir/actor
  [[ $MODE == sft || $DRY_RUN -eq 0 ]] || dir=$dir/actor
  run merge "$VERL_PYTHON" -m verl.model_merger merge --backend fsdp --local_dir "$dir" --target_dir "$OUT_DIR/hf"
  # a LoRA run: verl writes the base weights and the adapter apart; fold the adapter in
  if [[ $LORA_RANK -gt 0 ]]; then run fold-lora "$VERL_PYTHON" -m selfplay_gen.verl.merge_lora "$OUT_DIR/hf"; fi
  STEP=finished
  echo "merged global_step_$last -> $OUT_DIR/hf"
}

[[ -n $MODEL_PATH ]] || { echo "set MODEL_PATH (a Hugging Face model directory)" >&2; exit 2; }
if [[ $DRY_RUN -eq 0 ]]; then
  for f in $TRAIN_FILES $VAL_FILES; do
    [[ -e $f ]] || { echo "missing data file $f (MODE=$MODE)" >&2; exit 2; }
  done
fi
CKPT_DIR=$OUT_DIR/checkpoints
[[ $DRY_RUN -eq 1 ]] || mkdir -p "$OUT_DIR"
if [[ $MODE == sft ]]; then
  lora=()
  ((LORA_RANK == 0)) || lora=(model.lora_rank="$LORA_RANK" model.lora_alpha="$LORA_ALPHA")
  steps=()
  [[ -z $TOTAL_STEPS ]] || steps=(trainer.total_training_steps="$TOTAL_STEPS")
  read -r -a sft_args <<< "$SFT_ARGS"
  # verl's SFT engine packs sequences only with flash-attn (not bundled): pad instead (use_remove_padding=False);
  # selfplay_gen.verl.sft_trainer is verl's trainer with chunked log-probs (selfplay_gen/verl/logprobs.py).
  # Step time on an H100 (bench/results/learning/): 7.1 s with verl's defaults, 4.4 s without torch.compile
  # and recomputation, 1.45 s with 16k-token micro-batches; a 135M model needs neither to fit.
  nodes=(--standalone)
  if ((NNODES > 1)); then
    [[ -n ${MASTER_ADDR:-} && -n ${NODE_RANK:-} ]] \
      || { echo "sft on $NNODES nodes: set NODE_RANK and MASTER_ADDR on each (see --help)" >&2; exit 2; }
    nodes=(--node-rank="$NODE_RANK" --master-addr="$MASTER_ADDR" --master-port="${MASTER_PORT:-29500}")
  fi
  run train "$VERL_PYTHON" -m torch.distributed.run "${nodes[@]}" --nnodes="$NNODES" --nproc_per_node="$N_GPUS" \
    -m selfplay_gen.verl.sft_trainer \
    data.train_files="$TRAIN_FILES" data.val_files="$VAL_FILES" data.messages_key=messages \
    data.max_length="$MAX_LENGTH" data.truncation=error \
    data.train_batch_size="$TRAIN_BATCH_SIZE" data.micro_batch_size_per_gpu="$MICRO_BATCH_SIZE" \
    data.max_token_len_per_gpu="$SFT_MICRO_TOKENS" engine.use_torch_compile=False \
    model.enable_gradient_checkpointing=False \
    model.path="$MODEL_PATH" model.use_remove_padding="$USE_REMOVE_PADDING" \
    +model.override_config.attn_implementation="$ATTN_IMPL" "${lora[@]}" \
    optim.lr="$LR" optim.lr_warmup_steps_ratio=0.05 optim.lr_scheduler_type=cosine \
    trainer.logger='["console"]' trainer.project_name=selfplay trainer.experiment_name="$EXPERIMENT" \
    trainer.n_gpus_per_node="$N_GPUS" trainer.nnodes="$NNODES" trainer.save_freq=-1 trainer.test_freq=-1 \
    trainer.total_epochs="$EPOCHS" "${steps[@]}" trainer.default_local_dir="$CKPT_DIR" trainer.resume_mode=disable \
    "${sft_args[@]}" "${overrides[@]}"
  merge
  exit 0
fi
STEP=locate-plugin
AGENT_LOOPS=$("$VERL_PYTHON" -m selfplay_gen.verl --config-path)

engine=()
for kv in $SGLANG_ENGINE_KWARGS; do engine+=("+actor_rollout_ref.rollout.engine_kwargs.sglang.$kv"); done
mode_args=()
if [[ $MODE == offline ]]; then
  STEP=read-rollout-n
  summary_file=$(dirname "$TRAIN_FILES")/convert_summary.json
  if [[ -z $agent_n && $DRY_RUN -eq 1 && ! -e $summary_file ]]; then
    agent_n=K   # a dry run before conversion: rollout_n of $summary_file
  elif [[ -z $agent_n ]]; then
    agent_n=$("$VERL_PYTHON" -m convert.summary "$summary_file" rollout_n)
  fi
  mode_args=(actor_rollout_ref.rollout.temperature="$TEMPERATURE" actor_rollout_ref.rollout.top_p="$TOP_P"
             actor_rollout_ref.rollout.calculate_log_probs=True
             algorithm.rollout_correction.rollout_is="$ROLLOUT_IS"
             algorithm.rollout_correction.rollout_is_threshold="$ROLLOUT_IS_THRESHOLD")
fi
if [[ $MODE == online ]]; then
  mode_args=(actor_rollout_ref.rollout.temperature="$TEMPERATURE"
             +selfplay.max_moves="$MAX_MOVES" +selfplay.max_new_tokens="$MAX_NEW_TOKENS")
fi
[[ -z $TOTAL_STEPS ]] || mode_args+=(trainer.total_training_steps="$TOTAL_STEPS")

run train "$VERL_PYTHON" -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo algorithm.use_kl_in_reward=False \
  data.train_files="$TRAIN_FILES" data.val_files="$VAL_FILES" \
  data.train_batch_size="$TRAIN_BATCH_SIZE" \
  data.max_prompt_length="$MAX_PROMPT_LENGTH" data.max_response_length="$MAX_RESPONSE_LENGTH" \
  data.filter_overlong_prompts=True data.truncation=error \
  actor_rollout_ref.model.path="$MODEL_PATH" \
  +actor_rollout_ref.model.override_config.attn_implementation="$ATTN_IMPL" \
  actor_rollout_ref.model.use_remove_padding="$USE_REMOVE_PADDING" \
  actor_rollout_ref.actor.optim.lr="$LR" \
  actor_rollout_ref.actor.ppo_mini_batch_size="$MINI_BATCH_SIZE" \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu="$MICRO_BATCH_SIZE" \
  actor_rollout_ref.actor.use_kl_loss=False \
  actor_rollout_ref.rollout.name=sglang actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.tensor_model_parallel_size="$ROLLOUT_TP" \
  actor_rollout_ref.rollout.gpu_memory_utilization="$GPU_MEMORY_UTILIZATION" \
  actor_rollout_ref.rollout.enforce_eager="$ENFORCE_EAGER" \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu="$MICRO_BATCH_SIZE" \
  actor_rollout_ref.rollout.n="$agent_n" \
  actor_rollout_ref.rollout.agent.agent_loop_config_path="$AGENT_LOOPS" \
  "${engine[@]}" "${mode_args[@]}" \
  trainer.logger='["console"]' trainer.project_name=selfplay trainer.experiment_name="$EXPERIMENT" \
  trainer.n_gpus_per_node="$N_GPUS" trainer.nnodes="$NNODES" \
  trainer.save_freq="$SAVE_FREQ" trainer.test_freq="$TEST_FREQ" trainer.val_before_train=False \
  trainer.total_epochs="$EPOCHS" trainer.default_local_dir="$CKPT_DIR" \
  +ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=selfplay_gen.verl.logprobs.install \
  "${overrides[@]}"

merge
