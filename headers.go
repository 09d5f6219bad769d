package spool

import (
	"bytes"
	"fmt"
)

// MaxHeaderLen is the longest schema version or tenant a message may
// carry, in bytes: they are labels recorded with every delivery and sent
// with every event, not payload.
const MaxHeaderLen = 256

// HeaderFields names the message fields that carry the message's headers
// (spool.conf's "headers": {"version": ..., "trace": ..., "tenant": ...}).
// An empty name means the contract has no such header. A header field is
// optional unless Contract.Required lists it.
type HeaderFields struct {
	// Version is the field of the schema version: a string of 1 to
	// MaxHeaderLen bytes without control characters or lone surrogate
	// escapes.
	Version string `json:"version,omitempty"`
	// Trace is the field of the W3C trace context: a string that
	// ParseTraceparent accepts.
	Trace string `json:"trace,omitempty"`
	// Tenant is the field of the tenant: a string like Version's.
	Tenant string `json:"tenant,omitempty"`
}

// MessageHeaders are the headers a message carried, by HeaderFields;
// each is "" when the contract has no such field or the message lacks it.
type MessageHeaders struct {
	Version string `json:"version,omitempty"`
	// Trace is the traceparent exactly as sent (valid, since Parse checked it).
	Trace  string `json:"trace,omitempty"`
	Tenant string `json:"tenant,omitempty"`
}

// IsZero reports whether h carries no header at all.
func (h MessageHeaders) IsZero() bool { return h == MessageHeaders{} }

// headerSpans locates the decoded headers in scanner.keys.
type headerSpans struct{ version, trace, tenant span }

// headers checks the contract's header fields of the scanned message.
func (s *scanner) headers(h HeaderFields) (headerSpans, *RejectError) {
	var out headerSpans
	var err *RejectError
	if h.Version != "" {
		if out.version, err = s.label(h.Version); err != nil {
			return out, err
		}
	}
	if h.Trace != "" {
		if out.trace, err = s.traceparent(h.Trace); err != nil {
			return out, err
		}
	}
	if h.Tenant != "" {
		if out.tenant, err = s.label(h.Tenant); err != nil {
			return out, err
		}
	}
	return out, nil
}

// label checks a version or tenant field: a string of 1 to MaxHeaderLen
// bytes, no control characters (it goes into log lines and HTTP headers)
// and no lone surrogate escape.
func (s *scanner) label(name string) (span, *RejectError) {
	m, ok := s.field(name)
	if !ok || m.kind == KindNull {
		return span{}, nil
	}
	const rule = "must be a string of 1 to 256 bytes without control characters"
	if m.kind != KindString {
		return span{}, reject(ReasonInvalidField, name, "%s, found %s", rule, s.describe(m))
	}
	start := len(s.keys)
	s.decodeString(m)
	v := s.keys[start:]
	switch {
	case len(v) == 0:
		return span{}, reject(ReasonInvalidField, name, "%s, found an empty string", rule)
	case len(v) > MaxHeaderLen:
		return span{}, reject(ReasonInvalidField, name, "%s, found %d bytes", rule, len(v))
	case bytes.ContainsFunc(v, isControl):
		return span{}, reject(ReasonInvalidField, name, "%s, found %s", rule, s.describe(m))
	case s.lone >= 0:
		// Two labels that differ only in a lone surrogate would read
		// alike once decoded (Parse).
		return span{}, s.loneSurrogate(name)
	}
	return span{start, len(s.keys)}, nil
}

// traceparent checks the trace field: a W3C traceparent (ParseTraceparent).
func (s *scanner) traceparent(name string) (span, *RejectError) {
	m, ok := s.field(name)
	if !ok || m.kind == KindNull {
		return span{}, nil
	}
	if m.kind != KindString {
		return span{}, reject(ReasonInvalidField, name, "must be a W3C traceparent string 00-<32 hex>-<16 hex>-<2 hex>, found %s", s.describe(m))
	}
	start := len(s.keys)
	s.decodeString(m)
	if _, err := ParseTraceparent(string(s.keys[start:])); err != nil {
		return span{}, reject(ReasonInvalidField, name, "%v: %s", err, s.describe(m))
	}
	return span{start, len(s.keys)}, nil
}

// isControl reports a C0 or C1 control character or DEL.
func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) }

// checkHeaders reports header field names that are set but clash with
// each other or with the role fields in roles.
func (h HeaderFields) check(roles map[string]string) error {
	for _, r := range []struct{ role, name string }{
		{"version header", h.Version}, {"trace header", h.Trace}, {"tenant header", h.Tenant},
	} {
		if r.name == "" {
			continue
		}
		if other, ok := roles[r.name]; ok {
			return fmt.Errorf("%w: %s and %s are both %q", ErrBadContract, other, r.role, r.name)
		}
		roles[r.name] = r.role
	}
	return nil
}

// LogArgs returns h as slog key-value pairs for a message's log records:
// trace_id and span_id (the OpenTelemetry log names, from the
// traceparent), tenant and schema_version, each only when carried.
func (h MessageHeaders) LogArgs() []any {
	var out []any
	if h.Trace != "" {
		if tc, err := ParseTraceparent(h.Trace); err == nil {
			out = append(out, "trace_id", fmt.Sprintf("%x", tc.TraceID), "span_id", fmt.Sprintf("%x", tc.ParentID))
		}
	}
	if h.Tenant != "" {
		out = append(out, "tenant", h.Tenant)
	}
	if h.Version != "" {
		out = append(out, "schema_version", h.Version)
	}
	return out
}
