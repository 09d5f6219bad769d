#!/usr/bin/env bash
# The lab's eight steps, done with spool. Usage: examples/lab/run.sh [QUEUE_DIR]
#
# QUEUE_DIR defaults to a new temporary directory. The messages come from
# $LAB_SOURCE if set, else /opt/lab/fixtures/eai/queue/inbox when it exists,
# else the fixture beside this script (20 messages of the lab's shape).
# Every artifact the lab names is written into QUEUE_DIR.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
q=${1:-$(mktemp -d)/q}
src=${LAB_SOURCE:-}
if [ -z "$src" ]; then
  if [ -d /opt/lab/fixtures/eai/queue/inbox ]; then src=/opt/lab/fixtures/eai/queue/inbox; else src=$here/fixture/inbox; fi
fi

# The binary: $SPOOL if given, else built from this checkout.
spool=${SPOOL:-}
if [ -z "$spool" ]; then
  bin=$(mktemp -d)
  (cd "$repo" && CGO_ENABLED=0 go build -o "$bin/spool" ./cmd/spool)
  spool=$bin/spool
fi
step() { printf '\n== %s\n' "$*"; }

step "1. queue directory: four stages on one filesystem, messages copied in atomically"
"$spool" init "$q" --from "$src"
"$spool" lag "$q" 1000000

step "2. message structure -> schema.csv"
"$spool" schema "$q" -o "$q/schema.csv"
cat "$q/schema.csv"

step "3. consume: claim by rename, poison to error/ at once, ledger in one transaction"
"$spool" consume "$q"
printf 'done=%s error=%s processing=%s\n' \
  "$(find "$q/done" -name '*.json' | wc -l)" "$(find "$q/error" -name '*.json' | wc -l)" \
  "$(find "$q/processing" -name '*.json' | wc -l)"

step "4. idempotency: duplicates absorbed by the PRIMARY KEY -> dup.txt"
"$spool" dups "$q" -o "$q/dup.txt"
cat "$q/dup.txt"

step "5. failure reasons -> error.csv"
"$spool" errors "$q" -o "$q/error.csv"
cat "$q/error.csv"

step "6. order check: order-check.sql and order-result.txt"
"$spool" order-check "$q" --sql >"$q/order-check.sql"
"$spool" order-check "$q" -o "$q/order-result.txt" || true
cat "$q/order-result.txt"

step "7. backlog monitor: lag.sh QUEUE_DIR THRESHOLD"
cat >"$q/lag.sh" <<SH
#!/bin/sh
# lag.sh QUEUE_DIR THRESHOLD: prints inbox=N processing=N error=N; exits 1 when inbox > THRESHOLD.
exec "$spool" lag "\$@"
SH
chmod +x "$q/lag.sh"
"$q/lag.sh" "$q" 0

step "8. replay: replay.sh FILE moves error/FILE back to inbox/, or changes nothing and fails"
cat >"$q/replay.sh" <<SH
#!/bin/sh
# replay.sh FILE: moves error/FILE of this queue back to inbox/; a name not in error/ changes nothing and exits 1.
exec "$spool" replay "\$(dirname "\$0")" "\$@"
SH
chmod +x "$q/replay.sh"
if "$q/replay.sh" no-such-file.json; then echo "replay of a missing file succeeded" >&2; exit 1; fi

step "artifacts in $q"
ls "$q"
