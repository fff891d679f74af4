# shellcheck shell=bash
# Arms for one nvidia-h200 lease (one GPU, four arms beside each other), 135M only, one ROOT:
#   bash offline_gpu/gpu_lease.sh run /tmp/r95 .lease/arms95.sh F5+F6+T3+K6
# Issue 59, the 135M from the rules alone. The format warm start imitates random legal play and stays at the
# floor under every trainer so far, own-plan term included (rules_alone_own_plan_h200x2_2026-11-30: online GRPO
# 20 steps, filtered BC 3 x 4,096 games best of 16: +0.018 then back). On CPU, each seat's best of 64 random games
# an instance (by reward + own-plan share) scores 0.839 with own-plan share 0.899, the best of 16 0.784 and 0.846.
# Both arms warm-start on such a selection of random games (expert iteration's first step, no teacher):
#   F5  best of 64: 2,048 instances x 64 = 131,072 games, about 4,100 rows. GPU 0.
#   F6  best of 16: 4,096 instances x 16 = 65,536 games, about 8,200 rows (more instances, each row less good).
#       GPU 0.
# Random play: 65,536 games in about 3.5 min on one busy core; the conversion tokenizes only the kept rows
# (65,536 games in 38 s).
# Then two filtered-BC iterations on the model's own games (4,096 games, best of 16 by the training reward).
# The warm start's evaluation (64 development instances x 4) is the reading that matters.
# Issue 63, T3: TicTacToe from the same kind of warm start: each seat's best of 16 random games an instance (a win;
# 16,384 games, about 2,000 rows), then T2's online GRPO (40 steps, lr 1e-4, KL loss 0.1 to the warm start).
# Tabular, a perfect imitator of random play's wins wins 69.5% against random (76.0% first, 63.0% second;
# bench/analysis/tictactoe_filtered_imitation.py), above every RL reading so far (T2 57.0%, best 66.8%); the
# format warm start on all random games won 45.9%. GPU 0, beside the others.
# Issue 63, K6: Kuhn Poker the same way (each seat's first won match of 16 random matches an instance, 16,384
# matches), then the same 40 GRPO steps with the KL loss. Tabular, iteration 1 calls a bet by its card (jack
# 0.33, king 0.79) and reads -0.121 / -0.085 against the equilibrium (bench/results/kuhn_tabular_grpo/); every GRPO
# run of the model ended card-blind at -0.12 / -0.13. GPU 0, beside the others.
# shellcheck disable=SC2034  # read by iterate
COMMON=(evaluation.test_split=false servers.start_tries=6 servers.retry_wait_s=20 initial_model="$MODEL"
  warm.policy=format sampling.temperature=1.0)
mem 0.1 0.15
MATCHING=(game=matching own_plan_weight=1 evaluation.instances=64 evaluation.games_per_instance=4
  evaluation.human_games_per_instance=1 trainer=filtered-bc num_iterations=2 games_per_instance=16
  trainers.filtered_bc.games_per_iter=4096 trainers.filtered_bc.top_fraction=0.0625)
arm_F5() {
  export CUDA_VISIBLE_DEVICES=0 && skip_base && iterate "${MEMS[@]}" "${MATCHING[@]}" warm.games=131072 \
    warm.games_per_instance=64 warm.top_fraction=0.015625
}
arm_F6() {
  export CUDA_VISIBLE_DEVICES=0 && skip_base && iterate "${MEMS[@]}" "${MATCHING[@]}" warm.games=65536 \
    warm.games_per_instance=16 warm.top_fraction=0.0625
}
arm_T3() {
  export CUDA_VISIBLE_DEVICES=0 && skip_base && iterate "${MEMS[@]}" game=textarena:TicTacToe-v0 warm.games=16384 \
    warm.games_per_instance=16 warm.top_fraction=0.0625 trainer=grpo-online num_iterations=1 \
    trainers.grpo_online.lora_rank=32 trainers.grpo_online.lr=1e-4 trainers.grpo_online.steps=40 \
    trainers.grpo_online.batch_size=16 games_per_instance=8 trainers.grpo_online.test_freq=10 \
    trainers.grpo_online.test_instances=16 verl.save_freq=10 loss.clip_ratio_high=0.28 loss.use_kl_loss=true \
    loss.kl_loss_coef=0.1 evaluation.instances=32
}
arm_K6() {
  export CUDA_VISIBLE_DEVICES=0 && skip_base && iterate "${MEMS[@]}" game=textarena:KuhnPoker-v0 warm.games=16384 \
    warm.games_per_instance=16 warm.top_fraction=0.0625 trainer=grpo-online num_iterations=1 \
    trainers.grpo_online.lora_rank=32 trainers.grpo_online.lr=1e-4 trainers.grpo_online.steps=40 \
    trainers.grpo_online.batch_size=16 games_per_instance=8 trainers.grpo_online.test_freq=10 \
    trainers.grpo_online.test_instances=16 verl.save_freq=10 loss.clip_ratio_high=0.28 loss.use_kl_loss=true \
    loss.kl_loss_coef=0.1 evaluation.instances=32
}
