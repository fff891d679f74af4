# shellcheck shell=bash
# One nvidia-h200 lease (one GPU), 135M only, issue 64, in ROOT /tmp/r103 (the runs' files name it):
#   bash offline_gpu/gpu_lease.sh unpack /tmp/r103 .lease/r109pack   (W; LSB5's run after its iteration 1, adapters)
#   bash offline_gpu/gpu_lease.sh run /tmp/r103 .lease/arms109.sh LSM+LSM4+L2
# On development instances (bench/results/negotiation/league_second_iteration_dev_h200_2026-12-02): LSB5's
# iteration 2 (lr 5e-5, 70% of its games against its hold-out iteration 1) gives back the hold-out, keeping every
# deal and 56.5% [48.3, 65.4] of decided games against the warm start (iteration 1: 81.6%, agreement 82%); LSB4
# (lr 4e-5) wins 55.6%. LS (lr 3.5e-5) came closest to the three 135M conditions on draw 4: 59.3%, joint -2.4
# points, agreement 95.7%, where 24 of its 44 lost deals followed an offer whose halves do not add up. So:
#   LSM    LS with the training reward's misstatement term (league.misstatement_penalty=2: 2 points a message
#          the game's state contradicts), one iteration from W;
#   LSM4   LSM at lr 4e-5;
#   L2     LSB5's run forked after its iteration 1 (its stages copied; the league names checkpoints relative to
#          the run) and trained on at lr 2.5e-5 for iteration 2: half of LSB5's second step.
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
# without verl's rollout engine (verl.offline_engine=false); a run that fails (the runs share the GPU and its
# start-ups) resumes once with the engine
league_arm() {
  local default
  default=$(embedded_default) && export CUDA_VISIBLE_DEVICES=0 && mem 0.08 0.1 \
    && adopt_warm_adapter "$W_ADAPTER" "$default" || return 1
  local run=("${MEMS[@]}" "${LEAGUE[@]}" evaluation.test_split=false)
  iterate "${run[@]}" verl.offline_engine=false "$@" \
    || { echo "again: once more, with verl's rollout engine, after a failure"; sleep 30 && iterate "${run[@]}" "$@"; }
}
LS=(league.self_play=0.7 "${BOUNDS[@]}")
arm_LSM() { league_arm trainers.grpo.lr=3.5e-5 "${LS[@]}" league.misstatement_penalty=2 num_iterations=1; }
arm_LSM4() { league_arm trainers.grpo.lr=4e-5 "${LS[@]}" league.misstatement_penalty=2 num_iterations=1; }
arm_L2() {
  adopt_stages LSB5 base warm iter_001 \
    && league_arm trainers.grpo.lr=2.5e-5 "${LS[@]}" league.self_play_seats=both num_iterations=2
}
