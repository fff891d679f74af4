# shellcheck shell=bash
# Arms for one nvidia-h200 lease (one GPU): Qwen2.5-Coder-1.5B on Kuhn Poker with the chips reward and a KL loss to
# its format warm start (issue 63), two settings side by side. 48 transfer calls (p00..p23, then c00..c23 from
# .qsend), then one that carries .lease/qk1warm (QK1's warm adapter and its evaluation); then
#   bash offline_gpu/gpu_lease.sh run /tmp/r99 .lease/arms99.sh QK2a+QK2b
# Why (rules_alone_qwen_kuhn_h200_2026-12-01): QK1, on the match's outcome with no KL, settled on always bet,
# always call by step 8 (-0.114 / -0.119 against the equilibrium), after which every group's advantages were 0.
# The table loop with a card-blind shared term reproduces that (-0.111 / -0.112) and keeps the card in play with
# the chips reward and a KL loss of 0.1 to random play (-0.067 / +0.015 at step 64; kuhn_tabular_grpo, card weight
# 0.3). QK1's warm start plays random legal moves, so a KL loss to it is the table's KL to random play.
# QK2a: chips, KL 0.1, lr 1e-4 (QK1's); QK2b: chips, KL 0.2, lr 2e-4 (the table's faster setting).
# 24 steps, one checkpoint (its evaluation alone fits the lease: start-up about 400 s, 22-25 s a step side by side).
QWEN=${QWEN:-/tmp/qwen} QWEN_IN=${QWEN_IN:-/tmp/qwen-in} QK_WARM=${QK_WARM:-.lease/qk1warm}
# shellcheck disable=SC2034  # read by iterate
COMMON=(evaluation.test_split=false servers.start_tries=6 servers.retry_wait_s=20)
QK2=(initial_model="$QWEN" warm.policy=format sampling.temperature=1.0 trainer=grpo-online num_iterations=1
  game=textarena:KuhnPoker-v0 reward_mode=chips trainers.grpo_online.lora_rank=16 trainers.grpo_online.steps=24
  trainers.grpo_online.batch_size=16 games_per_instance=8 trainers.grpo_online.test_freq=12
  trainers.grpo_online.test_instances=16 verl.save_freq=24 loss.clip_ratio_high=0.28 loss.use_kl_loss=true
  evaluation.instances=32)
# QK1's finished warm stage (its LoRA adapter on Qwen and that model's evaluation) as this arm's
qk1_warm() {
  qwen_ready && adopt_warm_adapter "$QK_WARM/lora_adapter" "$QWEN" \
    && { [[ -f $ARM_DIR/run/warm/eval/DONE ]] || tar -xJf "$QK_WARM/warm_eval.tar.xz" -C "$ARM_DIR/run/warm"; }
}
arm_QK2a() {
  export CUDA_VISIBLE_DEVICES=0 && qk1_warm && mem 0.10 0.15 \
    && iterate "${MEMS[@]}" "${QK2[@]}" loss.kl_loss_coef=0.1 trainers.grpo_online.lr=1e-4
}
arm_QK2b() {
  export CUDA_VISIBLE_DEVICES=0 && qk1_warm && mem 0.10 0.15 \
    && iterate "${MEMS[@]}" "${QK2[@]}" loss.kl_loss_coef=0.2 trainers.grpo_online.lr=2e-4
}
# K8: the same change on the 135M model (K7 and the format start's GRPO went always bet, always call on the outcome),
# from its own format warm start in plain moves; 40 steps of about 10 s. Not beside two Qwen trainers: three verl
# jobs on one H200 did not fit (session 86: the third one's rollout server found no memory).
arm_K8() {
  export CUDA_VISIBLE_DEVICES=0 && skip_base && mem 0.04 0.05 \
    && iterate "${MEMS[@]}" initial_model="$MODEL" warm.policy=format warm.games=1024 sampling.temperature=1.0 \
      game=textarena:KuhnPoker-v0 reward_mode=chips trainer=grpo-online num_iterations=1 \
      trainers.grpo_online.lora_rank=32 trainers.grpo_online.lr=1e-4 trainers.grpo_online.steps=40 \
      trainers.grpo_online.batch_size=16 games_per_instance=8 trainers.grpo_online.test_freq=20 \
      trainers.grpo_online.test_instances=16 verl.save_freq=20 loss.clip_ratio_high=0.28 loss.use_kl_loss=true \
      loss.kl_loss_coef=0.1 evaluation.instances=32
}
# QT1: TicTacToe from a format warm start in plain moves, for a later lease.
QTA=(initial_model="$QWEN" warm.policy=format warm.games=1024 warm.epochs=1 verl.sft_micro_tokens=8192
  sampling.temperature=1.0 trainer=grpo-online num_iterations=1 trainers.grpo_online.lora_rank=16
  trainers.grpo_online.lr=1e-4 trainers.grpo_online.steps=16 trainers.grpo_online.batch_size=16 games_per_instance=8
  trainers.grpo_online.test_freq=8 trainers.grpo_online.test_instances=16 verl.save_freq=8 loss.clip_ratio_high=0.28
  evaluation.instances=32)
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
