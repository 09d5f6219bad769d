package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

// auditPage is GET audit's answer, its rows as ids.
type auditPage struct {
	ids         []int64
	next, newer string
}

// getAuditPage GETs /api/v1/audit?query as the viewer.
func getAuditPage(t *testing.T, base, query string) (int, auditPage) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/v1/audit?"+query, nil)
	req.Header.Set("Authorization", "Bearer v")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var body struct {
		Items       []struct{ ID int64 }
		Next, Newer *string
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("GET audit?%s: %v\n%s", query, err, b)
	}
	var p auditPage
	for _, it := range body.Items {
		p.ids = append(p.ids, it.ID)
	}
	if body.Next != nil {
		p.next = *body.Next
	}
	if body.Newer != nil {
		p.newer = *body.Newer
	}
	return res.StatusCode, p
}

// TestAuditFiltersAndPages: GET audit filters by actor (in every realm
// for a bare name), action, outcome and a time range given with its
// offset, and pages newest first: next goes to older rows, newer back,
// each given only when there is a page to go to.
func TestAuditFiltersAndPages(t *testing.T) {
	srv, l := newTestServer(t, false)
	ctx := context.Background()
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	var olga []int64 // olga's rows, oldest first
	for i := range 7 {
		actor, action, outcome := "token:olga", "replay", ledger.AuditOK
		switch i % 3 {
		case 1:
			actor, outcome = "os:olga", ledger.AuditRefused
		case 2:
			actor, action = "token:ada", "approve"
		}
		id, err := l.Audit().Record(ctx, ledger.AuditEntry{At: t0.Add(time.Duration(i) * time.Hour), Actor: actor, Via: ledger.AuditHTTP,
			Action: action}, outcome, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if actor != "token:ada" {
			olga = append(olga, id)
		}
	}
	rev := slices.Clone(olga)
	slices.Reverse(rev)
	id := func(i int64) string { return strconv.FormatInt(i, 10) }
	tokyo := time.FixedZone("JST", 9*3600)
	for _, c := range []struct {
		query string
		want  auditPage
	}{
		{"actor=olga", auditPage{ids: rev}},
		{"actor=token:olga", auditPage{ids: []int64{olga[4], olga[2], olga[0]}}},
		{"actor=olga&outcome=refused", auditPage{ids: []int64{olga[3], olga[1]}}},
		{"action=replay&actor=OS:OLGA", auditPage{ids: []int64{olga[3], olga[1]}}},
		// 09:00 to 12:00 in Tokyo is 00:00 to 03:00 UTC: the first three rows.
		{"actor=olga&since=" + url.QueryEscape(t0.In(tokyo).Format(time.RFC3339)) + "&until=" + url.QueryEscape(t0.Add(3*time.Hour).In(tokyo).Format(time.RFC3339)),
			auditPage{ids: []int64{olga[1], olga[0]}}},
		{"actor=olga&limit=2", auditPage{ids: rev[:2], next: id(rev[1])}},
		{"actor=olga&limit=2&cursor=" + id(rev[1]), auditPage{ids: rev[2:4], next: id(rev[3]), newer: id(rev[2])}},
		{"actor=olga&limit=2&cursor=" + id(rev[3]), auditPage{ids: rev[4:], newer: id(rev[4])}},
		{"actor=olga&limit=2&after=" + id(rev[4]), auditPage{ids: rev[2:4], next: id(rev[3]), newer: id(rev[2])}},
		{"actor=olga&limit=2&after=" + id(rev[2]), auditPage{ids: rev[:2], next: id(rev[1])}},
		{"actor=nobody", auditPage{}},
	} {
		code, got := getAuditPage(t, srv.URL, c.query)
		if code != 200 || !slices.Equal(got.ids, c.want.ids) || got.next != c.want.next || got.newer != c.want.newer {
			t.Errorf("GET audit?%s: %d %+v, want %+v", c.query, code, got, c.want)
		}
	}
	for _, bad := range []string{"outcome=done", "since=yesterday", "limit=1001", "cursor=x", "cursor=3&after=1"} {
		if code, _ := getAuditPage(t, srv.URL, bad); code != 400 {
			t.Errorf("GET audit?%s: %d, want 400", bad, code)
		}
	}
}

// TestTimeParam: a time parameter is read with its offset, and one
// without is UTC.
func TestTimeParam(t *testing.T) {
	utc := time.Date(2026, 1, 2, 6, 4, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-01-02T15:04:00+09:00":     utc,
		"2026-01-02T15:04+09:00":        utc,
		"2026-01-02T15:04:00.000+09:00": utc,
		"2026-01-02T06:04:00Z":          utc,
		"2026-01-02T06:04:00":           utc,
		"2026-01-02T06:04":              utc,
		"2026-01-02":                    utc.Truncate(24 * time.Hour),
	} {
		got, err := parseTimeParam("since", in)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTimeParam(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"2026-01-02 15:04", "15:04", "2026-13-01"} {
		if _, err := parseTimeParam("since", bad); err == nil {
			t.Errorf("parseTimeParam(%q): no error", bad)
		}
	}
}
