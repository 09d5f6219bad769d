package task

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/ledger"
)

// The approval policy of a queue is its ledger's (ledger.ApprovalPolicy),
// not its configuration file's: a file in a directory its group may
// write can be moved aside for the time of a replay, a ledger row cannot
// without the ledger's own rights and an audit row. The configuration's
// approval section is adopted by the ledger the first time it sees one
// (QueuePolicy); from then on the section must say what the ledger says,
// or be removed, and only SetPolicy changes the policy.

// PolicyAction is the audit's action of a change of the policy (its
// adoption from the configuration, SetPolicy) and of a refusal of one.
const PolicyAction = "policy"

// PolicyRecord is the approval policy a ledger holds, with who set it,
// when and how.
type PolicyRecord struct {
	// Policy is the policy; Set false when the ledger holds none.
	Policy
	// SetBy is the audit's actor who set it, SetAt when, Source how
	// (ledger.PolicyFromConfig, ledger.PolicySet).
	SetBy  string
	SetAt  time.Time
	Source string
}

// LedgerPolicy returns the approval policy l holds (its Set false, and
// the limits NoPolicy's, when it holds none).
func LedgerPolicy(ctx context.Context, l *ledger.DB) (PolicyRecord, error) {
	lp, ok, err := l.Tasks().ApprovalPolicy(ctx)
	if err != nil || !ok {
		return PolicyRecord{Policy: NoPolicy}, err
	}
	return PolicyRecord{Policy: Policy{Set: true, ReplayOver: lp.ReplayOver, DiscardOver: lp.DiscardOver},
		SetBy: lp.SetBy, SetAt: lp.SetAt, Source: lp.Source}, nil
}

// ledgerRecord is r as the ledger holds it.
func (r PolicyRecord) ledgerRecord() ledger.ApprovalPolicy {
	return ledger.ApprovalPolicy{ReplayOver: r.ReplayOver, DiscardOver: r.DiscardOver, SetBy: r.SetBy, SetAt: r.SetAt, Source: r.Source}
}

// policy is the policy a request is judged by now: the ledger's when it
// holds one, else s.Policy.
func (s *Service) policy(ctx context.Context) (Policy, error) {
	r, err := LedgerPolicy(ctx, s.Ledger)
	if err != nil {
		return Policy{}, err
	}
	if r.Set {
		return r.Policy, nil
	}
	return s.Policy, nil
}

// ErrPolicyMismatch is wrapped by *PolicyMismatchError.
var ErrPolicyMismatch = errors.New("the configuration's approval section differs from the ledger's policy")

// PolicyMismatchError refuses a configuration whose approval section
// differs from the policy its queue's ledger holds: the ledger's holds,
// and the file must say the same or nothing.
type PolicyMismatchError struct {
	// File is the configuration file, Conf its approval section.
	File string
	Conf Policy
	// Ledger is the ledger's policy.
	Ledger PolicyRecord
}

func (e *PolicyMismatchError) Error() string {
	return fmt.Sprintf("the approval section of %s (%s) differs from the approval policy of the ledger (%s, set by %s at %s), which holds: make the section say %s, or remove it; spool policy set changes the ledger's",
		e.File, e.Conf.Settings(), e.Ledger.Settings(), e.Ledger.SetBy, e.Ledger.SetAt.UTC().Format(time.RFC3339), e.Ledger.Settings())
}

// Unwrap makes a *PolicyMismatchError match ErrPolicyMismatch.
func (e *PolicyMismatchError) Unwrap() error { return ErrPolicyMismatch }

// QueuePolicy returns the approval policy of the queue: its ledger's.
// conf is the approval section of the queue's configuration file (Set
// false when it has none), file that file's path, for messages. While the
// ledger holds no policy, conf is the queue's: with adopt it is written
// to the ledger, by who, with an audit row (action PolicyAction) in the
// same transaction, and holds from then on; without (a dry run, a reader)
// it is only returned. Once the ledger holds a policy, conf must be the
// same or unset: a *PolicyMismatchError otherwise (audited, refused, with
// adopt), and the ledger's holds whatever the file says or whether it is
// there at all.
func (s *Service) QueuePolicy(ctx context.Context, who Identity, conf Policy, file string, adopt bool) (Policy, error) {
	for attempt := 0; ; attempt++ {
		rec, err := LedgerPolicy(ctx, s.Ledger)
		if err != nil {
			return NoPolicy, err
		}
		if rec.Set {
			if conf.Set && conf != rec.Policy {
				err := &PolicyMismatchError{File: file, Conf: conf, Ledger: rec}
				if adopt {
					sel := map[string]any{"file": file, "section": conf.fields(), "ledger": rec.fields()}
					return rec.Policy, s.refuse(ctx, who, PolicyAction, 0, sel, err)
				}
				return rec.Policy, err
			}
			return rec.Policy, nil
		}
		if !conf.Set {
			return NoPolicy, nil
		}
		if !adopt {
			return conf, nil
		}
		next := PolicyRecord{Policy: conf, SetBy: who.Name, Source: ledger.PolicyFromConfig}
		sel := map[string]any{"file": file, "old": nil, "new": conf.fields()}
		detail := fmt.Sprintf("adopted the approval section of %s: %s", file, conf.Settings())
		err = s.Ledger.Tasks().SetApprovalPolicy(ctx, nil, next.ledgerRecord(), s.entry(who, "", PolicyAction, 0, sel), detail)
		if errors.Is(err, ledger.ErrPolicyChanged) && attempt == 0 {
			// Another process adopted it, or set one, meanwhile: compare
			// with that.
			continue
		}
		if err != nil {
			return NoPolicy, err
		}
		return conf, nil
	}
}

// SetPolicy makes to the queue's approval policy in its ledger, as who,
// from the policy from (as LedgerPolicy returned it: the change is made
// only if it is still the ledger's, else an error wrapping
// ledger.ErrPolicyChanged, nothing changed). who needs RoleApprover (else
// ErrForbidden, audited). The change is audited (action PolicyAction),
// with the old and the new values, in the transaction that makes it.
func (s *Service) SetPolicy(ctx context.Context, who Identity, from PolicyRecord, to Policy) (PolicyRecord, error) {
	sel := map[string]any{"old": from.fields(), "new": to.fields()}
	if who.Role < RoleApprover {
		err := fmt.Errorf("%s as %s may not set the approval policy: approver needed: %w", who.Name, roleName(who.Role), ErrForbidden)
		return from, s.refuse(ctx, who, PolicyAction, 0, sel, err)
	}
	if !to.Set || to.ReplayOver < -1 || to.DiscardOver < -1 {
		return from, fmt.Errorf("%w: set approval policy: %s", ErrBadRequest, to.Settings())
	}
	var old *ledger.ApprovalPolicy
	if from.Set {
		lp := from.ledgerRecord()
		old = &lp
	}
	next := PolicyRecord{Policy: to, SetBy: who.Name, SetAt: time.Now(), Source: ledger.PolicySet}
	detail := fmt.Sprintf("approval policy %s -> %s", from.Settings(), to.Settings())
	if err := s.Ledger.Tasks().SetApprovalPolicy(ctx, old, next.ledgerRecord(), s.entry(who, "", PolicyAction, 0, sel), detail); err != nil {
		return from, err
	}
	return LedgerPolicy(ctx, s.Ledger)
}

// Settings writes p as spool policy set takes it: "replay_over=100
// discard_over=none" ("none": no approval needed for that kind), or "no
// policy" when p is not set.
func (p Policy) Settings() string {
	if !p.Set {
		return "no policy"
	}
	return fmt.Sprintf("%s=%s %s=%s", policyKeys[0], overText(p.ReplayOver), policyKeys[1], overText(p.DiscardOver))
}

func overText(n int) string {
	if n < 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

// fields are p for an audit's selection: each limit, null for none; nil
// when p is not set.
func (p Policy) fields() map[string]any {
	if !p.Set {
		return nil
	}
	out := map[string]any{}
	for i, n := range []int{p.ReplayOver, p.DiscardOver} {
		if n < 0 {
			out[policyKeys[i]] = nil
		} else {
			out[policyKeys[i]] = n
		}
	}
	return out
}

// With returns p (a policy, from then on, if it was none) with the
// setting KEY=VALUE of spool policy set: KEY is replay_over or
// discard_over, VALUE a whole number of files >= 0, or none for no
// approval of that kind. A bad setting wraps ErrBadRequest.
func (p Policy) With(setting string) (Policy, error) {
	key, value, ok := strings.Cut(setting, "=")
	if !ok || (key != policyKeys[0] && key != policyKeys[1]) {
		return p, fmt.Errorf("%w: %q: want replay_over=N or discard_over=N (N files, or none)", ErrBadRequest, setting)
	}
	n := -1
	if value != "none" {
		var err error
		if n, err = strconv.Atoi(value); err != nil || n < 0 || strings.HasPrefix(value, "+") {
			return p, fmt.Errorf("%w: %s=%s: want a whole number of files >= 0, or none", ErrBadRequest, key, value)
		}
	}
	if !p.Set {
		p = NoPolicy
		p.Set = true
	}
	if key == policyKeys[0] {
		p.ReplayOver = n
	} else {
		p.DiscardOver = n
	}
	return p, nil
}
