package spool

import (
	"time"
)

// An operator can stop a queue being consumed without stopping its
// consumers (spool pause), and hold single messages aside (spool hold),
// on every host at once: both live in the ledger, which every consumer of
// the queue reads (docs/DESIGN.md, "Pause and hold"). A consumer reads
// them through Ledger.Holds, once at the start of a run and then every
// DefaultHoldInterval, in a goroutine of its own (consumer_session.go), so
// that claiming stays free of ledger reads: a held file is in held/,
// which no consumer scans, and a held msg_id is a lookup in a set in
// memory when its message is parsed.

// DefaultHoldInterval is how often a consumer reads the queue's pause and
// held msg_ids from the ledger (Config.HoldInterval): a pause or a hold
// reaches every consumer within about that long. Each read is one query
// of one row while nothing changed (Holds.Version).
const DefaultHoldInterval = time.Second

// Pause is an operator's pause of a queue, as the ledger holds it.
type Pause struct {
	// By is who paused it (an audit actor: os:alice, token:olga), Via how
	// (cli, http), At when, and Note why (may be empty).
	By, Via, Note string
	At            time.Time
}

// Holds is what an operator holds back from a queue's consumers: the
// whole queue (Paused), and the msg_ids held, whose deliveries a consumer
// moves into held/ instead of processing them.
type Holds struct {
	// Paused is the queue's pause, nil while it is not paused.
	Paused *Pause
	// Version changes whenever the pause or the held msg_ids do.
	Version int64
	// MsgIDs are the msg_ids held, as a set; nil when the caller asked
	// with the current Version (nothing changed: the caller's set is
	// still right), and an empty set when none is held.
	MsgIDs map[string]struct{}
}

// HeldAside is a delivery a consumer moved into held/ because its msg_id
// is held.
type HeldAside struct {
	// File is its name in held/, Ino its inode, Origin the name it had in
	// inbox/, MsgID its key.
	File   string
	Ino    uint64
	Origin string
	MsgID  string
	// Consumer is the session that moved it.
	Consumer string
}
