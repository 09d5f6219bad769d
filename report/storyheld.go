package report

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// What spool show says of a message held aside (spool hold): the files
// of it in held/ with who held them and why, and the hold of its msg_id.

// addHeld adds to m what is held of the message arg names: the records
// of held files of that name (in held/ or as it was in inbox/) or of its
// msg_id, each file also as a place, and the hold of its msg_id.
func addHeld(ctx context.Context, d *queue.Dir, l *ledger.DB, m *MessageStory, arg string) error {
	recs, err := l.Holding().HeldFiles(ctx)
	if err != nil {
		return err
	}
	// arg may be the msg_id of a message never recorded: held aside
	// before any delivery of it was.
	id := m.MsgID
	if id == "" {
		id = arg
	}
	for _, r := range recs {
		if r.File != arg && r.Origin != arg && (r.MsgID == "" || r.MsgID != id) {
			continue
		}
		m.Held = append(m.Held, r)
		if m.MsgID == "" && r.MsgID != "" {
			m.MsgID = r.MsgID
		}
		if ino, ok, err := d.Inode(queue.Held, r.File); err != nil {
			return err
		} else if ok && !hasPlace(m.Places, queue.Held, r.File) {
			m.Places = append(m.Places, Place{Stage: queue.Held, Name: r.File, Ino: ino})
		}
	}
	if m.MsgID != "" {
		id = m.MsgID
	}
	ids, err := l.Holding().HeldIDs(ctx)
	if err != nil {
		return err
	}
	for _, h := range ids {
		if h.MsgID == id {
			m.HeldID = &h
			m.MsgID = id
		}
	}
	return nil
}

func hasPlace(ps []Place, s queue.Stage, name string) bool {
	for _, p := range ps {
		if p.Stage == s && p.Name == name {
			return true
		}
	}
	return false
}

// heldLines are the lines WriteStory prints of what is held.
func heldLines(m MessageStory) [][2]string {
	var out [][2]string
	if h := m.HeldID; h != nil {
		out = append(out, [2]string{"msg_id held", fmt.Sprintf("by %s since %s%s (spool release DIR --msg-id releases it)",
			Shown(h.By), h.At.UTC().Format(time.RFC3339), noteSuffix(h.Note))})
	}
	for _, r := range m.Held {
		why := "by name"
		if r.Cause == ledger.HeldByMsgID {
			why = "its msg_id is held"
		}
		out = append(out, [2]string{"held", fmt.Sprintf("held/%s (was inbox/%s), %s, by %s at %s%s", Shown(r.File), Shown(r.Origin), why,
			Shown(r.By), r.At.UTC().Format(time.RFC3339), noteSuffix(r.Note))})
	}
	return out
}

func noteSuffix(n string) string {
	if n == "" {
		return ""
	}
	return ": " + Shown(n)
}

// StoryHeldJSON is one held file of the message in spool show --json.
type StoryHeldJSON struct {
	File   string    `json:"file"`
	Origin string    `json:"origin"`
	Cause  string    `json:"cause"`
	By     string    `json:"by"`
	Via    string    `json:"via"`
	Note   string    `json:"note"`
	At     time.Time `json:"at"`
}

// StoryHeldIDJSON is the hold of the message's msg_id in spool show --json.
type StoryHeldIDJSON struct {
	By   string    `json:"by"`
	Via  string    `json:"via"`
	Note string    `json:"note"`
	At   time.Time `json:"at"`
}

// heldJSON fills j's held and msg_id_held from m.
func heldJSON(m MessageStory, j *StoryJSON) {
	j.Held = []StoryHeldJSON{}
	for _, r := range m.Held {
		j.Held = append(j.Held, StoryHeldJSON{File: r.File, Origin: r.Origin, Cause: r.Cause, By: r.By, Via: r.Via, Note: r.Note, At: r.At.UTC()})
	}
	if h := m.HeldID; h != nil {
		j.MsgIDHeld = &StoryHeldIDJSON{By: h.By, Via: h.Via, Note: h.Note, At: h.At.UTC()}
	}
}
