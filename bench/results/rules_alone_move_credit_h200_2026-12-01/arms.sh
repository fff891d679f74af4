# shellcheck shell=bash
# Arms for one nvidia-h200 lease (one GPU), 135M only, one ROOT:
#   bash offline_gpu/gpu_lease.sh run /tmp/r96 .lease/arms96.sh F7+K7
# (LF needs session 86's W and LF in ROOT first: .lease/r91lf unpacked into it; `run ... LF` on a later lease.)
# Two trainers at a time on the one GPU: two SFTs at 32,768 tokens a micro-batch and two GRPO trainers did not
# fit (rules_alone_selected_warm_h200_2026-12-01).
# Issue 63, K7: Kuhn Poker from a warm start on each seat's first won match of 16 random matches an instance
# (16,384 matches; its rows bet and call by card, and the warm start follows them at the opening bet: 0.71 /
# 0.63 / 0.61 by J / Q / K against the rows' 0.73 / 0.65 / 0.57), then 40 online GRPO steps at lr 1e-4 with a KL
# loss of 0.1 to that warm start: does GRPO keep the card dependence, where from the format start it collapsed to
# always bet, always call (-0.111 / -0.115 against the equilibrium)?
# Issue 64, LF: fictitious self-play (past share 0.5) resumed from its iteration 1 (session 86), to iteration 2,
# whose cross-play against the warm start W is the target's reading (60% of decided games, joint share within 3
# points of W's).
# Issue 59, F7: F3 (rules_alone_own_plan_h200x2_2026-11-30: online GRPO from the committed format warm start,
# own_plan_weight=1, lr 5e-4, 20 steps x 256 games: 0.602 against random 0.606, probe r -0.003) with the move
# credit (trainers.grpo_online.move_credit=1): each proposal line's tokens get its reviewer's z-score on the
# paper's column of the seat's own table added to their advantage, where the game's reward credits every token
# of a game alike. The question: do the proposals come to follow the table (probe r > 0, own-plan share > 0.71)?
FORMAT_ADAPTER=${FORMAT_ADAPTER:-bench/results/rules_alone_h200_2026-11-28/format_warm_adapter}
# shellcheck disable=SC2034  # read by iterate
COMMON=(evaluation.test_split=false servers.start_tries=6 servers.retry_wait_s=20)
mem 0.08 0.1
arm_F7() {
  export CUDA_VISIBLE_DEVICES=0 && adopt_warm_adapter "$FORMAT_ADAPTER" "$MODEL" \
    && iterate "${MEMS[@]}" initial_model="$MODEL" warm.policy=format sampling.temperature=1.0 game=matching \
      own_plan_weight=1 evaluation.instances=64 evaluation.games_per_instance=4 evaluation.human_games_per_instance=1 \
      trainer=grpo-online num_iterations=1 trainers.grpo_online.lora_rank=32 trainers.grpo_online.lr=5e-4 \
      trainers.grpo_online.steps=20 trainers.grpo_online.batch_size=32 games_per_instance=8 \
      trainers.grpo_online.test_freq=10 trainers.grpo_online.test_instances=16 verl.save_freq=10 \
      loss.clip_ratio_high=0.28 loss.entropy_coeff=0.001 trainers.grpo_online.move_credit=1
}
arm_K7() {
  export CUDA_VISIBLE_DEVICES=0 && skip_base && iterate "${MEMS[@]}" initial_model="$MODEL" warm.policy=format \
    sampling.temperature=1.0 game=textarena:KuhnPoker-v0 warm.games=16384 warm.games_per_instance=16 \
    warm.top_fraction=0.0625 trainer=grpo-online num_iterations=1 trainers.grpo_online.lora_rank=32 \
    trainers.grpo_online.lr=1e-4 trainers.grpo_online.steps=40 trainers.grpo_online.batch_size=16 \
    games_per_instance=8 trainers.grpo_online.test_freq=10 trainers.grpo_online.test_instances=16 verl.save_freq=10 \
    loss.clip_ratio_high=0.28 loss.use_kl_loss=true loss.kl_loss_coef=0.1 evaluation.instances=32
}
LEAGUE=(game=negotiation reward_mode=semi-competitive evaluation.instances=48 evaluation.games_per_instance=2
  warm.policy=teacher warm.games=2048 trainer=grpo trainers.grpo.games_per_iter=512 trainers.grpo.lora_rank=16
  trainers.grpo.lr=1e-4 trainers.grpo.batch_size=8 loss.adv_estimator=rloo league.baseline=per-seat league_size=3
  league.self_play=0.35 league.learner=latest)
arm_LF() {
  export CUDA_VISIBLE_DEVICES=0 && adopt_stages W base warm \
    && iterate "${MEMS[@]}" "${LEAGUE[@]}" league.past_learners=true league.past_share=0.5 num_iterations=2
}
