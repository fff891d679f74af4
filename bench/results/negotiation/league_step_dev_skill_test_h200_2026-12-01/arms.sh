# shellcheck shell=bash
# One nvidia-h200 lease (one GPU), 135M only, issue 64, in ROOT /tmp/r103 (LQ's and S2's files name it):
#   bash offline_gpu/gpu_lease.sh unpack /tmp/r103 .lease/r104pack   (LQ's and S2's runs of the lease before, no games)
#   bash offline_gpu/gpu_lease.sh run /tmp/r103 .lease/arms104.sh LQ+LM+LMJ+S2
# The league's iteration 1 with its whole update trades deals for wins along the step size
# (bench/results/negotiation/league_float32_dev_h200_2026-12-01): lr 2.5e-5 keeps the deals (joint -1.8, agreement
# 97.9%) and wins 56% of decided games (interval reaching below 50%), lr 5e-5 loses 10.7 points of joint share, lr
# 1e-4 wins 85% and loses 18.4; the joint term at weight 5 and lr 1e-4 keeps the deals and loses (25%). Per point of
# win share the small step costs the least cooperation, so, on development instances:
#   LQ   the lr 2.5e-5 run resumed for its iteration 2 (trains on from its iteration 1, league.learner=latest,
#        against its frozen copy and past learners);
#   LM   lr 3.5e-5, iteration 1;
#   LMJ  lr 3.5e-5 with the joint-outcome term at 1.5, iteration 1.
# S2: the skill run of the lease before resumed with evaluation.test_split=true: its final model (the skill warm
# start, levels ordered on the skill-match instances) read once on the test split, levels included (52ce39b).
W_ADAPTER=${W_ADAPTER:-bench/results/negotiation/league_remedies_h200_2026-12-01/adapters/warm}
# shellcheck disable=SC2034  # read by iterate
COMMON=(servers.start_tries=6 servers.retry_wait_s=20)
LEAGUE=(game=negotiation reward_mode=semi-competitive evaluation.instances=48
  evaluation.games_per_instance=2 warm.policy=teacher warm.games=2048 trainer=grpo trainers.grpo.games_per_iter=512
  trainers.grpo.lora_rank=16 trainers.grpo.batch_size=8 loss.adv_estimator=rloo league.baseline=per-seat
  league_size=3 league.self_play=0.35 league.learner=latest league.past_learners=true league.past_share=0.5)
# a run that fails for a passing reason (the four runs share the GPU and its start-ups) resumes once
again() { "$@" || { echo "again: once more after a failure: $*"; sleep 30 && "$@"; }; }
league_arm() { # the run's initial model is the embedded default (initial_model null), which W trained on
  local default
  default=$("${SELFPLAY_PYTHON:-python3}" -c 'from selfplay_gen import models; print(models.resolve(None))') \
    && export CUDA_VISIBLE_DEVICES=0 && mem 0.08 0.1 && adopt_warm_adapter "$W_ADAPTER" "$default" \
    && again iterate "${MEMS[@]}" "${LEAGUE[@]}" evaluation.test_split=false "$@"
}
arm_LQ() { league_arm trainers.grpo.lr=2.5e-5 num_iterations="${ITERS:-2}"; }
arm_LM() { league_arm trainers.grpo.lr=3.5e-5 num_iterations=1; }
arm_LMJ() { league_arm trainers.grpo.lr=3.5e-5 league.joint_weight=1.5 num_iterations=1; }
arm_S2() {
  export CUDA_VISIBLE_DEVICES=0 && mem 0.08 0.1 && skip_base && again iterate "${MEMS[@]}" "${LEAGUE[@]}" \
    num_iterations=0 trainers.grpo.lr=1e-4 warm.games=6144 league.skill_levels=novice,intermediate,expert \
    league.skill_data=quantile evaluation.test_split=true
}
