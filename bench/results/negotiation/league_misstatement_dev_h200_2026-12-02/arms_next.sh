# shellcheck shell=bash
# One nvidia-h200 lease (one GPU), 135M only, issue 64, in ROOT /tmp/r103 (unpacked from .lease/r109pack: W; LSB5's
# run after its iteration 1, its adapter and the run's play settings):
#   bash offline_gpu/gpu_lease.sh run /tmp/r103 .lease/arms110.sh WS
#   TEST_SCALE=S bash offline_gpu/gpu_lease.sh run /tmp/r103 .lease/arms110.sh WT   (a later lease, see arm_WT)
# On development instances the 135M league's first step lands on one side of the three conditions or the other:
# LS (lr 3.5e-5) on draw 4 59.3% of decided games against the warm start, joint -2.4 points, agreement 95.7%; LSM
# (LS with the misstatement term, which moved 1.6% of the seats' rewards) 63.3% with joint -11.3 and 87.5% of its
# deals; LSB5 (lr 5e-5) 81.6%, joint -12.6, agreement 82%; its iteration 2 gives the hold-out back (56.5%; L2 at
# half its lr 52.5%). So:
#   WS     LSB5's step folded onto the warm start at SCALES of its update (merge_lora --scale, WiSE-FT), each played
#          against the warm start on a sixth development draw (SELECT: seeds 1_000_000_864 on, 128 instances x 2
#          games a seat order, and both self-plays) and read under the gate of
#          league_partners_dev_h200_2026-12-02/arms_next.sh (at least 60% of decided games against the warm start,
#          self-play joint share at most 3 points below the warm start's, paired, agreement at least 97%); the
#          largest scale that meets it is played again on the fifth draw (CONFIRM: seeds 1_000_000_608 on, 256
#          instances x 4 games a seat order) under the same gate. Only a scale that meets it there is read on the
#          test split, once, on a later lease.
W_ADAPTER=${W_ADAPTER:-/tmp/r103/W}
STEP=${STEP:-/tmp/r103/LSB5/run/iter_001}
SCALES=(0.4 0.55 0.7 0.85)
SELECT=(--instances dev --seed 864 --num-instances 128 -k 2)
CONFIRM=(--instances dev --seed 608 --num-instances 256 -k 4)
embedded_default() { "${SELFPLAY_PYTHON:-python3}" -c 'from selfplay_gen import models; print(models.resolve(None))'; }

# the adapter $1 folded onto the model $2 at scale $3 of its update, into the model directory $4 (once)
fold() {
  [[ -f $4/config.json ]] && return 0
  mkdir -p "$4" && cp -r "$1" "$4/lora_adapter" \
    && "${SELFPLAY_PYTHON:-python3}" -m selfplay_gen.verl.merge_lora --onto "$2" --scale "$3" "$4"
}

# the model $1, labelled $2, against the warm start served on WARM_PORT: the games of the eval options after $4
# into $4 (on the server of port $3)
play() {
  local model=$1 label=$2 port=$3 out=$4
  shift 4
  "${SELFPLAY_PYTHON:-python3}" -m selfplay_gen.cli eval --config "$STEP/eval/play.yaml" --backend sglang \
    --base-url "http://127.0.0.1:$port" --model "$model" --label "$label" --partner-backend sglang \
    --partner-base-url "http://127.0.0.1:$WARM_PORT" --partner-model "$WARM" --partner-label warm "$@" --out "$out" \
    --resume -q
}

# the gate for the model labelled $2 on the games of $1: exit 0 when met, 3 when not; the reading in $1/gate.json
gate() {
  "${SELFPLAY_PYTHON:-python3}" - "$1/metrics.json" "$2" > "$1/gate.json" << 'PY'
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

serve() { PORT=$1 MODEL=$2 bash offline_gpu/gpu_serve.sh; }
# whether every background job of the pids given ended well (each is waited for)
wait_all() {
  local pid rc=0
  for pid in "$@"; do wait "$pid" || rc=1; done
  return $rc
}
stop_servers() { for port in "$@"; do PORT=$port bash offline_gpu/gpu_serve.sh stop; done; }

arm_WS() {
  local default scale port rc ports=() pids=() chosen=""
  export CUDA_VISIBLE_DEVICES=0 SGLANG_ARGS="--mem-fraction-static 0.1" START_TRIES=6 RETRY_WAIT_S=20
  export WARM=$ARM_DIR/warm WARM_PORT=$((PORT_BASE + 50))
  default=$(embedded_default) && fold "$W_ADAPTER" "$default" 1 "$WARM" || return 1
  for scale in "${SCALES[@]}"; do # side by side: each fold reads and writes its own model
    fold "$STEP/train/hf/lora_adapter" "$WARM" "$scale" "$ARM_DIR/scale_$scale" &
    pids+=($!)
  done
  wait_all "${pids[@]}" || return 1
  pids=()
  serve "$WARM_PORT" "$WARM" & # the servers start side by side
  pids+=($!)
  port=$WARM_PORT
  for scale in "${SCALES[@]}"; do
    port=$((port + 1)) && ports+=("$port")
    serve "$port" "$ARM_DIR/scale_$scale" &
    pids+=($!)
  done
  wait_all "${pids[@]}" || { stop_servers "$WARM_PORT" "${ports[@]}"; return 1; }
  pids=()
  for i in "${!SCALES[@]}"; do
    scale=${SCALES[$i]}
    play "$ARM_DIR/scale_$scale" "scale_$scale" "${ports[$i]}" "$ARM_DIR/select/scale_$scale" "${SELECT[@]}" &
    pids+=($!)
  done
  wait_all "${pids[@]}" || { stop_servers "$WARM_PORT" "${ports[@]}"; return 1; }
  for i in "${!SCALES[@]}"; do
    scale=${SCALES[$i]}
    gate "$ARM_DIR/select/scale_$scale" "scale_$scale"
    rc=$?
    echo "WS: scale $scale on the selection draw: gate exit $rc ($ARM_DIR/select/scale_$scale/gate.json)"
    cat "$ARM_DIR/select/scale_$scale/gate.json"
    ((rc == 0)) && chosen=$i
  done
  if [[ -z $chosen ]]; then
    echo "WS: no scale meets the gate on the selection draw, none confirmed"
  else
    scale=${SCALES[$chosen]}
    play "$ARM_DIR/scale_$scale" "scale_$scale" "${ports[$chosen]}" "$ARM_DIR/confirm" "${CONFIRM[@]}" \
      || { stop_servers "$WARM_PORT" "${ports[@]}"; return 1; }
    gate "$ARM_DIR/confirm" "scale_$scale"
    echo "WS: scale $scale on the confirmation draw: gate exit $? ($ARM_DIR/confirm/gate.json)"
    cat "$ARM_DIR/confirm/gate.json"
  fi
  stop_servers "$WARM_PORT" "${ports[@]}"
}

# On a later lease, once a scale met the gate on the confirmation draw: that scale (TEST_SCALE, set by the lease)
# against the warm start on the test split, once (TEST: 256 instances x 4 games a seat order, both self-plays),
# read under the same conditions: TEST_SPLIT.md's next reading.
TEST=(--instances test --seed 0 --num-instances 256 -k 4)
arm_WT() {
  local default pid port=$((PORT_BASE + 51)) rc
  [[ -n ${TEST_SCALE:-} ]] || { echo "arm_WT: set TEST_SCALE to the scale that met the gate" >&2; return 2; }
  export CUDA_VISIBLE_DEVICES=0 SGLANG_ARGS="--mem-fraction-static 0.1" START_TRIES=6 RETRY_WAIT_S=20
  export WARM=$ARM_DIR/warm WARM_PORT=$((PORT_BASE + 50))
  default=$(embedded_default) && fold "$W_ADAPTER" "$default" 1 "$WARM" \
    && fold "$STEP/train/hf/lora_adapter" "$WARM" "$TEST_SCALE" "$ARM_DIR/scale_$TEST_SCALE" || return 1
  serve "$WARM_PORT" "$WARM" &
  pid=$!
  serve "$port" "$ARM_DIR/scale_$TEST_SCALE" &
  wait_all "$pid" $! || { stop_servers "$WARM_PORT" "$port"; return 1; }
  play "$ARM_DIR/scale_$TEST_SCALE" "scale_$TEST_SCALE" "$port" "$ARM_DIR/test" "${TEST[@]}"
  rc=$?
  stop_servers "$WARM_PORT" "$port"
  ((rc == 0)) || return $rc
  gate "$ARM_DIR/test" "scale_$TEST_SCALE"
  echo "WT: scale $TEST_SCALE on the test split: gate exit $? ($ARM_DIR/test/gate.json)"
  cat "$ARM_DIR/test/gate.json"
}
