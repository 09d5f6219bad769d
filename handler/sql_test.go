package handler

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/postgres"
	"github.com/spoolq/spool/ledger/sqlite"
)

// positional is a dialect whose placeholders are positional only, as
// MySQL's are.
type positional struct{ ledger.Dialect }

func (positional) Placeholder(int) string { return "?" }

// stmt is what TestSplitSQL compares of a statement.
type stmt struct {
	text   string
	line   int
	params []string
}

func TestSplitSQL(t *testing.T) {
	for _, tt := range []struct {
		name string
		src  string
		want []stmt
	}{
		{"one without semicolon", "SELECT :msg_id", []stmt{{"SELECT :msg_id", 1, []string{"msg_id"}}}},
		{"two, blank lines and comments", "-- header; not a statement\n\nINSERT INTO a VALUES (:x, @y, $z);\n/* ; */ UPDATE b SET n = n + 1 WHERE k = :x;\n-- trailer",
			[]stmt{
				{"INSERT INTO a VALUES (:x, @y, $z)", 3, []string{"x", "y", "z"}},
				{"UPDATE b SET n = n + 1 WHERE k = :x", 4, []string{"x"}},
			}},
		{"semicolons and markers in literals", "INSERT INTO t VALUES ('a;b', 'it''s :not', \"c;:d\", `e;`, [f;])",
			[]stmt{{"INSERT INTO t VALUES ('a;b', 'it''s :not', \"c;:d\", `e;`, [f;])", 1, nil}}},
		{"multi-line literal keeps line numbers", "SELECT 'a\nb';\nSELECT :seq",
			[]stmt{{"SELECT 'a\nb'", 1, nil}, {"SELECT :seq", 3, []string{"seq"}}}},
		{"each parameter once, in order", "SELECT :b, :a, :b, :été", []stmt{{"SELECT :b, :a, :b, :été", 1, []string{"b", "a", "été"}}}},
		{"dollar inside an identifier", "SELECT a$b FROM t WHERE k = $k", []stmt{{"SELECT a$b FROM t WHERE k = $k", 1, []string{"k"}}}},
		{"PostgreSQL cast and dollar quotes", "SELECT :amount::numeric, $$a;:b$$, $q$c;$q$;\nSELECT 1",
			[]stmt{{"SELECT :amount::numeric, $$a;:b$$, $q$c;$q$", 1, []string{"amount"}}, {"SELECT 1", 2, nil}}},
		{"empty statements dropped", ";;\n ; -- x\n", nil},
		{"a lone colon", "SELECT ':' || x FROM t WHERE y = : ", []stmt{{"SELECT ':' || x FROM t WHERE y = :", 1, nil}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stmts, err := splitSQL(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			var got []stmt
			for _, s := range stmts {
				got = append(got, stmt{s.text, s.line, s.params})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("splitSQL(%q)\n got %#v\nwant %#v", tt.src, got, tt.want)
			}
		})
	}
}

func TestBindSQL(t *testing.T) {
	stmts, err := splitSQL("-- c\n  INSERT INTO t VALUES (:b, @a, ':x', $b, :amount::numeric)")
	if err != nil || len(stmts) != 1 {
		t.Fatalf("%v %v", stmts, err)
	}
	for _, c := range []struct {
		d    ledger.Dialect
		want string
	}{
		{sqlite.Dialect(), "INSERT INTO t VALUES (?1, ?2, ':x', ?1, ?3::numeric)"},
		{postgres.Dialect(), "INSERT INTO t VALUES ($1, $2, ':x', $1, $3::numeric)"},
	} {
		got, args := stmts[0].bind(c.d)
		if got != c.want || !reflect.DeepEqual(args, []int{0, 1, 2}) {
			t.Errorf("%s: %q, %v; want %q, [0 1 2]", c.d.Name(), got, args, c.want)
		}
	}
	// An engine with positional placeholders only gets every appearance.
	got, args := stmts[0].bind(positional{sqlite.Dialect()})
	if want := "INSERT INTO t VALUES (?, ?, ':x', ?, ?::numeric)"; got != want || !reflect.DeepEqual(args, []int{0, 1, 0, 2}) {
		t.Errorf("positional: %q, %v; want %q, [0 1 0 2]", got, args, want)
	}
}

func TestSplitSQLRefuses(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"SELECT 'abc;\n", "line 1: unterminated '"},
		{"SELECT 1;\nSELECT \"x", "line 2: unterminated \""},
		{"SELECT 1 /* no end", "line 1: unterminated /* comment"},
		{"SELECT 1;\n\nSELECT * FROM t WHERE a = ?", "line 3: positional parameter ?"},
		{"SELECT :_x", "parameter :_x: a name must begin with a letter"},
		{"SELECT :1", "parameter :1: a name must begin with a letter"},
		{"SELECT $1", "parameter $1: a name must begin with a letter (positional parameters are not supported)"},
		{"SELECT $q$abc", "line 1: unterminated $q$ string"},
	} {
		_, err := splitSQL(tt.src)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("splitSQL(%q) = %v, want an error containing %q", tt.src, err, tt.want)
		}
	}
}

func TestSQLParam(t *testing.T) {
	m, err := spool.DefaultContract().Parse([]byte(`{"msg_id":"m1","order_no":"O","seq":3,"amount":12.50,` +
		`"customer":"Zo\u00eb \"Z\"","items":[1,{"a":2}],"paid":true,"note":null,"n":7}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		want any
	}{
		{"msg_id", "m1"}, {"order_no", "O"}, {"seq", int64(3)}, {"amount", "12.50"},
		{"file", "a.json"}, {"payload", string(m.Raw)},
		{"customer", `Zoë "Z"`}, {"items", `[1,{"a":2}]`}, {"paid", "true"}, {"n", "7"},
		{"note", nil}, {"absent", nil},
	} {
		got, err := sqlParam(tt.name, m, "a.json")
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf(":%s = %#v, %v; want %#v", tt.name, got, err, tt.want)
		}
	}
	// Absent optional contract fields are NULL, not "" or 0.
	m = &spool.Message{MsgID: "k", Raw: []byte(`{"msg_id":"k"}`)}
	for _, name := range []string{"order_no", "seq", "amount", "file"} {
		if got, _ := sqlParam(name, m, ""); got != nil {
			t.Errorf(":%s of a message without it = %#v, want NULL", name, got)
		}
	}
}
