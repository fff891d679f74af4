# shellcheck shell=bash
# Arms for one nvidia-h200 lease (one GPU): Qwen2.5-Coder-1.5B on Kuhn Poker, chips reward, KL loss 0.2 to its
# format warm start (issue 63), QK2b at 4 and 8 times its learning rate, side by side. 48 transfer calls (p00..p23,
# then c00..c23 from .qsend), then
#   bash offline_gpu/gpu_lease.sh run /tmp/r100 RESULTS_DIR/arms.sh QK3a+QK3b   (RESULTS_DIR: this directory)
# Why (rules_alone_qwen_kuhn_chips_kl_h200_2026-12-01): QK2b (KL 0.2, lr 2e-4) started to read its card (opening
# bet J 0.48 -> 0.31, K 0.47 -> 0.78) but ended -0.168 / -0.096 against the equilibrium; its per-step KL between
# policies (ppo_kl 0.0013) matches the table loop's at Adam 0.1, which is not within 0.05 by 128 steps; at 0.4 the
# table is within by 32 steps, at 0.8 by 24 (kuhn_tabular_grpo --arm chips:0.2, card weight 0.3).
# Each arm makes its own format warm start (QK1's recipe: 1,024 matches of random legal play, one epoch of SFT).
# The training games log their strategy at each step (games/kuhn_<set>_moves, _aggressive: kuhn_steps.py).
QWEN=${QWEN:-/tmp/qwen} QWEN_IN=${QWEN_IN:-/tmp/qwen-in}
# shellcheck disable=SC2034  # read by iterate
COMMON=(evaluation.test_split=false servers.start_tries=6 servers.retry_wait_s=20 servers.cuda_graph_max_bs=0)
QK3=(initial_model="$QWEN" warm.policy=format warm.games=1024 warm.epochs=1 verl.sft_micro_tokens=8192
  sampling.temperature=1.0 trainer=grpo-online num_iterations=1 game=textarena:KuhnPoker-v0 reward_mode=chips
  trainers.grpo_online.lora_rank=16 trainers.grpo_online.steps=24 trainers.grpo_online.batch_size=16
  games_per_instance=8 trainers.grpo_online.test_freq=-1 verl.save_freq=24 loss.clip_ratio_high=0.28
  loss.use_kl_loss=true loss.kl_loss_coef=0.2 evaluation.instances=32 crossplay=false)
arm_QK3a() {
  export CUDA_VISIBLE_DEVICES=0 && qwen_ready && skip_base && mem 0.10 0.15 \
    && iterate "${MEMS[@]}" "${QK3[@]}" trainers.grpo_online.lr=8e-4
}
arm_QK3b() {
  export CUDA_VISIBLE_DEVICES=0 && qwen_ready && skip_base && mem 0.10 0.15 \
    && iterate "${MEMS[@]}" "${QK3[@]}" trainers.grpo_online.lr=1.6e-3
}
