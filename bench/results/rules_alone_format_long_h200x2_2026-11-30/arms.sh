# shellcheck shell=bash
# Arms for one nvidia-h200-x2 lease, 135M only (no Qwen chunks), in one ROOT so that every arm has ports of its own:
#   bash offline_gpu/gpu_lease.sh run /tmp/r91 .lease/arms91.sh F1+F2+T1
#   bash offline_gpu/gpu_lease.sh run /tmp/r91 .lease/arms91.sh W L0+LF
#   bash offline_gpu/gpu_lease.sh run /tmp/r91 .lease/arms91.sh S
# Issue 59, the 135M from the rules alone, from the committed format warm start (rules_alone_h200_2026-11-28: 2,048
# games of random legal play, 98.1% valid moves at the random floor), adopted as the warm stage and folded onto
# $MODEL by the loop. Its GRPO runs so far (20 steps at lr 1e-4, 16 at 5e-4, 256 games a step) stayed at the floor.
# Under random legal play a group's rewards spread by 0.11 (sd) and follow what the proposer sees of the accepted
# proposal only loosely (r 0.37 within groups; scripted random play, 64 development instances x 8, on CPU), and that
# credit is shared by the proposal's eight lines: a step may need more games.
#   F1  lr 5e-4, 40 steps of 32 groups x 8 games (256 a step), GPU 0: as before, but longer.
#   F2  lr 5e-4, 20 steps of 64 groups x 16 games (1,024 a step), GPU 1: four times the games a step.
# Issue 63, T1: TicTacToe from the rules alone (format warm start on 1,024 random legal games), online GRPO 40 steps
# at lr 1e-4 with entropy bonus 0.005: the 16-step run at lr 3e-4 and 0.001 reached 66.8% wins against random play
# while its entropy fell 0.42 -> 0.06 (rules_alone_one_gpu_h200_2026-11-28). GPU 0.
# Issue 64: W the negotiation warm start the league arms adopt (GPU 0); S skill levels as strength
# (league.skill_data=quantile, never run on a GPU): each level judged against the scripted negotiators of strengths
# 0.3, 0.6 and 1 and the unconditioned model (skill_levels.json), GPU 1; then L0 the league as it stands (GPU 0) and
# LF fictitious self-play (GPU 1), three iterations each.
FORMAT_ADAPTER=${FORMAT_ADAPTER:-bench/results/rules_alone_h200_2026-11-28/format_warm_adapter}
# offline_gpu/arms.sh's iterate, adopt_warm_adapter, adopt_stages and mem, sourced by gpu_lease.sh before this file
# shellcheck disable=SC2034  # read by iterate
COMMON=(evaluation.test_split=false servers.start_tries=6 servers.retry_wait_s=20)
mem 0.08 0.1
ONLINE=(initial_model="$MODEL" warm.policy=format trainer=grpo-online num_iterations=1 trainers.grpo_online.lora_rank=32
  trainers.grpo_online.test_freq=10 trainers.grpo_online.test_instances=16 verl.save_freq=10 sampling.temperature=1.0
  loss.clip_ratio_high=0.28 evaluation.instances=32 evaluation.games_per_instance=4)
MATCHING=(game=matching evaluation.human_games_per_instance=1 trainers.grpo_online.lr=5e-4 loss.entropy_coeff=0.001)
arm_F1() {
  export CUDA_VISIBLE_DEVICES=0 && adopt_warm_adapter "$FORMAT_ADAPTER" "$MODEL" \
    && iterate "${MEMS[@]}" "${ONLINE[@]}" "${MATCHING[@]}" trainers.grpo_online.steps=40 \
      trainers.grpo_online.batch_size=32 games_per_instance=8
}
arm_F2() {
  export CUDA_VISIBLE_DEVICES=1 && adopt_warm_adapter "$FORMAT_ADAPTER" "$MODEL" \
    && iterate "${MEMS[@]}" "${ONLINE[@]}" "${MATCHING[@]}" trainers.grpo_online.steps=20 \
      trainers.grpo_online.batch_size=64 games_per_instance=16
}
arm_T1() {
  export CUDA_VISIBLE_DEVICES=0 && iterate "${MEMS[@]}" "${ONLINE[@]}" game=textarena:TicTacToe-v0 warm.games=1024 \
    trainers.grpo_online.lr=1e-4 loss.entropy_coeff=0.005 trainers.grpo_online.steps=40 \
    trainers.grpo_online.batch_size=16 games_per_instance=8
}

LEAGUE=(game=negotiation reward_mode=semi-competitive evaluation.instances=48 evaluation.games_per_instance=2
  warm.policy=teacher warm.games=2048 trainer=grpo trainers.grpo.games_per_iter=512 trainers.grpo.lora_rank=16
  trainers.grpo.lr=1e-4 trainers.grpo.batch_size=8 loss.adv_estimator=rloo league.baseline=per-seat league_size=3
  league.self_play=0.35 league.learner=latest num_iterations="${ITERS:-3}")
arm_W() { export CUDA_VISIBLE_DEVICES=0 && iterate "${MEMS[@]}" "${LEAGUE[@]}" num_iterations=0; }
arm_S() {
  export CUDA_VISIBLE_DEVICES=1 && iterate "${MEMS[@]}" "${LEAGUE[@]}" num_iterations=0 \
    league.skill_levels=novice,intermediate,expert league.skill_data=quantile
}
arm_L0() { export CUDA_VISIBLE_DEVICES=0 && adopt_stages W base warm && iterate "${MEMS[@]}" "${LEAGUE[@]}"; }
arm_LF() {
  export CUDA_VISIBLE_DEVICES=1 && adopt_stages W base warm \
    && iterate "${MEMS[@]}" "${LEAGUE[@]}" league.past_learners=true league.past_share=0.5
}
