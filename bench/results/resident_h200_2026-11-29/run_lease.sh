#!/usr/bin/env bash
# One H200, four runs of SmolLM2-135M side by side on the same GPU, each with a small share of its memory:
#   C  textarena:TicTacToe-v0 from the rules alone: format warm start, then online GRPO with entropy bonus 0.01,
#      LoRA r16, STEPS_T steps (issue 63)
#   D  textarena:KuhnPoker-v0, the same
#   E  matching, offline GRPO from the shipped warm start, 2 iterations of 1,024 games, one resident verl job
#      for the run (verl.resident, issue 62)
#   F  the same with a verl job per iteration and no rollout engine (verl.offline_engine false), the reference
#   bash .lease/run70.sh start   (after gpu_setup.sh: all parts in)
#   bash .lease/run70.sh wait [S]   (also leaves a slim pack of logs and reports in $OUT)
#   bash .lease/run70.sh pack
set -uo pipefail
R=/tmp/r70
ARMS=${ARMS:-C D E F}
STEPS_T=${STEPS_T:-32}
MEM=0.08
COMMON=(servers.python=python3 verl.python=python3 tools.python=python3 evaluation.test_split=false
  "servers.extra_args=--attention-backend triton --sampling-backend pytorch --grammar-backend none --mem-fraction-static $MEM"
  servers.partner_mem_fraction=$MEM servers.overlap_mem_fraction=$MEM verl.gpu_memory_utilization=0.12
  servers.start_tries=6 servers.retry_wait_s=20)
ONLINE=(trainer=grpo-online num_iterations=1 trainers.grpo_online.batch_size=16 trainers.grpo_online.lora_rank=16
  games_per_instance=8 trainers.grpo_online.test_instances=16 sampling.temperature=1.0 loss.clip_ratio_high=0.28
  loss.entropy_coeff=0.01 trainers.grpo_online.lr=3e-4 trainers.grpo_online.steps=$STEPS_T
  trainers.grpo_online.test_freq=8 verl.save_freq=16 evaluation.instances=32 evaluation.games_per_instance=4
  warm.policy=format warm.games=1024)
OFFLINE=(initial_model=/tmp/warm warm.policy=none trainer=grpo num_iterations=2 trainers.grpo.games_per_iter=1024)

arm_args() {
  case $1 in
    C) echo game=textarena:TicTacToe-v0 initial_model="$MODEL" "${ONLINE[@]}" ;;
    D) echo game=textarena:KuhnPoker-v0 initial_model="$MODEL" "${ONLINE[@]}" ;;
    E) echo "${OFFLINE[@]}" verl.resident=true ;;
    F) echo "${OFFLINE[@]}" verl.offline_engine=false ;;
  esac
}

slim() {  # logs, reports, summaries, configs: what says how far each arm got
  (cd "$R" && find . \( -name log -o -name '*.log' -o -name 'summary*' -o -name '*.md' -o -name '*.json' \
    -o -name '*.yaml' -o -name '*.csv' -o -name '*.txt' -o -name 'rc*' -o -name 't0' -o -name 't1' \) \
    -not -path '*/checkpoints/*' -not -path '*/hf/*' -not -name 'games.jsonl' -size -4M -print0 \
    | tar --null -T - -cf - 2> /dev/null | xz -T0 -6 > "$OUT/slim70.tar.xz")
}

case ${1:-} in
  start)
    mkdir -p "$R" && rm -rf "$R.repo" && mkdir -p "$R.repo"
    tar --exclude=./.gpu --exclude=./.git -cf - . | tar -C "$R.repo" -xf -
    cd "$R.repo" || exit 1
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv > "$R/gpu.txt" 2>&1
    python3 -m selfplay_gen.cli doctor > "$R/doctor.txt" 2>&1; echo "doctor exit $?" >> "$R/doctor.txt"
    python3 -c "from pathlib import Path; from selfplay_gen.models import fold_adapter; \
fold_adapter(Path('$MODEL'), Path('selfplay_gen/data/warm_start'), Path('/tmp/warm'))" > "$R/fold.log" 2>&1 || cat "$R/fold.log"
    port=30000
    for arm in $ARMS; do
      mkdir -p "$R/$arm" && rm -f "$R/$arm/rc"
      PORT_BASE=$port setsid bash "$R.repo/.lease/run70.sh" arm "$arm" > "$R/$arm/log" 2>&1 < /dev/null &
      echo "arm $arm: pid $!, ports from $port"
      port=$((port + 100))
      sleep 20
    done
    nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv ;;
  arm)
    arm=$2
    cd "$R.repo" || exit 1
    export PYTHONPATH=$R.repo:$PYTHONPATH CUDA_VISIBLE_DEVICES=0
    export VERL_LOGGING_LEVEL=WARN RAY_DEDUP_LOGS=0 RAY_TMPDIR=/tmp/ray70$arm
    mkdir -p "$RAY_TMPDIR"
    date +%s > "$R/$arm/t0"
    # every arm starts from a model measured before (the raw model in rules_alone_one_gpu_h200_2026-11-28, the
    # shipped warm start throughout): no base evaluation
    mkdir -p "$R/$arm/run/base" && touch "$R/$arm/run/base/DONE"
    # shellcheck disable=SC2046
    python3 -m selfplay_gen.cli iterate run_dir="$R/$arm/run" servers.port="$PORT_BASE" verl.master_port=$((PORT_BASE + 90)) \
      "${COMMON[@]}" $(arm_args "$arm")
    echo $? > "$R/$arm/rc"
    date +%s > "$R/$arm/t1" ;;
  wait)
    end=$((SECONDS + ${2:-540}))
    while ((SECONDS < end)); do
      left=0
      for arm in $ARMS; do [[ -e $R/$arm/rc ]] || left=1; done
      ((left)) || break
      sleep 10
    done
    nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
    for arm in $ARMS; do
      echo "===== $arm: rc $(cat "$R/$arm/rc" 2> /dev/null || echo running), $(($(date +%s) - $(cat "$R/$arm/t0" 2> /dev/null || date +%s))) s"
      grep -hE "^\+ |===|step:|reward|rror" "$R/$arm/log" 2> /dev/null | cut -c1-240 | tail -n 5
    done
    slim ;;
  pack)
    cd "$R" || exit 1
    slim
    find . -path '*lora_adapter*' -size -12M -print0 | tar --null -T - -cf - 2> /dev/null | xz -T0 -1 \
      | split -b 15M -d -a 1 - "$OUT/adapters.tar.xz."
    ls -l "$OUT" ;;
esac
