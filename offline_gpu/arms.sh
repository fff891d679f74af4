# shellcheck shell=bash
# What every arms file of `gpu_lease.sh run` needs, sourced before it (an arms file may define its own instead):
# an arm's run of the loop with its own ports and Ray directory, and the stages it takes from elsewhere rather than
# play again. In an arm, ARM_DIR is ROOT/NAME, PORT_BASE its first port (gpu_lease.sh), MODEL the embedded model
# (gpu_setup.sh).

# a run of the loop in ARM_DIR/run with this arm's ports, COMMON (an array the arms file may define) and the
# arguments: configuration overrides (run_selfplay_iteration.sh --help)
iterate() {
  export RAY_TMPDIR=/tmp/ray_${ARM_DIR##*/} VERL_LOGGING_LEVEL=WARN && mkdir -p "$RAY_TMPDIR"
  ./run_selfplay_iteration.sh run_dir="$ARM_DIR/run" servers.port="$PORT_BASE" verl.master_port=$((PORT_BASE + 90)) \
    ${COMMON[@]+"${COMMON[@]}"} "$@"
}

# the base measured before (by another run, or not wanted): no base evaluation in this arm's run
skip_base() { mkdir -p "$ARM_DIR/run/base" && touch "$ARM_DIR/run/base/DONE"; }

# ARM's finished stages (base, warm, ...) copied into this arm's run, which then skips them
adopt_stages() {
  local from=${ARM_DIR%/*}/$1/run stage
  shift
  mkdir -p "$ARM_DIR/run"
  for stage in "$@"; do
    [[ -f $from/$stage/DONE ]] || { echo "adopt_stages: no finished $stage in $from" >&2; return 1; }
    [[ -e $ARM_DIR/run/$stage ]] || cp -r "$from/$stage" "$ARM_DIR/run/"
  done
}

# a LoRA adapter trained on MODEL_DIR (a committed one, say) as this arm's finished warm stage: the loop folds it
# onto MODEL_DIR before it serves it (Run.refold); the base is skipped
adopt_warm_adapter() {
  local adapter=$1 onto=$2 warm=$ARM_DIR/run/warm
  [[ -f $adapter/adapter_config.json ]] || { echo "adopt_warm_adapter: no LoRA adapter in $adapter" >&2; return 1; }
  skip_base && mkdir -p "$warm/train/hf"
  [[ -d $warm/train/hf/lora_adapter ]] || cp -r "$adapter" "$warm/train/hf/lora_adapter"
  echo "$onto" > "$warm/trained_from" && touch "$warm/DONE"
}

# MEMS: the overrides that give a run's servers the share $1 of its GPU's memory, and verl's rollout engine $2,
# for runs that share a GPU
mem() { # shellcheck disable=SC2034  # MEMS is for the arms file
  MEMS=("servers.extra_args=--mem-fraction-static $1" servers.partner_mem_fraction="$1" servers.overlap_mem_fraction="$1"
    verl.gpu_memory_utilization="$2")
}

# Qwen as a Hugging Face directory ($QWEN), converted once from the GGUF that prepare_qwen.sh received ($QWEN_IN) by
# whichever arm comes first
qwen_ready() {
  (
    flock 9
    [[ -f ${QWEN:?}/config.json ]] \
      || PYTHON=$SGLANG_PYTHON FP32_REFERENCE=0 bash offline_gpu/prepare_qwen.sh convert "${QWEN_IN:?}" "$QWEN"
  ) 9> /tmp/qwen.lock
}
