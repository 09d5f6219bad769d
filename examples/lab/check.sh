#!/usr/bin/env bash
# Checks what run.sh produced against the lab's expected results, on the
# fixture beside this script. Usage: examples/lab/check.sh QUEUE_DIR
set -euo pipefail
q=$1
fail() { echo "lab check: $*" >&2; exit 1; }
count() { find "$q/$1" -name '*.json' -not -name '.*' | wc -l; }
[ "$(count done)" -eq 18 ] || fail "done has $(count done) files, want 18"
[ "$(count error)" -eq 2 ] || fail "error has $(count error) files, want 2"
[ -z "$(ls -A "$q/processing")" ] || fail "processing/ is not empty"
for f in schema.csv ledger.db dup.txt error.csv order-check.sql order-result.txt lag.sh replay.sh; do
  [ -e "$q/$f" ] || fail "missing artifact $f"
done
rows=$(sqlite3 "$q/ledger.db" 'SELECT count(*) FROM processed' 2>/dev/null || "$SPOOL" status "$q" | sed -n 's/^ledger  *\([0-9]*\) processed.*/\1/p')
[ "$rows" = 15 ] || fail "processed has $rows rows, want 15"
printf 'MSG-0002\nMSG-0007\nMSG-0013\n' | diff - "$q/dup.txt" || fail "dup.txt differs"
printf 'file,reason\n019-broken.json,parse\n020-MSG-0020.json,missing-field\n' | diff - "$q/error.csv" || fail "error.csv differs"
[ "$(head -1 "$q/order-result.txt")" = OK ] || fail "order-result.txt does not start with OK"
head -1 "$q/schema.csv" | grep -qx 'field,type,role' || fail "schema.csv header"
grep -qx 'msg_id,string,idempotency-key' "$q/schema.csv" || fail "schema.csv lacks msg_id's role"
grep -qx 'seq,integer,sequence' "$q/schema.csv" || fail "schema.csv lacks seq's role"
# lag: exit 0 under the threshold, 1 over it.
[ "$("$q/lag.sh" "$q" 0)" = "inbox=0 processing=0 error=2" ] || fail "lag line"
# replay: a missing name changes nothing; a real one moves the file back.
before=$(cd "$q" && find inbox processing done error | sort)
if "$q/replay.sh" nope.json 2>/dev/null; then fail "replay of a missing name succeeded"; fi
[ "$before" = "$(cd "$q" && find inbox processing done error | sort)" ] || fail "refused replay changed the queue"
"$q/replay.sh" 019-broken.json >/dev/null
[ -f "$q/inbox/019-broken.json" ] && [ ! -e "$q/error/019-broken.json" ] || fail "replay did not move the file"
if "$q/lag.sh" "$q" 0 >/dev/null; then fail "lag over threshold exited 0"; fi
echo "lab check: OK"
