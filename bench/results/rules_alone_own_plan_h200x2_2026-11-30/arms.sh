# shellcheck shell=bash
# Arms for one nvidia-h200-x2 lease, 135M only, one ROOT:
#   bash offline_gpu/gpu_lease.sh run /tmp/r93 .lease/arms93.sh F3
#   bash offline_gpu/gpu_lease.sh run /tmp/r93 .lease/arms93.sh F4+T2
# Issue 59, the 135M from the rules alone, from the committed format warm start (random legal play, 98.1% valid
# moves at the random floor), adopted as the warm stage and folded onto $MODEL by the loop. On the shared reward
# alone it stays at the floor: 20 steps at lr 1e-4, 16 and 18 at 5e-4 (256 games a step), 5 of 1,024 games, one
# filtered-BC iteration (rules_alone_*_2026-11-28, rules_alone_format_long_h200x2_2026-11-30), the proposals'
# own-plan share flat at random play's 0.71. Both arms here add the training reward's own-plan term
# (own_plan_weight=1: + what the agreed matching is worth on the table the seat sees, as a share of its best solo
# plan), which pays each seat for using its own table.
#   F3  online GRPO, lr 5e-4, 20 steps of 32 groups x 8 games (F1 ran 18 in the lease), entropy 0.001, clip-high
#       0.28, validated at 10 and 20, so that its final evaluation fits in the lease. GPU 0.
#   F4  filtered BC, 3 iterations of 4,096 games (256 instances x 16), the best game of each group of 16 by the
#       training reward, lr 1e-3. GPU 1. On scripted random play (CPU) that choice keeps games of reward 0.77 and
#       seat-0 own-plan share 0.85 (by the reward alone: 0.78, 0.83; the best of 8: 0.76, 0.81; all games: 0.60,
#       0.70). The earlier filtered-BC iteration (the best of 8 by the reward, 1,024 games, no own-plan term;
#       rules_alone_bc_h200x4_2026-11-28) changed nothing (-0.004); this one has four times the games an
#       iteration and three iterations.
# Issue 63, T2: TicTacToe from the rules alone as T1 of rules_alone_format_long_h200x2_2026-11-30 (format warm start
# on 1,024 random legal games, 40 online GRPO steps at lr 1e-4), with a KL loss to the warm start (coefficient 0.1)
# in place of the entropy bonus, which did not stop T1's entropy falling 0.41 -> 0.07 (wins against random peaked
# at 59.8%, step 20, and ended at 53.5%). GPU 1, after F4 (two verl jobs on one GPU fit; three did not).
FORMAT_ADAPTER=${FORMAT_ADAPTER:-bench/results/rules_alone_h200_2026-11-28/format_warm_adapter}
# shellcheck disable=SC2034  # read by iterate
COMMON=(evaluation.test_split=false servers.start_tries=6 servers.retry_wait_s=20 initial_model="$MODEL"
  warm.policy=format sampling.temperature=1.0)
mem 0.08 0.1
MATCHING=(game=matching own_plan_weight=1 evaluation.instances=64 evaluation.games_per_instance=4
  evaluation.human_games_per_instance=1)
arm_F3() {
  export CUDA_VISIBLE_DEVICES=0 && adopt_warm_adapter "$FORMAT_ADAPTER" "$MODEL" \
    && iterate "${MEMS[@]}" "${MATCHING[@]}" trainer=grpo-online num_iterations=1 trainers.grpo_online.lora_rank=32 \
      trainers.grpo_online.lr=5e-4 \
      trainers.grpo_online.steps=20 trainers.grpo_online.batch_size=32 games_per_instance=8 \
      trainers.grpo_online.test_freq=10 trainers.grpo_online.test_instances=16 verl.save_freq=10 \
      loss.clip_ratio_high=0.28 loss.entropy_coeff=0.001
}
arm_F4() {
  export CUDA_VISIBLE_DEVICES=1 && adopt_warm_adapter "$FORMAT_ADAPTER" "$MODEL" \
    && iterate "${MEMS[@]}" "${MATCHING[@]}" trainer=filtered-bc num_iterations=3 games_per_instance=16 \
      trainers.filtered_bc.games_per_iter=4096 trainers.filtered_bc.top_fraction=0.0625
}
arm_T2() {
  export CUDA_VISIBLE_DEVICES=1 && iterate "${MEMS[@]}" game=textarena:TicTacToe-v0 warm.games=1024 \
    trainer=grpo-online num_iterations=1 trainers.grpo_online.lora_rank=32 \
    trainers.grpo_online.lr=1e-4 trainers.grpo_online.steps=40 trainers.grpo_online.batch_size=16 \
    games_per_instance=8 trainers.grpo_online.test_freq=10 trainers.grpo_online.test_instances=16 \
    verl.save_freq=10 loss.clip_ratio_high=0.28 loss.use_kl_loss=true loss.kl_loss_coef=0.1 evaluation.instances=32
}
