#!/usr/bin/env bash
# Keeps the shared cargo target directory from filling the disk. Each change to a crate links its
# test executables again under a new hash (a few hundred MB each with debug info, since llama.cpp
# is linked in), and cargo never deletes the old ones: left alone, `debug/deps` grew past 60 GB.
# This keeps the newest executable of each name and drops incremental state; compiled libraries
# stay, so the next build only relinks.
set -euo pipefail
dir="${CARGO_TARGET_DIR:-$HOME/.cache/hopwise/target}"
for profile in debug release; do
  deps="$dir/$profile/deps"
  [ -d "$deps" ] || continue
  find "$deps" -maxdepth 1 -type f -perm -u+x \
    ! -name '*.so' ! -name '*.rlib' ! -name '*.rmeta' ! -name '*.d' -printf '%T@ %p\n' |
    sort -rn |
    awk '{ name = $2; sub(/-[0-9a-f]+$/, "", name); if (seen[name]++) print $2 }' |
    xargs -r rm -f
done
rm -rf "$dir/debug/incremental" "$dir/debug/examples"
