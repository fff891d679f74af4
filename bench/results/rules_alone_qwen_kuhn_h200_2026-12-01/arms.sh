# shellcheck shell=bash
# Arms for one nvidia-h200 lease (one GPU): Qwen2.5-Coder-1.5B on Kuhn Poker (issue 63) beside the 135M's move
# credit with more updates a step (issue 59). 48 transfer calls (p00..p23, then c00..c23 from .qsend); then
#   bash offline_gpu/gpu_lease.sh run /tmp/r98 .lease/arms98.sh QK1+F8
# Issue 63, QK1: the 135M's moves never came to depend on its card (K7, rules_alone_move_credit_h200_2026-12-01:
# from a selected warm start, 40 GRPO steps, it called a bet with J, Q and K alike, 0.58 -> 1.00), where a table
# policy in the same loop learns the card's worth in 32-64 steps (kuhn_tabular_grpo). So Qwen, the model the target
# names: Kuhn Poker from a format warm start in plain moves (raw Qwen loses most games to unboxed or copied moves),
# then online GRPO on the match outcome, no KL (the table arms' best), LoRA 16 at lr 1e-4, 16 steps of 16 x 8. The
# SFT's micro-batch at 8,192 tokens keeps Qwen's 151k-token logits to a share of the GPU beside F8.
# Issue 59, F8: F7 (the per-line move credit from the format warm start: 20 steps, 24-instance probe r 0.13,
# the training games' own-plan share unchanged at 0.71) with 8 PPO updates a step where F7 made 2 (mini-batch 4 of
# its 32 rows) and the credit at weight 2: F7's updates moved the policy little (ppo_kl 0.0001-0.002 after step 1, clip fraction 0.002-0.03); the 64-instance probe: r +0.042 [-0.061, 0.142] paired, i.e. unchanged.
QWEN=${QWEN:-/tmp/qwen} QWEN_IN=${QWEN_IN:-/tmp/qwen-in}
FORMAT_ADAPTER=${FORMAT_ADAPTER:-bench/results/rules_alone_h200_2026-11-28/format_warm_adapter}
# shellcheck disable=SC2034  # read by iterate
COMMON=(evaluation.test_split=false servers.start_tries=6 servers.retry_wait_s=20)
QTA=(initial_model="$QWEN" warm.policy=format warm.games=1024 warm.epochs=1 verl.sft_micro_tokens=8192
  sampling.temperature=1.0 trainer=grpo-online num_iterations=1 trainers.grpo_online.lora_rank=16
  trainers.grpo_online.lr=1e-4 trainers.grpo_online.steps=16 trainers.grpo_online.batch_size=16 games_per_instance=8
  trainers.grpo_online.test_freq=8 trainers.grpo_online.test_instances=16 verl.save_freq=8 loss.clip_ratio_high=0.28
  evaluation.instances=32)
arm_QK1() {
  export CUDA_VISIBLE_DEVICES=0 && qwen_ready && skip_base && mem 0.10 0.15 \
    && iterate "${MEMS[@]}" "${QTA[@]}" game=textarena:KuhnPoker-v0
}
arm_F8() {
  export CUDA_VISIBLE_DEVICES=0 && mem 0.08 0.1 && adopt_warm_adapter "$FORMAT_ADAPTER" "$MODEL" \
    && iterate "${MEMS[@]}" initial_model="$MODEL" warm.policy=format sampling.temperature=1.0 game=matching \
      own_plan_weight=1 evaluation.instances=64 evaluation.games_per_instance=4 evaluation.human_games_per_instance=1 \
      trainer=grpo-online num_iterations=1 trainers.grpo_online.lora_rank=32 trainers.grpo_online.lr=5e-4 \
      trainers.grpo_online.steps=20 trainers.grpo_online.batch_size=32 trainers.grpo_online.mini_batch_size=4 \
      games_per_instance=8 trainers.grpo_online.test_freq=10 trainers.grpo_online.test_instances=16 verl.save_freq=10 \
      loss.clip_ratio_high=0.28 loss.entropy_coeff=0.001 trainers.grpo_online.move_credit=2
}
# QT1: TicTacToe as QK1, for a later lease (two Qwen trainers do not fit one H200: actor peaks 49-56 GB).
arm_QT1() {
  export CUDA_VISIBLE_DEVICES=0 && qwen_ready && skip_base && mem 0.10 0.15 \
    && iterate "${MEMS[@]}" "${QTA[@]}" game=textarena:TicTacToe-v0 loss.use_kl_loss=true loss.kl_loss_coef=0.1
}
# Issue 64, LF: fictitious self-play (past share 0.5) resumed from its iteration 1 (session 86), to iteration 2.
# Needs session 86's W and LF in ROOT first (.lease/r91lf/r91lf.tar.xz unpacked into it).
LEAGUE=(game=negotiation reward_mode=semi-competitive evaluation.instances=48 evaluation.games_per_instance=2
  warm.policy=teacher warm.games=2048 trainer=grpo trainers.grpo.games_per_iter=512 trainers.grpo.lora_rank=16
  trainers.grpo.lr=1e-4 trainers.grpo.batch_size=8 loss.adv_estimator=rloo league.baseline=per-seat league_size=3
  league.self_play=0.35 league.learner=latest)
arm_LF() {
  export CUDA_VISIBLE_DEVICES=0 && mem 0.08 0.1 && adopt_stages W base warm \
    && iterate "${MEMS[@]}" "${LEAGUE[@]}" league.past_learners=true league.past_share=0.5 num_iterations=2
}
