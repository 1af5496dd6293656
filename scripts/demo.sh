#!/usr/bin/env bash
# One command from a fresh clone: set up (build, fetch the local model, build the sample index),
# then answer a multi-hop question over the sample corpus, fully offline.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
question="${1:-Which Canadian rock band released a song called \"Counterparts\" and had a drummer who was inducted into the Modern Drummer Hall of Fame?}"
exec "${HOPWISE_PREFIX:-$HOME/.local}/bin/hopwise" ask "$question"
