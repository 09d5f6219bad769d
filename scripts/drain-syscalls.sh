#!/usr/bin/env bash
# The drain's system calls per message, by kind, against the floors'.
#
#   scripts/drain-syscalls.sh            # N=20000 messages, SQLite ledger
#
# First `spool bench --n N --floor --rounds 3` for the CPU per message and
# the ratios to the floors (no tracer). Then one more `spool bench --n N
# --floor` under `strace -f` (every thread; installed with apt-get if
# missing), whose trace is cut at the bench's own marks: the sync(2) after
# each queue is generated starts a run, the mkdir of the next queue (or
# the report's first line) ends it; generation is not counted. Under
# strace a drain is many times slower, which changes the Go runtime's
# futex and nanosleep counts and the batch sizes: the file and ledger
# calls are the figure, the runtime's a rough one.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

N=${N:-20000}
step() { printf '\n=== %s\n' "$*"; }

if ! command -v strace >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >/dev/null) || { echo "strace is not installed and apt-get could not install it"; exit 1; }
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -o "$tmp/spool" ./cmd/spool
echo "$(strace -V | head -1); cores $(nproc)"

step "spool bench --n $N --floor --rounds 3 (load $(cut -d' ' -f1-3 /proc/loadavg))"
"$tmp/spool" bench --n "$N" --floor --rounds 3 --tmp "$tmp"

step "spool bench --n $N --floor under strace -f (load $(cut -d' ' -f1-3 /proc/loadavg))"
strace -f -qq -e signal=none -o "$tmp/trace" "$tmp/spool" bench --n "$N" --floor --keep --tmp "$tmp"
echo "load at end $(cut -d' ' -f1-3 /proc/loadavg)"

step "system calls per message (of $N), by kind"
awk -v n="$N" '
  # phase: 0 generating (not counted), 1 spool, 2 floor-os, 3 floor-dirfd
  / resumed>/ { next }
  /write\(1, "messages/ { phase = 0 }
  /mkdirat\(.*\/floor-(os|dirfd)"/ { phase = 0 }
  {
    if (!match($0, /^[0-9]+ +[a-z_0-9]+\(/)) next
    call = substr($0, RSTART, RLENGTH - 1); sub(/^[0-9]+ +/, "", call)
    if (call == "sync") { runs++; phase = runs; next }
    if (phase == 0) next
    count[phase, call]++; total[phase]++; calls[call] = 1
  }
  END {
    printf "| system call | spool | floor (os) | floor (dirfd) |\n|---|---:|---:|---:|\n"
    for (c in calls) printf "%s %.3f %.3f %.3f\n", c, count[1, c] / n, count[2, c] / n, count[3, c] / n | "sort -k2,2gr > /dev/stderr"
    close("sort -k2,2gr > /dev/stderr")
    printf "| **all** | **%.2f** | **%.2f** | **%.2f** |\n", total[1] / n, total[2] / n, total[3] / n
  }' "$tmp/trace" 2>"$tmp/rows" >"$tmp/foot"
head -2 "$tmp/foot"
awk '$2 >= 0.005 || $3 >= 0.005 || $4 >= 0.005 { printf "| %s | %.2f | %.2f | %.2f |\n", $1, $2, $3, $4; next } { rest2 += $2; rest3 += $3; rest4 += $4 }
  END { printf "| the rest | %.2f | %.2f | %.2f |\n", rest2, rest3, rest4 }' "$tmp/rows"
tail -1 "$tmp/foot"
