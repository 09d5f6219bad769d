package task

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/replay"
	"github.com/spoolq/spool/report"
)

// Preview is a request resolved against the queue: the file set a task
// would be created with. It is what a dry run shows, and what a request
// shows its caller before anything is recorded (RunOptions.OnPreview).
type Preview struct {
	Kind Kind `json:"kind"`
	// Files is the set, in its order, each with its name, inode, body hash
	// and size, msg_id and reason.
	Files []ledger.TaskFile `json:"-"`
	// Skips are the selected files left out of the set: a replay's
	// messages processed already, unless Force.
	Skips []Skip `json:"-"`
	// Pending are the files a reason or all selected that are pending
	// dead letters (report.ErrorRow.PendingOf), left out of the set.
	Pending []report.PendingError `json:"pending,omitempty"`
	// Count is len(Files), Skipped len(Skips).
	Count   int `json:"count"`
	Skipped int `json:"skipped"`
	// Digest is the hex SHA-256 of the kind and each file's name, inode
	// and body hash, in order: two resolutions with the same digest move
	// the same files with the same bodies, and an approval names the
	// digest of the set it approves.
	Digest string `json:"digest"`
	// NeedsApproval reports that the policy makes a task of this set wait
	// for an approval.
	NeedsApproval bool `json:"needs_approval"`
	// policy is the policy NeedsApproval was judged by: the ledger's as
	// it was then.
	policy Policy
}

// Skip is a selected dead letter left out of a replay's set: the ledger
// processed its message (MsgID) already. At is the number of the set's
// files before it in the selection's order, so that a dry run can show
// the two in that order.
type Skip struct {
	At          int
	File, MsgID string
}

// Reasons are the reasons a dead letter can have: the consumer's
// (spool.Reason) and report.ReasonUnknown, a file without a record.
var Reasons = []string{
	string(spool.ReasonParse), string(spool.ReasonMissingField), string(spool.ReasonInvalidField),
	string(spool.ReasonNotRegular), string(spool.ReasonTooLarge), string(spool.ReasonUnreadable),
	string(spool.ReasonHandler), string(spool.ReasonRetriesExhausted), report.ReasonUnknown,
}

// Preview resolves req against error/ and the ledger as Create would, and
// records nothing: the dry run. It checks req as Create does (a
// *RequestError, queue.ErrNotInError for a name not in error/), but
// audits nothing, takes no lock and finishes nothing a killed run left:
// it only reads, and works on a ledger opened read-only. It needs no
// role: the caller checks that who asks may read.
func (s *Service) Preview(ctx context.Context, req Request) (Preview, error) {
	if err := req.Check(); err != nil {
		return Preview{}, err
	}
	if err := s.checkTo(req.To); err != nil {
		return Preview{}, err
	}
	return s.resolve(ctx, req)
}

// checkTo refuses a To that cannot take the files (queue.Dir.OpenTarget):
// missing, not a directory, inside the queue, on another filesystem, open
// to other users, not writable.
func (s *Service) checkTo(to string) error {
	if to == "" {
		return nil
	}
	t, err := s.Dir.OpenTarget(to)
	if err != nil {
		return &RequestError{Field: "to", Err: fmt.Errorf("to %w", err)}
	}
	return t.Close()
}

// resolve resolves req, checked, into its file set, hashing each file.
// A selection by reason that selects nothing is refused when the reason
// is none spool gives, or, for a discard, none in error/ has (refuseReason).
func (s *Service) resolve(ctx context.Context, req Request) (Preview, error) {
	plan, err := replay.Resolve(ctx, s.Dir, s.Ledger, s.Contract, req.Selection.base(), req.Force || req.Kind == Discard, req.Selection.keep())
	if err != nil {
		return Preview{}, err
	}
	p := Preview{Kind: req.Kind, Pending: plan.Pending}
	for _, st := range plan.Steps {
		if st.Skip {
			p.Skips = append(p.Skips, Skip{At: len(p.Files), File: st.File, MsgID: st.MessageKey()})
			continue
		}
		hash, size, err := s.Dir.HashFile(queue.Error, st.File, st.Ino)
		switch {
		case errors.Is(err, fs.ErrPermission):
			// Unreadable (a dead letter of reason unreadable): no body to
			// hash; checked again as such before it moves.
			hash, size = "", 0
		case err != nil:
			return Preview{}, fmt.Errorf("resolve %s: %w", st.File, err)
		}
		p.Files = append(p.Files, ledger.TaskFile{Idx: len(p.Files), File: st.File, Ino: st.Ino, ContentHash: hash, Size: size,
			MsgID: st.MessageKey(), Reason: st.Reason})
	}
	p.Count, p.Skipped = len(p.Files), len(p.Skips)
	p.Digest = digest(req.Kind, p.Files)
	if p.policy, err = s.policy(ctx); err != nil {
		return Preview{}, err
	}
	p.NeedsApproval = p.policy.Needs(req.Kind, p.Count)
	if p.Count == 0 && p.Skipped == 0 {
		return p, s.refuseReason(ctx, req)
	}
	return p, nil
}

// refuseReason refuses a selection by a reason that selected nothing when
// the reason is a typo (spool gives no such reason: it must not pass for
// "nothing to do"), or, for a discard, when no dead letter in error/ has
// it (a discard is for what is there). The refusal lists the reasons in
// error/ now and every reason there is. Otherwise nothing was selected
// because the filters left nothing: nil.
func (s *Service) refuseReason(ctx context.Context, req Request) error {
	reason := req.Selection.Reason
	if reason == "" {
		return nil
	}
	rows, err := report.Errors(ctx, s.Dir, s.Ledger)
	if err != nil {
		return err
	}
	var now []string
	for _, r := range rows {
		if !slices.Contains(now, r.Reason) {
			now = append(now, r.Reason)
		}
	}
	slices.Sort(now)
	have := "none"
	if len(now) > 0 {
		have = strings.Join(now, ", ")
	}
	switch {
	case slices.Contains(now, reason):
		return nil
	case req.Kind == Discard:
		return badRequest("reason", "reason %q: no dead letter in error/ has it; in error/ now: %s; the reasons: %s",
			reason, have, strings.Join(Reasons, ", "))
	case !slices.Contains(Reasons, reason):
		return badRequest("reason", "reason %q: no dead letter has it and it is no reason spool gives; in error/ now: %s; the reasons: %s",
			reason, have, strings.Join(Reasons, ", "))
	}
	return nil
}

// digest is Preview.Digest of files.
func digest(kind Kind, files []ledger.TaskFile) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", kind)
	for _, f := range files {
		fmt.Fprintf(h, "%d\x00%s\x00%d\x00%s\n", f.Idx, f.File, f.Ino, f.ContentHash)
	}
	return hex.EncodeToString(h.Sum(nil))
}
