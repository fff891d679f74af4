#!/usr/bin/env bash
# Smoke test for the train bundle: verl 0.9.1 GRPO with an SGLang rollout on one GPU, a toy task, 2 steps.
# Verified on one H200 with SmolLM2-135M-Instruct converted by prepare_model.sh (model dir /tmp/smollm2):
# step 1 took 53 s (engine start, JIT), step 2 took 7.7 s; a checkpoint was written at global_step_2 and
# `python3 -m verl.model_merger merge --backend fsdp --local_dir .../global_step_2/actor --target_dir OUT`
# produced a Hugging Face directory. The same run without trainer.use_v1=False (verl's default V1 trainer,
# which needs the TransferQueue package of the train bundle) also completed 2 steps.
set -x
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 CUDA_HOME=/usr/local/cuda
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 RAY_DEDUP_LOGS=0 VERL_LOGGING_LEVEL=WARN
mkdir -p /tmp/toy && cd /tmp/toy || exit 1
python3 - <<'PY'
import pandas as pd
rows=[{"data_source":"toy","prompt":[{"role":"user","content":f"Reply with just the number seven. ({i})"}],"ability":"toy","reward_model":{"style":"rule","ground_truth":"7"},"extra_info":{"index":i}} for i in range(64)]
pd.DataFrame(rows).to_parquet("train.parquet"); pd.DataFrame(rows[:8]).to_parquet("val.parquet")
open("reward.py","w").write("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n    return 1.0 if ('7' in solution_str or 'seven' in solution_str.lower()) else 0.0\n")
PY
timeout 560 python3 -m verl.trainer.main_ppo \
 algorithm.adv_estimator=grpo trainer.use_v1=False \
 data.train_files=/tmp/toy/train.parquet data.val_files=/tmp/toy/val.parquet \
 data.train_batch_size=8 data.max_prompt_length=128 data.max_response_length=64 \
 actor_rollout_ref.model.path=/tmp/smollm2 \
 +actor_rollout_ref.model.override_config.attn_implementation=sdpa \
 actor_rollout_ref.model.use_remove_padding=False \
 actor_rollout_ref.actor.optim.lr=1e-6 actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \
 actor_rollout_ref.actor.use_kl_loss=False \
 actor_rollout_ref.rollout.name=sglang actor_rollout_ref.rollout.mode=async \
 actor_rollout_ref.rollout.tensor_model_parallel_size=1 actor_rollout_ref.rollout.gpu_memory_utilization=0.4 \
 actor_rollout_ref.rollout.n=4 actor_rollout_ref.rollout.enforce_eager=True \
 +actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=triton \
 +actor_rollout_ref.rollout.engine_kwargs.sglang.sampling_backend=pytorch \
 +actor_rollout_ref.rollout.engine_kwargs.sglang.grammar_backend=none \
 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \
 reward.custom_reward_function.path=/tmp/toy/reward.py reward.custom_reward_function.name=compute_score \
 algorithm.use_kl_in_reward=False trainer.logger='["console"]' trainer.project_name=smoke trainer.experiment_name=toy \
 trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.save_freq=2 trainer.test_freq=-1 trainer.val_before_train=False \
 trainer.total_training_steps=2 trainer.total_epochs=1 trainer.default_local_dir=/tmp/toy/ckpt 2>&1 | tee /tmp/toy/train.log | grep -v "^\s*$" | grep -iE "error|Traceback|step:|critic/score|exception|Killed" | head -60
echo "EXIT ${PIPESTATUS[0]}"
find /tmp/toy/ckpt 2>/dev/null | head -20
