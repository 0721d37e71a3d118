#!/usr/bin/env bash
# Installs, on a Debian machine, what the tests need and the machine lacks.
# Safe to run again: it installs only what is missing.
set -euo pipefail

# command -> Debian package providing it
declare -A wanted=(
  [chronyd]=chrony
  [faketime]=faketime
  [ip]=iproute2      # network-namespace clusters (aegisctl cluster create --network netns, e2e)
  [nsenter]=util-linux
  [containerd]=containerd
  [containerd-shim-runc-v2]=containerd
  [runc]=runc
)

# `deps.sh bench` (make bench) also needs these: cfssl is built with cgo
# (its sqlite certificate database), and the harness creates that
# database with the sqlite3 shell. make test does not.
bench=false
if [ "${1:-}" = bench ]; then
  bench=true
  wanted[gcc]=gcc
  wanted[sqlite3]=sqlite3
fi

# `deps.sh release` (make release) also needs these: the packages are
# unpacked with dpkg-deb and their units checked with systemd-analyze.
if [ "${1:-}" = release ]; then
  wanted[dpkg-deb]=dpkg
  wanted[systemd-analyze]=systemd
fi

missing=()
for cmd in "${!wanted[@]}"; do
  if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ]; then
    missing+=("${wanted[$cmd]}")
  fi
done

# The C library's headers, for the same cgo build.
if $bench && [ ! -e /usr/include/stdio.h ]; then
  missing+=(libc6-dev)
fi

if ! command -v go >/dev/null 2>&1; then
  echo "deps: Go is required (https://go.dev/dl/); go.mod names the version" >&2
  exit 1
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
  else
    echo "deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi

# One package may provide several commands (containerd and its shim).
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# chrony's and containerd's packages start system daemons; policy-rc.d keeps
# them from starting: the tests run their own chronyd on a loopback port, and
# each node runs its own containerd under its state dir.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
  $sudo chmod +x /usr/sbin/policy-rc.d
  trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
fi
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
