#!/usr/bin/env python3
"""The consumer the lab describes, one commit per message: the baseline
`spool bench` figures are compared with in docs/PERFORMANCE.md.

    python3 examples/lab/consume.py QUEUE_DIR

For each inbox/*.json: rename to processing/, read, parse; a parse error or
a missing field goes to error/; else INSERT ... ON CONFLICT DO NOTHING into
ledger.db's processed table (one durable commit per message) and rename to
done/. It is deliberately simple: no crash recovery, no fsync of
directories, no hostile-file checks. Use spool for real queues.
"""
import json
import os
import sqlite3
import sys
from datetime import datetime, timezone

REQUIRED = ("msg_id", "order_no", "seq", "amount")


def main(q):
    db = sqlite3.connect(os.path.join(q, "ledger.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("""CREATE TABLE IF NOT EXISTS processed (
        msg_id TEXT PRIMARY KEY, order_no TEXT, seq INTEGER, amount TEXT, processed_at TEXT)""")
    stats = {"processed": 0, "duplicates": 0, "errors": 0}
    inbox, proc = os.path.join(q, "inbox"), os.path.join(q, "processing")
    for name in sorted(os.listdir(inbox)):
        if not name.endswith(".json") or name.startswith("."):
            continue
        try:
            os.rename(os.path.join(inbox, name), os.path.join(proc, name))
        except FileNotFoundError:
            continue
        path = os.path.join(proc, name)
        try:
            with open(path, "rb") as f:
                msg = json.loads(f.read())
            if not isinstance(msg, dict) or any(msg.get(k) is None for k in REQUIRED):
                raise ValueError("missing field")
        except ValueError:
            os.rename(path, os.path.join(q, "error", name))
            stats["errors"] += 1
            continue
        db.execute("BEGIN")
        cur = db.execute(
            "INSERT INTO processed VALUES (?, ?, ?, ?, ?) ON CONFLICT (msg_id) DO NOTHING",
            (str(msg["msg_id"]), str(msg["order_no"]), msg["seq"], str(msg["amount"]),
             datetime.now(timezone.utc).isoformat()))
        db.execute("COMMIT")
        stats["processed" if cur.rowcount == 1 else "duplicates"] += 1
        os.rename(path, os.path.join(q, "done", name))
    print(" ".join(f"{k}={v}" for k, v in stats.items()))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: consume.py QUEUE_DIR")
    main(sys.argv[1])
