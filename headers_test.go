package spool

import (
	"errors"
	"strings"
	"testing"
)

const validTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestParseTraceparent(t *testing.T) {
	tc, err := ParseTraceparent(validTP)
	if err != nil {
		t.Fatal(err)
	}
	if tc.String() != validTP || tc.Flags != 1 {
		t.Fatalf("round trip: %s flags %x", tc, tc.Flags)
	}
	for _, bad := range []struct{ in, want string }{
		{"", "55 characters"},
		{validTP + "-", "55 characters"},
		{" " + validTP[1:], "version"},
		{"01" + validTP[2:], "version 01 is not 00"},
		{"ff" + validTP[2:], "version ff is not 00"},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "trace-id"},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "trace-id is all zeros"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "parent-id is all zeros"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01", "parent-id"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", "trace-flags"},
		{"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "dashes"},
	} {
		if _, err := ParseTraceparent(bad.in); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseTraceparent(%q) = %v, want an error with %q", bad.in, err, bad.want)
		}
	}
}

func TestTraceContextChild(t *testing.T) {
	tc, _ := ParseTraceparent(validTP)
	a, b := tc.Child("q-1"), tc.Child("q-2")
	if a.TraceID != tc.TraceID || a.Flags != tc.Flags {
		t.Fatalf("child %s lost the trace-id or flags of %s", a, tc)
	}
	if a.ParentID == tc.ParentID || a.ParentID == b.ParentID || a.ParentID == ([8]byte{}) {
		t.Fatalf("child parent-ids: %s %s of %s", a, b, tc)
	}
	if tc.Child("q-1") != a {
		t.Fatal("Child is not stable for one seed")
	}
	if _, err := ParseTraceparent(a.String()); err != nil {
		t.Fatalf("child %s does not parse: %v", a, err)
	}
}

func headerContract() Contract {
	c := DefaultContract()
	c.Required = []string{"msg_id"}
	c.Headers = HeaderFields{Version: "schema", Trace: "traceparent", Tenant: "tenant"}
	return c
}

func TestParseHeaders(t *testing.T) {
	c := headerContract()
	m, err := c.Parse([]byte(`{"msg_id":"a","schema":"v2","traceparent":"` + validTP + `","tenant":"acme\u00e9"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (MessageHeaders{Version: "v2", Trace: validTP, Tenant: "acmeé"}); m.Headers != want {
		t.Fatalf("headers %+v, want %+v", m.Headers, want)
	}
	m, err = c.Parse([]byte(`{"msg_id":"a","tenant":null}`))
	if err != nil || !m.Headers.IsZero() {
		t.Fatalf("absent headers: %+v %v", m, err)
	}
	for _, bad := range []struct{ in, field, want string }{
		{`{"msg_id":"a","traceparent":"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}`, "traceparent", "all zeros"},
		{`{"msg_id":"a","traceparent":"nope"}`, "traceparent", "55 characters"},
		{`{"msg_id":"a","traceparent":1}`, "traceparent", "W3C traceparent"},
		{`{"msg_id":"a","schema":""}`, "schema", "empty string"},
		{`{"msg_id":"a","schema":2}`, "schema", "must be a string"},
		{`{"msg_id":"a","tenant":"` + strings.Repeat("x", MaxHeaderLen+1) + `"}`, "tenant", "257 bytes"},
		{`{"msg_id":"a","tenant":"a\nb"}`, "tenant", "control"},
		{`{"msg_id":"a","tenant":"acme\ud800"}`, "tenant", `lone surrogate escape (no character, decoded as U+FFFD), found \ud800 at offset 28`},
		{`{"msg_id":"a","schema":"v\uDFFF2"}`, "schema", `lone surrogate escape (no character, decoded as U+FFFD), found \uDFFF at offset 25`},
	} {
		_, err := c.Parse([]byte(bad.in))
		var re *RejectError
		if !errors.As(err, &re) || re.Reason != ReasonInvalidField || re.Field != bad.field || !strings.Contains(re.Detail, bad.want) {
			t.Errorf("Parse(%.60s) = %v, want invalid-field %s with %q", bad.in, err, bad.field, bad.want)
		}
	}
	c.Required = append(c.Required, "tenant")
	var re *RejectError
	if _, err := c.Parse([]byte(`{"msg_id":"a"}`)); !errors.As(err, &re) || re.Reason != ReasonMissingField || re.Field != "tenant" {
		t.Fatalf("required tenant: %v", err)
	}
}

func TestContractCheckHeaders(t *testing.T) {
	c := headerContract()
	c.Headers.Tenant = "order_no"
	if err := c.Check(); !errors.Is(err, ErrBadContract) || !strings.Contains(err.Error(), "tenant header") {
		t.Fatalf("clash with a role field: %v", err)
	}
	c = headerContract()
	c.Headers.Version = "traceparent"
	if err := c.Check(); !errors.Is(err, ErrBadContract) {
		t.Fatalf("clash between headers: %v", err)
	}
}

// FuzzTraceparent checks that ParseTraceparent never panics, that what it
// accepts round-trips exactly, and that a child of it parses.
func FuzzTraceparent(f *testing.F) {
	for _, s := range []string{validTP, "", "00-00000000000000000000000000000000-0000000000000000-00",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", strings.ToUpper(validTP)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tc, err := ParseTraceparent(s)
		if err != nil {
			return
		}
		if tc.String() != s {
			t.Fatalf("accepted %q but formats as %q", s, tc)
		}
		if tc.TraceID == ([16]byte{}) || tc.ParentID == ([8]byte{}) {
			t.Fatalf("accepted an all-zero id: %q", s)
		}
		ch := tc.Child(s)
		if _, err := ParseTraceparent(ch.String()); err != nil || ch.TraceID != tc.TraceID || ch.ParentID == tc.ParentID {
			t.Fatalf("child %s of %q: %v", ch, s, err)
		}
	})
}
