# shellcheck shell=bash
# Sourced by the scripts that cut files into what one call to the GPU machine carries (gpu_lease.sh parts,
# prepare_qwen.sh split/stage): a call carries CALL_MIB (64) MiB together with the repository's tracked files.
CALL_MIB=${CALL_MIB:-64}

# MiB of the repository's tracked files (under the PATHs given), which travel with every call (0 outside a git
# checkout)
tree_mib() {
  # du skips a tracked file deleted from the work tree (and says so on stderr); the total still counts
  local mib
  mib=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." \
    && { git ls-files -z -- "$@" 2> /dev/null | du -cm --files0-from=- 2> /dev/null || true; } | tail -1 | cut -f1)
  echo "${mib:-0}"
}

# MiB a call leaves for one part beside the tracked files, less 4 MiB for files the tree gains meanwhile
call_room_mib() { echo $((CALL_MIB - $(tree_mib) - 4)); }

# Why a call has no room for a part: the tracked files' size, and what to do about the committed results, which are
# most of it and which no GPU call needs
no_room() {
  echo "the repository's tracked files ($(tree_mib) MiB, bench/results $(tree_mib bench/results) MiB of them)" \
    "leave no room for a $1 in a call of $CALL_MIB MiB: move bench/results out of the checkout while the calls" \
    "are made (and back after), or set $2"
}
