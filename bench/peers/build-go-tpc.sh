#!/usr/bin/env bash
# Builds PingCAP's go-tpc (the OLTP peer) outside the repository, from a scratch module: `go install …@latest`
# is refused here because the module proxy will not list versions, but a pinned `go get` works.
# Prints the path of the binary.
set -euo pipefail
dir="${REFBENCH_PEERS:-$HOME/.cache/refbench-peers}"
bin="$dir/bin/go-tpc"
if [ ! -x "$bin" ]; then
  mkdir -p "$dir"
  cd "$dir"
  [ -f go.mod ] || go mod init peers >/dev/null 2>&1
  GOFLAGS=-mod=mod go get github.com/pingcap/go-tpc/cmd/go-tpc@v1.0.12 >&2
  GOFLAGS=-mod=mod go build -o "$bin" github.com/pingcap/go-tpc/cmd/go-tpc >&2
fi
echo "$bin"
