# shellcheck shell=bash
# One nvidia-h200 lease (one GPU), 135M only, issue 64, in ROOT /tmp/r103 (LS's files name it):
#   bash offline_gpu/gpu_lease.sh unpack /tmp/r103 .lease/r107pack   (LS's finished run without model weights; W)
#   bash offline_gpu/gpu_lease.sh run /tmp/r103 .lease/arms107.sh LS+LSB5+LSB2G
# Of three arms at the league's lr 3.5e-5 with more of the iteration's games against the frozen copy
# (bench/results/negotiation/league_partners_dev_h200_2026-12-02), LS (league.self_play 0.7) was promoted, 58.8%
# [51.2, 66.3] of decided games against the warm start on development draw 1 and 65.9% on draw 2, its self-play joint
# share -1.5 / -2.0 / -0.8 points paired on three readings of 96 games and agreement 96.9% / 97.9% / 95.8%; LSB (the
# copy's seat trained too) kept the deals (joint +4.0 / +2.7, agreement 99% / 100%) and won 58.1% [50.0, 66.1]: not
# promoted. So, on development instances only:
#   LS     a fourth development draw (seeds 1_000_000_352 on, apart from draws 1 and 2 that chose it and draw 3 that
#          read LM), 256 instances x 4 games, both seat orders and both self-plays (CONFIRM); when it meets all three
#          conditions there (GATE, fixed here before any reading: at least 60% of decided games against the warm
#          start, self-play joint share at most 3 points below the warm start's, paired, agreement at least 97%), the
#          run resumed with evaluation.test_split=true reads its final model on the test split, once;
#   LSB5   LSB at lr 5e-5;
#   LSB2G  LSB with twice the games an iteration (1,024).
W_ADAPTER=${W_ADAPTER:-/tmp/r103/W}
# shellcheck disable=SC2034  # read by iterate
COMMON=(servers.start_tries=6 servers.retry_wait_s=20)
LEAGUE=(game=negotiation reward_mode=semi-competitive evaluation.instances=48
  evaluation.games_per_instance=2 warm.policy=teacher warm.games=2048 trainer=grpo trainers.grpo.games_per_iter=512
  trainers.grpo.lora_rank=16 trainers.grpo.batch_size=8 loss.adv_estimator=rloo league.baseline=per-seat
  league_size=3 league.self_play=0.35 league.learner=latest league.past_learners=true league.past_share=0.5)
BOUNDS=(league.joint_margin=0.03 league.min_agreement=0.97)
CONFIRM=(--instances dev --seed 352 --num-instances 256 -k 4)
# a run that fails for a passing reason (the runs share the GPU and its start-ups) resumes once
again() { "$@" || { echo "again: once more after a failure: $*"; sleep 30 && "$@"; }; }
embedded_default() { "${SELFPLAY_PYTHON:-python3}" -c 'from selfplay_gen import models; print(models.resolve(None))'; }
league_arm() { # the run's initial model is the embedded default (initial_model null), which W trained on
  local default
  default=$(embedded_default) && export CUDA_VISIBLE_DEVICES=0 && mem 0.08 0.1 \
    && adopt_warm_adapter "$W_ADAPTER" "$default" \
    && again iterate "${MEMS[@]}" "${LEAGUE[@]}" evaluation.test_split=false "$@"
}
# iteration 1 and the warm start of ARM_DIR's run, folded and served, play CONFIRM into ARM_DIR/confirm
confirm() {
  local run=$ARM_DIR/run out=$ARM_DIR/confirm warm_port=$((PORT_BASE + 50)) port=$((PORT_BASE + 51))
  [[ -e $run/iter_001/train/hf/model.safetensors ]] \
    || python3 -m selfplay_gen.verl.merge_lora --onto "$(embedded_default)" "$run/warm/train/hf" "$run/iter_001/train/hf" \
    || return 1
  export CUDA_VISIBLE_DEVICES=0 SGLANG_ARGS="--mem-fraction-static 0.1" START_TRIES=6 RETRY_WAIT_S=20
  PORT=$warm_port MODEL=$run/warm/train/hf bash offline_gpu/gpu_serve.sh &
  PORT=$port MODEL=$run/iter_001/train/hf bash offline_gpu/gpu_serve.sh || return 1
  wait $! || return 1
  python3 -m selfplay_gen.cli eval --config "$run/iter_001/eval/play.yaml" --backend sglang \
    --base-url "http://127.0.0.1:$port" --model "$run/iter_001/train/hf" --label iter_1 \
    --partner-backend sglang --partner-base-url "http://127.0.0.1:$warm_port" --partner-model "$run/warm/train/hf" \
    --partner-label warm "${CONFIRM[@]}" --out "$out" --resume -q
  local rc=$?
  PORT=$warm_port bash offline_gpu/gpu_serve.sh stop && PORT=$port bash offline_gpu/gpu_serve.sh stop
  return $rc
}
# GATE: exit 0 when ARM_DIR/confirm meets issue 64's three 135M conditions, 3 when not; the reading in gate.json
gate() {
  python3 - "$ARM_DIR/confirm/metrics.json" > "$ARM_DIR/confirm/gate.json" << 'PY'
import json, sys
from selfplay_gen.league.promotion import deal_loss, paired_joint_share
from selfplay_gen.stats.metrics import decided_share
metrics = json.load(open(sys.argv[1]))
share, games = decided_share(metrics, "iter_1", "warm")
loss = deal_loss(metrics, "iter_1", "warm", joint_margin=0.03, min_agreement=0.97)
met = {"decided share >= 0.60": share["mean"] >= 0.60, "joint share within 3 points, agreement >= 0.97": loss is None}
print(json.dumps({"decided_share": share, "games": games, "deal_loss": loss,
                  "joint_share_paired": paired_joint_share(metrics, "iter_1", "warm"),
                  "agreement": metrics["models"]["iter_1"]["agreement_rate"], "met": met,
                  "all_met": all(met.values())}, indent=1))
sys.exit(0 if all(met.values()) else 3)
PY
}
LS_ARGS=(trainers.grpo.lr=3.5e-5 league.self_play=0.7 "${BOUNDS[@]}" num_iterations=1)
arm_LS() { # the pack leaves out the warm adapter that W holds
  adopt_warm_adapter "$W_ADAPTER" "$(embedded_default)" && again confirm || return 1
  gate || { echo "LS: the fourth development draw does not meet the conditions (gate.json): no test reading"; return 0; }
  cat "$ARM_DIR/confirm/gate.json"
  league_arm "${LS_ARGS[@]}" evaluation.test_split=true
}
arm_LSB5() {
  league_arm trainers.grpo.lr=5e-5 league.self_play=0.7 league.self_play_seats=both "${BOUNDS[@]}" num_iterations=1
}
arm_LSB2G() {
  league_arm trainers.grpo.lr=3.5e-5 trainers.grpo.games_per_iter=1024 league.self_play=0.7 league.self_play_seats=both \
    "${BOUNDS[@]}" num_iterations=1
}
