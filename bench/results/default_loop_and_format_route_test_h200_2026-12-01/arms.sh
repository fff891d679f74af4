# shellcheck shell=bash
# Arms for one nvidia-h200 lease (one GPU), 135M only (24 transfer calls, p00..p23; no Qwen), in one ROOT as two
# runs started together:
#   bash offline_gpu/gpu_lease.sh run /tmp/r101 .lease/arms101.sh D3+FT
#   bash offline_gpu/gpu_lease.sh run /tmp/r101 .lease/arms101.sh W LF+LJ
# Issue 59, the final models of two routes, read once on the test split as the targets ask:
#   D3  the default loop: three iterations of ./run_selfplay_iteration.sh from the embedded default with its
#       defaults (records warm start, filtered BC, 4,096 games an iteration); the target: paired gain on test of
#       at least +0.03. One default iteration gained +0.003 [-0.005, +0.012] on dev.
#   FT  the 135M from the format start, by the route development instances chose: the committed format warm start,
#       one filtered-BC iteration of 4,096 games keeping each group's best of 16 by the reward with the own-plan
#       term (F4's iteration 1: 0.618 [0.603, 0.633] on dev, +0.018 over the warm start; its iterations 2 and 3
#       gave it back, rules_alone_own_plan_h200x2_2026-11-30). The target: 0.75 on test.
# Issue 64, the 135M negotiation league, two remedies for the cooperation its wins cost, from one teacher warm start
# (W), one iteration each; their LoRA adapters (about 10 MB) come back to resume on a later lease:
#   LF  fictitious self-play (past learners, past share 0.5): its iteration 1 of session 86 kept self-play joint
#       share 86.8% (the warm start's 87.4%), its win share unread;
#   LJ  the training reward's joint-outcome term (league.joint_weight 5): a seat paid for deals its partner keeps.
#       The term is WEIGHT x the joint share of the best deal; the best deal is worth 15.5 points on average (10-19,
#       the teacher's games on 64 instances, CPU), own points about 7: at 5 the term weighs a joint
#       point at 0.32 of an own point, where 0.5 would weigh it at 0.03 and change nothing.
# League GRPO's kept 135M checkpoint (negotiation/h100_2026-11-26_test/) wins 64.2% / 72.9% of decided games against
# its warm start on test with joint share -5.2 points (target: within 3).
FORMAT_ADAPTER=${FORMAT_ADAPTER:-bench/results/rules_alone_h200_2026-11-28/format_warm_adapter}
# shellcheck disable=SC2034  # read by iterate
COMMON=(servers.start_tries=6 servers.retry_wait_s=20)
arm_D3() { export CUDA_VISIBLE_DEVICES=0 && mem 0.08 0.1 && iterate "${MEMS[@]}" num_iterations=3; }
arm_FT() {
  export CUDA_VISIBLE_DEVICES=0 && mem 0.08 0.1 && adopt_warm_adapter "$FORMAT_ADAPTER" "$MODEL" \
    && iterate "${MEMS[@]}" initial_model="$MODEL" warm.policy=format sampling.temperature=1.0 game=matching \
      own_plan_weight=1 evaluation.instances=64 evaluation.games_per_instance=4 evaluation.human_games_per_instance=1 \
      trainer=filtered-bc num_iterations=1 games_per_instance=16 trainers.filtered_bc.games_per_iter=4096 \
      trainers.filtered_bc.top_fraction=0.0625
}
LEAGUE=(game=negotiation reward_mode=semi-competitive evaluation.test_split=false evaluation.instances=48
  evaluation.games_per_instance=2 warm.policy=teacher warm.games=2048 trainer=grpo trainers.grpo.games_per_iter=512
  trainers.grpo.lora_rank=16 trainers.grpo.lr=1e-4 trainers.grpo.batch_size=8 loss.adv_estimator=rloo
  league.baseline=per-seat league_size=3 league.self_play=0.35 league.learner=latest num_iterations="${ITERS:-1}")
arm_W() { export CUDA_VISIBLE_DEVICES=0 && mem 0.08 0.1 && iterate "${MEMS[@]}" "${LEAGUE[@]}" num_iterations=0; }
arm_LF() {
  export CUDA_VISIBLE_DEVICES=0 && mem 0.08 0.1 && adopt_stages W base warm \
    && iterate "${MEMS[@]}" "${LEAGUE[@]}" league.past_learners=true league.past_share=0.5
}
arm_LJ() {
  export CUDA_VISIBLE_DEVICES=0 && mem 0.08 0.1 && adopt_stages W base warm \
    && iterate "${MEMS[@]}" "${LEAGUE[@]}" league.joint_weight=5
}
