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
# A checkpoint promoted here is confirmed in the same arm on a fifth development draw (CONFIRM: seeds 1_000_000_608
# on, 256 instances x 4 games a seat order, both self-plays) under the gate of
# league_partners_dev_h200_2026-12-02/arms_next.sh (GATE: at least 60% of decided games against the warm start,
# self-play joint share at most 3 points below the warm start's, paired, agreement at least 97%); only a checkpoint
# that meets it is read on the test split, once, on a later lease. The runs skip the cross-play report on
# development draw 2 (crossplay=false), which the confirmation supersedes.
W_ADAPTER=${W_ADAPTER:-/tmp/r103/W}
# shellcheck disable=SC2034  # read by iterate
COMMON=(servers.start_tries=6 servers.retry_wait_s=20)
LEAGUE=(game=negotiation reward_mode=semi-competitive evaluation.instances=48
  evaluation.games_per_instance=2 warm.policy=teacher warm.games=2048 trainer=grpo trainers.grpo.games_per_iter=512
  trainers.grpo.lora_rank=16 trainers.grpo.batch_size=8 loss.adv_estimator=rloo league.baseline=per-seat
  league_size=3 league.self_play=0.35 league.learner=latest league.past_learners=true league.past_share=0.5
  crossplay=false)
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
CONFIRM=(--instances dev --seed 608 --num-instances 256 -k 4)
# the newest promoted iteration of ARM_DIR's run (nothing when none was promoted)
promoted() {
  python3 - "$ARM_DIR/run" << 'PY'
import json, pathlib, sys
decisions = sorted(pathlib.Path(sys.argv[1]).glob("iter_*/promotion.json"))
print(next((int(p.parent.name[5:]) for p in reversed(decisions) if json.loads(p.read_text()).get("promoted")), ""))
PY
}
# iteration $1 and the warm start of ARM_DIR's run, served, play CONFIRM into ARM_DIR/confirm
confirm() {
  local runs=$ARM_DIR/run stage out=$ARM_DIR/confirm warm_port=$((PORT_BASE + 50)) port=$((PORT_BASE + 51))
  stage=$runs/$(printf iter_%03d "$1")
  export CUDA_VISIBLE_DEVICES=0 SGLANG_ARGS="--mem-fraction-static 0.1" START_TRIES=6 RETRY_WAIT_S=20
  PORT=$warm_port MODEL=$runs/warm/train/hf bash offline_gpu/gpu_serve.sh &
  PORT=$port MODEL=$stage/train/hf bash offline_gpu/gpu_serve.sh || return 1
  wait $! || return 1
  python3 -m selfplay_gen.cli eval --config "$stage/eval/play.yaml" --backend sglang \
    --base-url "http://127.0.0.1:$port" --model "$stage/train/hf" --label "iter_$1" \
    --partner-backend sglang --partner-base-url "http://127.0.0.1:$warm_port" --partner-model "$runs/warm/train/hf" \
    --partner-label warm "${CONFIRM[@]}" --out "$out" --resume -q
  local rc=$?
  PORT=$warm_port bash offline_gpu/gpu_serve.sh stop && PORT=$port bash offline_gpu/gpu_serve.sh stop
  return $rc
}
# GATE for iteration $1 on ARM_DIR/confirm: exit 0 when met, 3 when not; the reading in ARM_DIR/confirm/gate.json
gate() {
  python3 - "$ARM_DIR/confirm/metrics.json" "iter_$1" > "$ARM_DIR/confirm/gate.json" << 'PY'
import json, sys
from selfplay_gen.league.promotion import deal_loss, paired_joint_share
from selfplay_gen.stats.metrics import decided_share
metrics, label = json.load(open(sys.argv[1])), sys.argv[2]
share, games = decided_share(metrics, label, "warm")
loss = deal_loss(metrics, label, "warm", joint_margin=0.03, min_agreement=0.97)
met = {"decided share >= 0.60": share["mean"] >= 0.60, "joint share within 3 points, agreement >= 0.97": loss is None}
print(json.dumps({"checkpoint": label, "decided_share": share, "games": games, "deal_loss": loss,
                  "joint_share_paired": paired_joint_share(metrics, label, "warm"),
                  "agreement": metrics["models"][label]["agreement_rate"], "met": met,
                  "all_met": all(met.values())}, indent=1))
sys.exit(0 if all(met.values()) else 3)
PY
}
# an arm's run, then its promoted checkpoint (if any) confirmed and gated
confirmed() {
  "$@" || return 1
  local n
  n=$(promoted) || return 1
  [[ -n $n ]] || { echo "${ARM_DIR##*/}: no checkpoint promoted, none confirmed"; return 0; }
  confirm "$n" || { echo "again: the confirmation once more after a failure"; sleep 30 && confirm "$n"; } || return 1
  gate "$n"
  echo "${ARM_DIR##*/}: iter_$n on the confirmation draw: gate exit $? ($ARM_DIR/confirm/gate.json)"
  cat "$ARM_DIR/confirm/gate.json"
}
LS=(league.self_play=0.7 "${BOUNDS[@]}")
arm_LSM() { confirmed league_arm trainers.grpo.lr=3.5e-5 "${LS[@]}" league.misstatement_penalty=2 num_iterations=1; }
arm_LSM4() { confirmed league_arm trainers.grpo.lr=4e-5 "${LS[@]}" league.misstatement_penalty=2 num_iterations=1; }
arm_L2() {
  adopt_stages LSB5 base warm iter_001 \
    && confirmed league_arm trainers.grpo.lr=2.5e-5 "${LS[@]}" league.self_play_seats=both num_iterations=2
}
