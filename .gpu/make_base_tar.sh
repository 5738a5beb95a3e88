#!/usr/bin/env bash
# Writes .gpu/base_src.tar.gz (the emulator and core sources of the revision in
# .gpu/base_rev) for .gpu/emu_ab.sh on a machine whose copy of the tree has no .git.
# Run in the checkout. .gpu/ is git-ignored here, so name the tarball in the device run's carry
# list (carry: [".gpu/base_src.tar.gz"]); never commit it.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=$(tr -d '[:space:]' < .gpu/base_rev)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive --format=tar "$rev" plugins/env_gameboy/src core/src | tar -x -C "$tmp"
echo "$rev" > "$tmp/BASE_REV"
tar -czf .gpu/base_src.tar.gz -C "$tmp" .
echo "wrote .gpu/base_src.tar.gz ($(wc -c < .gpu/base_src.tar.gz) bytes, base $rev)"
