# shellcheck shell=bash disable=SC2317
# Sourced on the GPU machine (no network): bring up the offline SGLang/verl environment.
#
#   source offline_gpu/gpu_setup.sh [PART_DIR]
#
# The bundles of gpu/build_bundle.sh (site_serve, site_train, the SmolLM2 GGUF and the install scripts)
# travel as one tar split into parts that arrive in separate calls (a call carries 64 MiB with
# the repository); each part's directory also holds all.sha256 and `parts`, their number. Each
# call copies its part from PART_DIR (default .gpu/p*) into /tmp/gpu-parts, which survives while
# the machine is warm. Once all of them are there, this joins and checks them, unpacks them into
# /tmp/gpu, installs the stack (a wheelhouse: `make gpu`; else the site bundles: install_site.sh, serve + train),
# converts the model to /tmp/smollm2 (once) and
# exports MODEL=/tmp/smollm2 and PYTHONPATH with this repository, so `python3 -m selfplay_gen.cli` works.
_gpu_here=$(pwd)
mkdir -p /tmp/gpu-parts
for _p in "${1:-.gpu}"/p*/*; do [ -f "$_p" ] && cp -f "$_p" /tmp/gpu-parts/; done
if [ "$(find /tmp/gpu-parts -name 'part-*' | wc -l)" -lt "$(cat /tmp/gpu-parts/parts 2> /dev/null || echo 3)" ]; then
  echo "gpu_setup: have $(find /tmp/gpu-parts -name 'part-*' | wc -l) of $(cat /tmp/gpu-parts/parts) parts; carry the rest" >&2
  return 0 2>/dev/null || exit 0
fi
if [ ! -f /tmp/gpu/.ok ]; then
  cat /tmp/gpu-parts/part-* > /tmp/all.tar
  [ "$(sha256sum /tmp/all.tar | cut -d' ' -f1)" = "$(cat /tmp/gpu-parts/all.sha256)" ] \
    || { echo "gpu_setup: checksum mismatch of the joined parts" >&2; return 1 2>/dev/null || exit 1; }
  mkdir -p /tmp/gpu && tar -xf /tmp/all.tar -C /tmp/gpu && rm -f /tmp/all.tar && touch /tmp/gpu/.ok
fi
# kernels an earlier machine compiled (`gpu_lease.sh kernels`, put into the bundle's directory before `parts`)
if [ -f /tmp/gpu/kernels.tar.xz ] && [ ! -f /tmp/gpu/.kernels ]; then
  tar -C "$HOME" -xJf /tmp/gpu/kernels.tar.xz && touch /tmp/gpu/.kernels \
    && echo "gpu_setup: restored an earlier machine's compiled kernels under $HOME" >&2
fi
if [ -d /tmp/gpu/wheels ]; then
  # a wheelhouse (`INSTALL=wheels gpu_lease.sh dist`): the project's own installer, `make gpu`, once a machine;
  # the loop, verl and the servers then run in their environments (SELFPLAY_PYTHON, VERL_PYTHON,
  # SGLANG_PYTHON), and python3 is the training environment's
  if [ ! -x "$_gpu_here/.venv-train/bin/python" ]; then
    make -C "$_gpu_here" gpu WHEELHOUSE=/tmp/gpu/wheels > /tmp/gpu/make_gpu.log 2>&1 \
      || { tail -30 /tmp/gpu/make_gpu.log >&2; return 1 2>/dev/null || exit 1; }
  fi
  export SGLANG_PYTHON=$_gpu_here/.venv-serve/bin/python VERL_PYTHON=$_gpu_here/.venv-train/bin/python
  export SELFPLAY_PYTHON=$VERL_PYTHON PATH="$_gpu_here/.venv-train/bin:$PATH"
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 RAY_USAGE_STATS_ENABLED=0
else
  # shellcheck disable=SC1091
  source /tmp/gpu/install_site.sh /tmp/gpu/site_serve.tar.xz /tmp/gpu/site_train.tar.xz
fi
export MODEL=/tmp/smollm2
if [ ! -f "$MODEL/config.json" ]; then
  bash /tmp/gpu/prepare_model.sh convert /tmp/gpu "$MODEL" > /tmp/gpu/convert.log 2>&1 \
    || { tail -20 /tmp/gpu/convert.log >&2; return 1 2>/dev/null || exit 1; }
fi
export PYTHONPATH="$_gpu_here${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
echo "gpu_setup: ready (MODEL=$MODEL)" >&2
