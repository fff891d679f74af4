# shellcheck shell=bash
# One nvidia-h200 lease (one GPU), 135M only, issue 64, in ROOT /tmp/r103:
#   bash offline_gpu/gpu_lease.sh unpack /tmp/r103 .lease/r105pack   (W, the warm adapter; LM's finished run)
#   bash offline_gpu/gpu_lease.sh run /tmp/r103 .lease/arms106.sh LS+LB+LSB
# The league's iteration 1 at lr 3.5e-5 (LM) won 61.2% [58.6, 63.6] of decided games against its warm start on a
# third development draw of 256 instances x 4 games, but its self-play lost 3.5 [1.8, 5.3] points of joint share,
# paired, and kept 95.5% [94.0, 96.8] of deals (warm start 98.1%): the gate of the 135M conditions was not met and
# no test reading was made (bench/results/negotiation/league_confirm_dev_h200_2026-12-02). Its games are longer
# (12.4 moves against 10.5): it holds out for more, which paid against the scripted negotiators and the frozen copy
# of the iteration's games; and 33 of its 46 lost deals follow an offer whose halves do not add up to the pool,
# which the scripted negotiators forgive (they read the "I take" half only) and a model partner does not. So, at
# LM's step, on development instances only, three arms put more of the iteration's games against partners that
# read messages as the model does:
#   LS   twice the games against its own frozen copy (league.self_play 0.7);
#   LB   the frozen copy's seat of those games trained too (league.self_play_seats=both);
#   LSB  both.
# Each promotes only within the 135M conditions' own bounds on its promotion match (BOUNDS). A promoted arm is a
# candidate for the confirmation LM had, on a later lease (`confirm` and `gate` of
# bench/results/negotiation/league_step_dev_skill_test_h200_2026-12-01/arms_next.sh: a third development draw,
# then the test split only when that draw meets all three conditions).
W_ADAPTER=${W_ADAPTER:-/tmp/r103/W}
# shellcheck disable=SC2034  # read by iterate
COMMON=(servers.start_tries=6 servers.retry_wait_s=20)
LEAGUE=(game=negotiation reward_mode=semi-competitive evaluation.instances=48
  evaluation.games_per_instance=2 warm.policy=teacher warm.games=2048 trainer=grpo trainers.grpo.games_per_iter=512
  trainers.grpo.lora_rank=16 trainers.grpo.batch_size=8 loss.adv_estimator=rloo league.baseline=per-seat
  league_size=3 league.self_play=0.35 league.learner=latest league.past_learners=true league.past_share=0.5)
BOUNDS=(league.joint_margin=0.03 league.min_agreement=0.97)
# a run that fails for a passing reason (the runs share the GPU and its start-ups) resumes once
again() { "$@" || { echo "again: once more after a failure: $*"; sleep 30 && "$@"; }; }
embedded_default() { "${SELFPLAY_PYTHON:-python3}" -c 'from selfplay_gen import models; print(models.resolve(None))'; }
league_arm() { # the run's initial model is the embedded default (initial_model null), which W trained on
  local default
  default=$(embedded_default) && export CUDA_VISIBLE_DEVICES=0 && mem 0.08 0.1 \
    && adopt_warm_adapter "$W_ADAPTER" "$default" \
    && again iterate "${MEMS[@]}" "${LEAGUE[@]}" evaluation.test_split=false "$@"
}
arm_LS() { league_arm trainers.grpo.lr=3.5e-5 league.self_play=0.7 "${BOUNDS[@]}" num_iterations=1; }
arm_LB() { league_arm trainers.grpo.lr=3.5e-5 league.self_play_seats=both "${BOUNDS[@]}" num_iterations=1; }
arm_LSB() {
  league_arm trainers.grpo.lr=3.5e-5 league.self_play=0.7 league.self_play_seats=both "${BOUNDS[@]}" num_iterations=1
}
