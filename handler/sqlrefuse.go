package handler

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file is what ParseSQL refuses in a statement besides its syntax:
// whatever would end the ledger's transaction, or change under it the
// settings of the session it runs on. A --sql file runs on the ledger's
// own connections, inside its transaction, so a setting the script
// changed would hold for the ledger's statements after it and for the
// commit (synchronous_commit off: a commit acknowledged before its row is
// on disk, and its file in done/ with no record after a crash, I3), and,
// when the transaction commits, for every later batch on that connection.
// The ledger refuses such settings in its DSN; a script may not make them
// either. The refusals are the same on every engine: a statement that
// means nothing on one (a PRAGMA on PostgreSQL) fails there anyway.

// txControl are the first words of transaction control.
var txControl = map[string]bool{
	"BEGIN": true, "START": true, "COMMIT": true, "END": true, "ROLLBACK": true, "ABORT": true,
	"SAVEPOINT": true, "RELEASE": true, "XA": true,
}

// settingWhy says why the ledger keeps a setting its own, by the
// setting's name in lower case; whyDefault is for the others.
var settingWhy = map[string]string{
	// Durability (I3).
	"synchronous_commit": "off lets a commit return before its row is on disk, and a crash then leaves the file in done/ with no record (I3)",
	"synchronous":        "below FULL a power cut may take back a commit whose file is already in done/ (I3; --durability is the one switch for that)",
	"journal_mode":       "the ledger runs in WAL mode, which its durability and its readers beside the writer rely on",
	"innodb_flush_log_at_trx_commit": "it is the server's, for every client (SET GLOBAL only), and the ledger checks it is 1 " +
		"when it connects: a commit must be on disk before its file reaches done/ (I3)",
	"sync_binlog": "it is the server's, for every client (SET GLOBAL only)",
	"sql_log_bin": "off keeps the business writes, and the ledger's rows committed with them, out of the binary log: a replica, or a restore from it, would lack them",
	"autocommit":  "SET autocommit = 1 commits the ledger's open transaction, and 0 leaves the next ones open",
	// What the ledger's own statements see and lock.
	"search_path": "it decides which schema the ledger's own tables are read from and written to: " +
		"its statements after the script's would go to another schema's",
	"session_replication_role":            "replica turns off triggers and foreign keys, the ledger's outbox order trigger among them",
	"transaction":                         "the ledger's transactions run at READ COMMITTED, read-write, which its reservations and fences rely on",
	"session characteristics":             "the ledger's transactions run at READ COMMITTED, read-write, which its reservations and fences rely on",
	"transaction_isolation":               "the ledger's transactions run at READ COMMITTED, which its reservations and fences rely on",
	"default_transaction_isolation":       "the ledger's transactions run at READ COMMITTED, which its reservations and fences rely on",
	"tx_isolation":                        "the ledger's transactions run at READ COMMITTED, which its reservations and fences rely on",
	"transaction_read_only":               "the ledger's transactions write",
	"default_transaction_read_only":       "the ledger's transactions write",
	"tx_read_only":                        "the ledger's transactions write",
	"statement_timeout":                   "it bounds the ledger's own statements too; the script's are bounded by --sql-timeout",
	"lock_timeout":                        "it bounds the ledger's own waits for locks too",
	"idle_in_transaction_session_timeout": "it would have the server end the ledger's session in the middle of a batch",
	"max_statement_time":                  "it bounds the ledger's own statements too",
	"innodb_lock_wait_timeout":            "it bounds the ledger's own waits for locks too",
	"lock_wait_timeout":                   "it bounds the ledger's own waits for locks too",
	"busy_timeout":                        "it bounds the ledger's own waits for the write lock too",
	"role":                                "the ledger's own statements would run as another user",
	"session authorization":               "the ledger's own statements would run as another user",
	"foreign_keys":                        "off lets in rows the ledger's constraints would refuse",
	"foreign_key_checks":                  "off lets in rows the ledger's constraints would refuse",
	"unique_checks":                       "off lets in rows the ledger's keys would refuse",
	"sql_mode":                            "the ledger's SQL means what it says only in the sql_mode it sets (ANSI_QUOTES, STRICT_ALL_TABLES ...)",
	"names":                               "the ledger compares its keys byte for byte in the connection's character set",
	"character set":                       "the ledger compares its keys byte for byte in the connection's character set",
	"locking_mode":                        "EXCLUSIVE would keep every other consumer out of the ledger",
	"query_only":                          "the ledger's transactions write",
	"writable_schema":                     "it lets the ledger's own schema be written as data",
	// Whole statements: MariaDB's SET GLOBAL of a setting not above, RESET ALL.
	"global": "SET GLOBAL changes the server for every client, the ledger's sessions among them",
	"all":    "RESET ALL puts back every setting of the ledger's session, those it chose among them",
}

const whyDefault = "a setting the script changes stays on the ledger's connection, under the ledger's own statements and later batches"

// refusal returns why statement n (from 1) of a script is refused, or
// "" when it is not.
func refusal(n int, s statement) string {
	toks := tokens(s.text)
	if len(toks) == 0 {
		return ""
	}
	at := func(t token) string {
		return fmt.Sprintf("statement %d (line %d)", n, s.line+strings.Count(s.text[:t.at], "\n"))
	}
	first := toks[0].upper()
	switch {
	case txControl[first] || first == "PREPARE" && word(toks, 1) == "TRANSACTION":
		// They would end or cut into the ledger's own transaction, and
		// the business writes would no longer commit with the row.
		return fmt.Sprintf("%s: %s: the statements already run inside the ledger's transaction; leave transaction control to spool", at(toks[0]), first)
	case first == "SET" || first == "RESET":
		what, name := settingOf(toks)
		return settingRefusal(at(toks[0]), what, name)
	case first == "PRAGMA":
		name := strings.ToLower(word(toks, 1))
		if punct(toks, 2) == "." {
			name = strings.ToLower(word(toks, 3)) // PRAGMA main.synchronous
		}
		why := settingWhy[name]
		if why == "" {
			why = "a PRAGMA sets the ledger's connection (its durability, journal, locks and checks)"
		}
		return fmt.Sprintf("%s: PRAGMA %s: %s; the ledger's session settings are spool's", at(toks[0]), name, why)
	case first == "UNLOCK" || first == "LOCK" && (word(toks, 1) == "TABLES" || hasWord(toks, "READ", "WRITE") && !hasWord(toks, "MODE")):
		// MariaDB's LOCK TABLES (not PostgreSQL's LOCK TABLE ... IN ...
		// MODE, which holds until the transaction's end).
		return fmt.Sprintf("%s: %s TABLES: it commits the ledger's open transaction (MariaDB); leave transaction control to spool", at(toks[0]), first)
	case first == "ATTACH" || first == "DETACH":
		return fmt.Sprintf("%s: %s: a transaction over two database files is not atomic in WAL mode, "+
			"so a crash could keep the business writes without the ledger's row or the row without them", at(toks[0]), first)
	case first == "VACUUM":
		return fmt.Sprintf("%s: VACUUM cannot run inside a transaction, and the statements run inside the ledger's", at(toks[0]))
	case first == "ALTER" && (word(toks, 1) == "ROLE" || word(toks, 1) == "USER" || word(toks, 1) == "DATABASE" || word(toks, 1) == "SYSTEM") &&
		hasWord(toks, "SET", "RESET"):
		return fmt.Sprintf("%s: ALTER %s ... SET: it changes the settings of the ledger's next sessions; the ledger's session settings are spool's", at(toks[0]), word(toks, 1))
	}
	for i, t := range toks {
		switch {
		case t.kind == wordToken && strings.EqualFold(t.text, "set_config") || t.kind == quotedToken && t.text == "set_config":
			if punct(toks, i+1) != "(" {
				continue // a column or table of that name
			}
			name := ""
			if i+2 < len(toks) && toks[i+2].kind == stringToken {
				name = strings.ToLower(toks[i+2].text)
			}
			what := "set_config(...)"
			if name != "" {
				what = fmt.Sprintf("set_config('%s', ...)", name)
			}
			return settingRefusal(at(t), what+" (SET by another name)", name)
		case t.kind == wordToken && t.upper() == "UPDATE":
			j := i + 1
			if word(toks, j) == "ONLY" {
				j++
			}
			if strings.EqualFold(toks[min(j, len(toks)-1)].text, "pg_catalog") && punct(toks, j+1) == "." {
				j += 2
			}
			if j < len(toks) && toks[j].kind == wordToken && strings.EqualFold(toks[j].text, "pg_settings") {
				return settingRefusal(at(t), "UPDATE pg_settings (SET by another name)", "")
			}
		}
	}
	return ""
}

// settingRefusal is the refusal of a statement that changes a setting:
// where, what the statement does, and why the ledger keeps it its own.
func settingRefusal(where, what, name string) string {
	why := settingWhy[name]
	if why == "" {
		why = whyDefault
	}
	return fmt.Sprintf("%s: %s: %s; the ledger's session settings are spool's", where, what, why)
}

// settingOf reads a SET or RESET statement: what it does, as words to
// show ("SET LOCAL synchronous_commit", "SET TRANSACTION"), and the
// setting's name in lower case for settingWhy. It knows PostgreSQL's
// forms (SET [SESSION | LOCAL] name, SET TIME ZONE, SET ROLE, SET SESSION
// AUTHORIZATION, SET TRANSACTION, SET SESSION CHARACTERISTICS AS
// TRANSACTION, RESET name | ALL) and MariaDB's (SET [GLOBAL | SESSION]
// name, SET @@[scope.]name, SET [scope] TRANSACTION ..., SET NAMES,
// SET CHARACTER SET, SET STATEMENT ... FOR).
func settingOf(toks []token) (what, name string) {
	verb := toks[0].upper()
	i := 1
	scope := ""
	if w := word(toks, i); (w == "SESSION" || w == "LOCAL" || w == "GLOBAL") &&
		!(w == "SESSION" && (word(toks, i+1) == "AUTHORIZATION" || word(toks, i+1) == "CHARACTERISTICS")) {
		scope, i = w, i+1
	}
	if punct(toks, i) == "@@" {
		i++
		if w := word(toks, i); (w == "SESSION" || w == "LOCAL" || w == "GLOBAL") && punct(toks, i+1) == "." {
			scope, i = w, i+2
		}
	}
	w := word(toks, i)
	switch {
	case w == "SESSION" && word(toks, i+1) == "AUTHORIZATION":
		name = "session authorization"
	case w == "SESSION" && word(toks, i+1) == "CHARACTERISTICS":
		name = "session characteristics"
	case w == "TIME" && word(toks, i+1) == "ZONE":
		name = "time zone"
	case w == "CHARACTER" && word(toks, i+1) == "SET":
		name = "character set"
	case i < len(toks) && toks[i].kind != punctToken:
		name = strings.ToLower(toks[i].text)
		if punct(toks, i+1) == "." && i+2 < len(toks) {
			name += "." + strings.ToLower(toks[i+2].text) // a custom setting, app.name
		}
	}
	what = verb
	if scope != "" {
		what += " " + scope
	}
	if name != "" {
		if name == "transaction" || name == "session characteristics" || name == "session authorization" ||
			name == "time zone" || name == "character set" || name == "all" || name == "names" || name == "role" {
			what += " " + strings.ToUpper(name)
		} else {
			what += " " + name
		}
	}
	if scope == "GLOBAL" && settingWhy[name] == "" {
		// MariaDB's SET GLOBAL: not the session's, but the server's.
		return what, "global"
	}
	return what, name
}

// tokenKind is what a token of a statement is.
type tokenKind int

const (
	wordToken   tokenKind = iota // a keyword or an unquoted name
	quotedToken                  // a "quoted", `quoted` or [quoted] name: text is inside the quotes
	stringToken                  // a '...' or $$...$$ string: text is inside the quotes
	punctToken                   // one character of punctuation, or "@@"
)

// token is a word of a statement, outside its comments and parameters.
type token struct {
	kind tokenKind
	text string
	at   int // its offset in the statement's text
}

func (t token) upper() string {
	if t.kind != wordToken {
		return ""
	}
	return strings.ToUpper(t.text)
}

// word is the upper-case keyword toks[i], or "" when there is none.
func word(toks []token, i int) string {
	if i < 0 || i >= len(toks) {
		return ""
	}
	return toks[i].upper()
}

// punct is the punctuation toks[i], or "".
func punct(toks []token, i int) string {
	if i < 0 || i >= len(toks) || toks[i].kind != punctToken {
		return ""
	}
	return toks[i].text
}

// hasWord reports whether toks holds one of the keywords ws.
func hasWord(toks []token, ws ...string) bool {
	for _, t := range toks {
		for _, w := range ws {
			if t.upper() == w {
				return true
			}
		}
	}
	return false
}

// tokens splits a statement's text (splitSQL's, whose quotes and comments
// are closed) into words, quoted names, strings and punctuation, by the
// same rules as splitSQL: comments and named parameters are left out.
func tokens(text string) []token {
	var toks []token
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case isSpace(c):
			i++
		case strings.HasPrefix(text[i:], "--"):
			j := strings.IndexByte(text[i:], '\n')
			if j < 0 {
				return toks
			}
			i += j
		case strings.HasPrefix(text[i:], "/*"):
			j := strings.Index(text[i+2:], "*/")
			if j < 0 {
				return toks
			}
			i += 2 + j + 2
		case c == '\'' || c == '"' || c == '`' || c == '[':
			closer := c
			if c == '[' {
				closer = ']'
			}
			var b strings.Builder
			j := i + 1
			for ; j < len(text); j++ {
				if text[j] == closer {
					if closer != ']' && j+1 < len(text) && text[j+1] == closer {
						b.WriteByte(closer)
						j++
						continue
					}
					break
				}
				b.WriteByte(text[j])
			}
			kind := quotedToken
			if c == '\'' {
				kind = stringToken
			}
			toks = append(toks, token{kind: kind, text: b.String(), at: i})
			i = j + 1
		case c == '@' && strings.HasPrefix(text[i:], "@@"):
			toks = append(toks, token{kind: punctToken, text: "@@", at: i})
			i += 2
		case c == ':' && strings.HasPrefix(text[i:], "::"):
			toks = append(toks, token{kind: punctToken, text: "::", at: i})
			i += 2
		case c == ':' || c == '@' || c == '$':
			j := i + 1
			for j < len(text) {
				r, size := utf8.DecodeRuneInString(text[j:])
				if !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
					break
				}
				j += size
			}
			if c == '$' && j < len(text) && text[j] == '$' {
				delim := text[i : j+1]
				k := strings.Index(text[j+1:], delim)
				if k < 0 {
					return toks
				}
				toks = append(toks, token{kind: stringToken, text: text[j+1 : j+1+k], at: i})
				i = j + 1 + k + len(delim)
				continue
			}
			if j == i+1 {
				toks = append(toks, token{kind: punctToken, text: text[i : i+1], at: i})
			}
			i = j // a parameter is no word of the statement
		case isWordByte(c):
			j := i + 1
			for j < len(text) && (isWordByte(text[j]) || text[j] == '$') {
				j++
			}
			toks = append(toks, token{kind: wordToken, text: text[i:j], at: i})
			i = j
		default:
			toks = append(toks, token{kind: punctToken, text: text[i : i+1], at: i})
			i++
		}
	}
	return toks
}

// implicitCommits are the first words of the statements that commit the
// open transaction on an engine that does so (ledger.ImplicitCommit:
// MariaDB's list), but for the ones refusal refuses on every engine, by
// what follows when that decides.
var implicitCommits = map[string]func(toks []token) bool{
	"ALTER":    notTemporary,
	"CREATE":   notTemporary,
	"DROP":     notTemporary,
	"RENAME":   always,
	"TRUNCATE": always,
	"ANALYZE":  func(toks []token) bool { return word(toks, 1) == "TABLE" },
	"OPTIMIZE": always,
	"REPAIR":   always,
	"CHECK":    func(toks []token) bool { return word(toks, 1) == "TABLE" },
	"CACHE":    always,
	"LOAD":     func(toks []token) bool { return word(toks, 1) == "INDEX" },
	"FLUSH":    always,
	"GRANT":    always,
	"REVOKE":   always,
	"CHANGE":   always,
	"STOP":     always,
	"SHUTDOWN": always,
}

func always([]token) bool { return true }

// notTemporary is true but for CREATE, ALTER or DROP [OR REPLACE]
// TEMPORARY TABLE, which do not commit.
func notTemporary(toks []token) bool {
	i := 1
	if word(toks, 1) == "OR" && word(toks, 2) == "REPLACE" {
		i = 3
	}
	return word(toks, i) != "TEMPORARY"
}

// implicitCommit returns why statement n (from 1) of a script is refused
// on engine, which commits the open transaction before it: a
// *StatementError, or nil when it is not refused.
func implicitCommit(engine string, n int, s statement) error {
	toks := tokens(s.text)
	if len(toks) == 0 {
		return nil
	}
	first := toks[0].upper()
	if commits, ok := implicitCommits[first]; !ok || !commits(toks) {
		return nil
	}
	return &StatementError{N: n, Line: s.line, Err: fmt.Errorf("%s: on a %s ledger it commits the ledger's open transaction, so the business writes before it "+
		"would commit without the ledger's rows; create tables beforehand (with the engine's own client) and keep the script to "+
		"the statements a message runs (INSERT, UPDATE, DELETE, SELECT)", first, engine)}
}
