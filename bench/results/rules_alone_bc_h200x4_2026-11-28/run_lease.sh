#!/usr/bin/env bash
# One lease, four arms side by side, one GPU each (issue 59 and issue 63), all from the rules alone:
#   A  matching, online GRPO from the format warm start (lr 5e-4, 40 steps of 16 rows x 8)
#   B  matching, filtered BC (expert iteration) from the format warm start, 3 iterations of 1,024 games
#   C  textarena:TicTacToe-v0, format warm start then online GRPO (30 steps), then vs random/minimax
#   D  textarena:KuhnPoker-v0, the same, then vs random/equilibrium
# The format warm start of A and B is the committed adapter (bench/results/rules_alone_h200_2026-11-28),
# carried in .lease/fmt_adapter and folded onto the GGUF-converted SmolLM2 here.
#   bash .lease/run66.sh start   (after gpu_setup.sh: all parts in)
#   bash .lease/run66.sh wait [S] ; bash .lease/run66.sh pack
set -uo pipefail
R=/tmp/r66
ARMS=${ARMS:-A B C D}
COMMON=(servers.python=python3 verl.python=python3 tools.python=python3 evaluation.test_split=false
  sampling.temperature=1.0 loss.clip_ratio_high=0.28 loss.entropy_coeff=0.001)
GRPO=(trainer=grpo-online num_iterations=1 trainers.grpo_online.batch_size=16 trainers.grpo_online.lora_rank=32
  games_per_instance=8 trainers.grpo_online.test_instances=16)

arm_args() {
  case $1 in
    A) echo initial_model=/tmp/fmt warm.policy=none "${GRPO[@]}" trainers.grpo_online.lr=5e-4 \
      trainers.grpo_online.steps=40 trainers.grpo_online.test_freq=10 verl.save_freq=20 \
      evaluation.instances=32 evaluation.games_per_instance=4 evaluation.human_games_per_instance=1 ;;
    B) echo initial_model=/tmp/fmt warm.policy=none trainer=filtered-bc num_iterations=3 \
      trainers.filtered_bc.games_per_iter=1024 games_per_instance=8 \
      evaluation.instances=32 evaluation.games_per_instance=4 evaluation.human_games_per_instance=1 ;;
    C) echo game=textarena:TicTacToe-v0 initial_model="$MODEL" warm.policy=format warm.games=2048 "${GRPO[@]}" \
      trainers.grpo_online.lr=3e-4 trainers.grpo_online.steps=30 trainers.grpo_online.test_freq=10 verl.save_freq=15 \
      evaluation.instances=32 evaluation.games_per_instance=4 ;;
    D) echo game=textarena:KuhnPoker-v0 initial_model="$MODEL" warm.policy=format warm.games=2048 "${GRPO[@]}" \
      trainers.grpo_online.lr=3e-4 trainers.grpo_online.steps=30 trainers.grpo_online.test_freq=10 verl.save_freq=15 \
      evaluation.instances=32 evaluation.games_per_instance=4 ;;
  esac
}

# each model of a textarena arm against the game's fixed references, both seats, on 32 dev instances, on one
# SGLang server that loads each model's weights in turn
references() {
  local arm=$1 game=$2 exact=$3 out=$R/$1/refs port=$((PORT_BASE + 50)) served=$MODEL
  mkdir -p "$out"
  python3 -m sglang.launch_server --model-path "$MODEL" --port "$port" --attention-backend triton \
    --sampling-backend pytorch --grammar-backend none --mem-fraction-static 0.5 > "$out/sglang.log" 2>&1 &
  local pid=$!
  for _ in $(seq 120); do curl -sf "http://127.0.0.1:$port/health" > /dev/null && break; sleep 3; done
  for model in "$MODEL:base" "$R/$arm/run/warm/train/hf:warm" $(ls -d "$R/$arm"/run/iter_001/*/hf 2> /dev/null | sed 's/$/:final/'); do
    local dir=${model%:*} label=${model##*:}
    [[ -f $dir/config.json ]] || continue
    python3 -m selfplay_gen.serving swap "http://127.0.0.1:$port" "$served" "$dir" >> "$out/log" 2>&1 || continue
    served=$dir
    for ref in random "$exact"; do
      python3 -m selfplay_gen.cli eval --game "$game" --backend sglang --base-url "http://127.0.0.1:$port" \
        --model "$dir" --label "$label" --partner-backend scripted --partner-scripted-policy "$ref" \
        --temperature 1.0 --instances dev --num-instances 32 -k 4 --out "$out/${label}_vs_$ref" --quiet >> "$out/log" 2>&1
    done
  done
  kill "$pid"
}

case ${1:-} in
  start)
    mkdir -p "$R" && rm -rf "$R.repo" && mkdir -p "$R.repo"
    tar --exclude=./.gpu --exclude=./.git -cf - . | tar -C "$R.repo" -xf -
    cd "$R.repo" || exit 1
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv > "$R/gpu.txt" 2>&1
    python3 -m selfplay_gen.cli doctor > "$R/doctor.txt" 2>&1; echo "doctor exit $?" >> "$R/doctor.txt"
    python3 -c "from pathlib import Path; from selfplay_gen.models import fold_adapter; \
fold_adapter(Path('$MODEL'), Path('.lease/fmt_adapter'), Path('/tmp/fmt'))" > "$R/fold.log" 2>&1 || cat "$R/fold.log"
    gpu=0
    for arm in $ARMS; do
      mkdir -p "$R/$arm" && rm -f "$R/$arm/rc"
      CUDA_VISIBLE_DEVICES=$gpu PORT_BASE=$((30000 + 100 * gpu)) setsid bash "$R.repo/.lease/run66.sh" arm "$arm" \
        > "$R/$arm/log" 2>&1 < /dev/null &
      echo "arm $arm on GPU $gpu: pid $!"
      gpu=$((gpu + 1))
      sleep 15
    done ;;
  arm)
    arm=$2
    cd "$R.repo" || exit 1
    export PYTHONPATH=$R.repo:$PYTHONPATH
    export VERL_LOGGING_LEVEL=WARN RAY_DEDUP_LOGS=0 RAY_TMPDIR=/tmp/ray66$arm
    mkdir -p "$RAY_TMPDIR"
    date +%s > "$R/$arm/t0"
    # shellcheck disable=SC2046
    python3 -m selfplay_gen.cli iterate run_dir="$R/$arm/run" servers.port="$PORT_BASE" "${COMMON[@]}" $(arm_args "$arm")
    echo $? > "$R/$arm/rc.iterate"
    case $arm in
      C) references C textarena:TicTacToe-v0 minimax ;;
      D) references D textarena:KuhnPoker-v0 equilibrium ;;
    esac
    date +%s > "$R/$arm/t1"
    cp "$R/$arm/rc.iterate" "$R/$arm/rc" ;;
  wait)
    end=$((SECONDS + ${2:-540}))
    while ((SECONDS < end)); do
      left=0
      for arm in $ARMS; do [[ -e $R/$arm/rc ]] || left=1; done
      ((left)) || break
      sleep 10
    done
    for arm in $ARMS; do
      echo "===== $arm: rc $(cat "$R/$arm/rc" 2> /dev/null || echo running), $(($(date +%s) - $(cat "$R/$arm/t0" 2> /dev/null || date +%s))) s"
      grep -hE "^\+ |===|step:|reward|error|Error" "$R/$arm/log" 2> /dev/null | cut -c1-220 | tail -n 6
    done ;;
  pack)
    cd "$R" || exit 1
    tar --exclude='checkpoints' --exclude='*.safetensors' --exclude='*.parquet' --exclude='*.bin' --exclude='*.pt' \
      --exclude='games.jsonl' --exclude='*.gguf' -cf - gpu.txt doctor.txt fold.log ./*/log ./*/t0 ./*/t1 ./*/rc* ./*/run ./*/refs \
      2> /dev/null | xz -T0 -6 > "$OUT/r66.tar.xz"
    find . -path '*lora_adapter*' -size -12M -print0 | tar --null -T - -cf - 2> /dev/null | xz -T0 -1 \
      | split -b 15M -d -a 1 - "$OUT/adapters.tar.xz."
    ls -l "$OUT" ;;
esac
