#!/usr/bin/env bash
# Offline GRPO's first step with verl's default eight agent-loop and eight reward workers against one of each
# (selfplay_gen/iterate/verl_jobs.py REPLAY_WORKERS), two jobs side by side on one GPU from the same groups
# (.lease/pg: 48 games of the shipped warm start on CPU, converted), each a `selfplay-gen train` of 2 steps.
#   bash .lease/run72.sh   (after gpu_setup.sh)
set -uo pipefail
R=/tmp/r72
mkdir -p $R
python3 -c "from pathlib import Path; from selfplay_gen.models import fold_adapter; \
fold_adapter(Path('$MODEL'), Path('selfplay_gen/data/warm_start'), Path('/tmp/warm'))" > $R/fold.log 2>&1 || tail -5 $R/fold.log
job() {  # NAME PORT [OVERRIDE...]
  local name=$1 port=$2
  shift 2
  mkdir -p $R/$name
  ( export RAY_TMPDIR=/tmp/ray72$name; mkdir -p $RAY_TMPDIR; t0=$(date +%s.%N)
    python3 -m selfplay_gen.cli train --mode offline --model_path /tmp/warm --train_files "$PWD/.lease/pg/train.parquet" --val_files "$PWD/.lease/pg/val.parquet" \
      --out_dir $R/$name/out --batch_size 2 --total_steps 2 \
      verl.offline_engine=false sampling.temperature=1.0 verl.python=python3 verl.master_port=$port "$@" > $R/$name/log 2>&1
    echo "rc $? wall $(awk "BEGIN{print $(date +%s.%N) - $t0}")" > $R/$name/done
    cp $R/$name/done "$OUT/$name.done"; cp $R/$name/log "$OUT/$name.log"
    find $R/$name/out -name verl.log -exec cp {} "$OUT/$name.verl.log" \; ) &
}
job one 29600
job eight 29700 actor_rollout_ref.rollout.agent.num_workers=8 reward.num_workers=8
wait
for name in one eight; do
  echo "== $name: $(cat $R/$name/done)"
  grep -oE "timing_s/step:[0-9.]+|timing_s/update_actor:[0-9.]+|timing_s/old_log_prob:[0-9.]+" $R/$name/out/verl.log $R/$name/log 2> /dev/null | sort -u | head
  grep -c "AgentLoopWorkerTQ pid" $R/$name/out/verl.log $R/$name/log 2> /dev/null
done
tar -C $R -cJf "$OUT/r72.tar.xz" --exclude='*/checkpoints' --exclude='*/hf' --exclude='*.safetensors' --exclude='*.pt' . 2> /dev/null
