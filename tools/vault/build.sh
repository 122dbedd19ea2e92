#!/usr/bin/env bash
# Builds the pinned HashiCorp Vault server (see go.mod) once into a cache
# directory and prints the binary's path on stdout. Later runs reuse the binary
# while go.sum is unchanged; after a change they reuse Go's build cache.
# A cold build takes about 15 minutes on 2 cores.
#
#   CUSTOS_VAULT_CACHE   cache directory (default: $XDG_CACHE_HOME/custos or ~/.cache/custos)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${CUSTOS_VAULT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/custos}"
stamp="$(cd "$here" && cat go.mod go.sum | sha256sum | cut -c1-16)"
bin="$cache/vault-$stamp/vault"
if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache/vault-$stamp"
echo "tools/vault: building Vault $(cd "$here" && go list -m -f '{{.Version}}' github.com/hashicorp/vault) into $bin (a cold build takes about 15 minutes)" >&2
start=$(date +%s)
(cd "$here" && go build -trimpath -o "$bin.tmp" github.com/hashicorp/vault)
mv "$bin.tmp" "$bin"
echo "tools/vault: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
