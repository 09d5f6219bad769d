package task

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/report"
)

// Matches reports whether the configuration's approval section conf
// agrees with the ledger's policy r: true when either has none, else
// when they are the same.
func (r PolicyRecord) Matches(conf Policy) bool {
	return !r.Set || !conf.Set || conf == r.Policy
}

// ChangePolicy applies settings (KEY=VALUE, as Policy.With takes them)
// to the queue's approval policy as who, and makes the result the
// ledger's (SetPolicy): to the ledger's policy, or, while the ledger has
// adopted none, to conf, the configuration's section, which is what the
// queue has until then. It returns the policy before and after. A bad
// setting wraps ErrBadRequest and changes nothing.
func (s *Service) ChangePolicy(ctx context.Context, who Identity, conf Policy, settings []string) (from, now PolicyRecord, err error) {
	if from, err = LedgerPolicy(ctx, s.Ledger); err != nil {
		return from, from, err
	}
	to := from.Policy
	if !from.Set && conf.Set {
		to = conf
	}
	for _, set := range settings {
		if to, err = to.With(set); err != nil {
			return from, from, err
		}
	}
	now, err = s.SetPolicy(ctx, who, from, to)
	return from, now, err
}

// WritePolicy writes the ledger's policy r for people (spool policy
// show): its settings, who set it, when and how; without one, the
// configuration's section conf (of file) that the next replay, discard
// or approve adopts, or that there is none.
func WritePolicy(w io.Writer, r PolicyRecord, conf Policy, file string) {
	switch {
	case r.Set:
		how := "spool policy set"
		if r.Source == ledger.PolicyFromConfig {
			how = "adopted from " + filepath.Base(file)
		}
		fmt.Fprintf(w, "%s\nset by %s at %s (%s)\n", r.Settings(), report.Terminal(r.SetBy), r.SetAt.UTC().Format(time.RFC3339), how)
	case conf.Set:
		fmt.Fprintf(w, "%s\nnot in the ledger yet: the approval section of %s, adopted by the next replay, discard or approve\n", conf.Settings(), file)
	default:
		fmt.Fprintln(w, "no policy: replays and discards need no approval")
	}
}

// WritePolicyJSON writes r and conf as one JSON object (spool policy
// show --json), whose field names are stable: policy (the ledger's, null
// for none; each limit null for none), set_by, set_at, source, config
// (the configuration's section, null for none) and config_matches
// (Matches).
func WritePolicyJSON(w io.Writer, r PolicyRecord, conf Policy) error {
	out := policyJSON{Policy: limitsOf(r.Policy), Config: limitsOf(conf), Matches: r.Matches(conf)}
	if r.Set {
		at := r.SetAt.UTC()
		out.SetBy, out.SetAt, out.Source = r.SetBy, &at, r.Source
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// policyJSON is what WritePolicyJSON writes.
type policyJSON struct {
	Policy  *policyLimits `json:"policy"`
	SetBy   string        `json:"set_by,omitempty"`
	SetAt   *time.Time    `json:"set_at,omitempty"`
	Source  string        `json:"source,omitempty"`
	Config  *policyLimits `json:"config"`
	Matches bool          `json:"config_matches"`
}

type policyLimits struct {
	ReplayOver  *int `json:"replay_over"`
	DiscardOver *int `json:"discard_over"`
}

func limitsOf(p Policy) *policyLimits {
	if !p.Set {
		return nil
	}
	limit := func(n int) *int {
		if n < 0 {
			return nil
		}
		return &n
	}
	return &policyLimits{ReplayOver: limit(p.ReplayOver), DiscardOver: limit(p.DiscardOver)}
}
