# shellcheck shell=bash
# One nvidia-h200 lease (one GPU), 135M only, issue 64, in ROOT /tmp/r103 (the runs' files name it):
#   bash offline_gpu/gpu_lease.sh unpack /tmp/r103 .lease/r108pack   (W; LSB5's and LSB2G's runs with their adapters)
#   bash offline_gpu/gpu_lease.sh run /tmp/r103 .lease/arms108.sh LSB5+LSB4+LSB2G
# The league's iteration 1 from the teacher warm start W with 70% of its games against its frozen copy and both
# seats trained (league.self_play_seats=both), on development instances
# (bench/results/negotiation/league_update_size_dev_h200_2026-12-02): at lr 3.5e-5 and 512 games (LSB) it keeps
# every deal and wins 58.1% [50.0, 66.1] of decided games against the warm start; at lr 5e-5 (LSB5) 81.6%
# [75.1, 87.6] with its self-play joint share 12.6 points below the warm start's, paired; with 1,024 games (LSB2G)
# 81.8% with 71.9 points below (its self-play mostly runs to the move limit). Each one's frozen copy was the warm
# start, which gives way; a holding-out learner meets its equal only in the next iteration, whose frozen copy is the
# learner itself (league.learner=latest). So, on development instances only:
#   LSB5   LSB5's run resumed for iteration 2 (num_iterations=2): its frozen copy is LSB5's iteration 1;
#   LSB2G  LSB2G's run resumed likewise, from a learner whose self-play keeps 22% of its deals;
#   LSB4   LSB at lr 4e-5, one iteration, between LSB's and LSB5's update.
# A checkpoint promoted here is confirmed on a fifth development draw (seeds 1_000_000_608 on) before any test
# reading, under the gate of league_partners_dev_h200_2026-12-02/arms_next.sh.
W_ADAPTER=${W_ADAPTER:-/tmp/r103/W}
# shellcheck disable=SC2034  # read by iterate
COMMON=(servers.start_tries=6 servers.retry_wait_s=20)
LEAGUE=(game=negotiation reward_mode=semi-competitive evaluation.instances=48
  evaluation.games_per_instance=2 warm.policy=teacher warm.games=2048 trainer=grpo trainers.grpo.games_per_iter=512
  trainers.grpo.lora_rank=16 trainers.grpo.batch_size=8 loss.adv_estimator=rloo league.baseline=per-seat
  league_size=3 league.self_play=0.35 league.learner=latest league.past_learners=true league.past_share=0.5)
BOUNDS=(league.joint_margin=0.03 league.min_agreement=0.97)
embedded_default() { "${SELFPLAY_PYTHON:-python3}" -c 'from selfplay_gen import models; print(models.resolve(None))'; }
# the run's initial model is the embedded default (initial_model null), which W trained on; offline GRPO trains
# without verl's rollout engine, which it never samples from (verl.offline_engine=false: about 150 s less start-up
# an iteration); a run that fails (the runs share the GPU and its start-ups) resumes once with the engine
league_arm() {
  local default
  default=$(embedded_default) && export CUDA_VISIBLE_DEVICES=0 && mem 0.08 0.1 \
    && adopt_warm_adapter "$W_ADAPTER" "$default" || return 1
  local run=("${MEMS[@]}" "${LEAGUE[@]}" evaluation.test_split=false)
  iterate "${run[@]}" verl.offline_engine=false "$@" \
    || { echo "again: once more, with verl's rollout engine, after a failure"; sleep 30 && iterate "${run[@]}" "$@"; }
}
LSB=(league.self_play=0.7 league.self_play_seats=both "${BOUNDS[@]}")
arm_LSB5() { league_arm trainers.grpo.lr=5e-5 "${LSB[@]}" num_iterations=2; }
arm_LSB2G() { league_arm trainers.grpo.lr=3.5e-5 trainers.grpo.games_per_iter=1024 "${LSB[@]}" num_iterations=2; }
arm_LSB4() { league_arm trainers.grpo.lr=4e-5 "${LSB[@]}" num_iterations=1; }
