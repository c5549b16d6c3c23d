#!/usr/bin/env bash
# Regenerate requirements.lock: every runtime dependency of pyproject.toml (plus the build
# backend, setuptools and wheel) pinned with hashes for CPython 3.11 on x86_64 Linux (the
# image's platform). Needs `uv` (pip install uv). Run after changing dependencies, and commit
# the result; the Dockerfile installs from it with --require-hashes.
#
#   tools/lock.sh            # write requirements.lock
#   tools/lock.sh --check    # exit 1 if requirements.lock is not what the pyproject resolves to now
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(mktemp)
trap 'rm -f "$build" "$build.lock"' EXIT
printf 'setuptools>=68\nwheel\n' > "$build"
out=requirements.lock
[ "${1:-}" = "--check" ] && out="$build.lock"
uv pip compile pyproject.toml "$build" --quiet --generate-hashes --no-header --no-annotate \
  --python-version 3.11 --python-platform x86_64-manylinux_2_28 -o "$out"
# the temporary input file's name is not part of the lock
if [ "${1:-}" = "--check" ]; then
  diff -q requirements.lock "$out" >/dev/null || { echo "requirements.lock is stale: run tools/lock.sh"; exit 1; }
fi
