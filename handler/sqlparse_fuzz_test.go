package handler

import (
	"strings"
	"testing"

	"github.com/spoolq/spool/ledger/postgres"
)

// FuzzParseSQL checks ParseSQL on arbitrary text: it must not panic; a
// refusal is one line; and a script it accepts is statements found in the
// source, in order, whose parameters are where it says, none of them
// refused, and which parse again, joined, into the same statements.
func FuzzParseSQL(f *testing.F) {
	for _, s := range []string{
		"INSERT INTO t (msg_id, amount) VALUES (:msg_id, :amount);",
		"INSERT INTO t VALUES (@msg_id, $order_no, :seq::numeric) ON CONFLICT (msg_id) DO UPDATE SET n = t.n + 1",
		"-- c\nSELECT 'a;b', \"x;y\", `z`, [w] /* ; */ FROM t; SELECT $$;$$, $q$ $$ $q$",
		"SET synchronous_commit = off", "SET LOCAL synchronous_commit TO off",
		"SELECT set_config('synchronous_commit', 'off', true)", "PRAGMA synchronous = OFF",
		"SET @@session.autocommit = 0", "RESET ALL", "BEGIN; COMMIT", "SELECT 1 /*! ; SET autocommit = 1 */",
		"INSERT INTO t (set_config_x) VALUES ('SET synchronous_commit')", "SELECT ?", "SELECT $1", "SELECT 'open",
		"UPDATE pg_settings SET setting = 'off'", "LOCK TABLE t IN SHARE MODE", "SELECT :é, :a1, @@x.y",
	} {
		f.Add(s)
	}
	d := postgres.Dialect()
	f.Fuzz(func(t *testing.T, src string) {
		s, err := ParseSQL(src)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\r\n") && !strings.ContainsAny(src, "\r\n") {
				t.Fatalf("ParseSQL(%q): refusal %q is not one line", src, err)
			}
			return
		}
		from := 0
		var texts []string
		for i, st := range s.statements {
			k := strings.Index(src[from:], st.text)
			if st.text == "" || k < 0 {
				t.Fatalf("ParseSQL(%q): statement %d %q is not in the source after offset %d", src, i+1, st.text, from)
			}
			from += k + len(st.text)
			if why := refusal(i+1, st); why != "" {
				t.Fatalf("ParseSQL(%q) accepted statement %d, which refusal refuses: %s", src, i+1, why)
			}
			for _, r := range st.refs {
				ref := st.text[r.start:r.end]
				if r.param >= len(st.params) || !strings.ContainsAny(ref[:1], ":@$") || ref[1:] != st.params[r.param] {
					t.Fatalf("ParseSQL(%q): statement %d: reference %q is not parameter %d of %q", src, i+1, ref, r.param, st.params)
				}
			}
			st.bind(d)
			texts = append(texts, st.text)
		}
		again, err := ParseSQL(strings.Join(texts, ";\n"))
		if err != nil {
			t.Fatalf("ParseSQL(%q) accepted, but its statements joined are refused: %v", src, err)
		}
		if len(again.statements) != len(s.statements) {
			t.Fatalf("ParseSQL(%q): %d statements, joined and parsed again %d", src, len(s.statements), len(again.statements))
		}
		for i := range again.statements {
			if again.statements[i].text != s.statements[i].text {
				t.Fatalf("ParseSQL(%q): statement %d %q, parsed again %q", src, i+1, s.statements[i].text, again.statements[i].text)
			}
		}
	})
}
