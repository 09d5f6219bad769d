package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"modernc.org/sqlite"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// sqlStatement is one statement of a --sql file.
type sqlStatement struct {
	text string
	line int // where it starts in the file, from 1
	// params are the names of its named parameters, each once, in the
	// order they first appear.
	params []string
	// refs are where the parameters appear in text, for bind.
	refs []paramRef
}

// paramRef is one appearance of a named parameter: text[start:end] is
// ":name" (or @name, $name), and param indexes sqlStatement.params.
type paramRef struct {
	start, end, param int
}

// bind returns the statement with each named parameter replaced by the
// engine's numbered placeholder (?NNN on SQLite, $N on PostgreSQL), so the
// same file runs on both ledgers with its values passed in params order:
// PostgreSQL's drivers know no named parameters.
func (s sqlStatement) bind(d ledger.Dialect) string {
	var b strings.Builder
	last := 0
	for _, r := range s.refs {
		b.WriteString(s.text[last:r.start])
		b.WriteString(d.Placeholder(r.param + 1))
		last = r.end
	}
	b.WriteString(s.text[last:])
	return b.String()
}

// readSQLFile reads and splits a --sql file: it must exist and hold at
// least one statement, none of them transaction control.
func readSQLFile(path string) ([]sqlStatement, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--sql: %w", err)
	}
	stmts, err := splitSQL(string(data))
	if err != nil {
		return nil, fmt.Errorf("--sql %s: %w", path, err)
	}
	if len(stmts) == 0 {
		return nil, fmt.Errorf("--sql %s: no SQL statement in the file", path)
	}
	for i, s := range stmts {
		word := strings.ToUpper(s.text)
		if end := strings.IndexFunc(word, func(r rune) bool { return !unicode.IsLetter(r) }); end >= 0 {
			word = word[:end]
		}
		switch word {
		case "BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE":
			// They would end or cut into the ledger's own transaction, and
			// the business writes would no longer commit with the row.
			return nil, fmt.Errorf("--sql %s: statement %d (line %d): %s: the statements already run inside the ledger's transaction; leave transaction control to spool", path, i+1, s.line, word)
		}
	}
	return stmts, nil
}

// splitSQL splits src into statements at each ';' outside string literals,
// quoted identifiers ("x", `x`, [x]), PostgreSQL dollar-quoted strings
// ($$x$$, $tag$x$tag$) and comments (-- to the end of the line, /* ... */),
// and finds each statement's named parameters (:name, @name, $name; a
// PostgreSQL cast x::type is none). Statements holding nothing but blanks
// and comments are dropped. Positional parameters (?, $1) are refused: a
// message binds its values by name. (A CREATE TRIGGER or a function body
// holds ';' outside quotes and cannot be split this way: create those
// beforehand.)
func splitSQL(src string) ([]sqlStatement, error) {
	var (
		stmts     []sqlStatement
		line      = 1
		startLine = 1
		codeStart = 0     // where the statement's first token is
		hasCode   = false // something besides blanks and comments
		cur       sqlStatement
		index     = map[string]int{}
	)
	end := func(i int) {
		if hasCode {
			cur.text, cur.line = strings.TrimRightFunc(src[codeStart:i], unicode.IsSpace), startLine
			stmts = append(stmts, cur)
		}
		hasCode, cur, index = false, sqlStatement{}, map[string]int{}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if !hasCode && !isSpace(c) && c != ';' && !strings.HasPrefix(src[i:], "--") && !strings.HasPrefix(src[i:], "/*") {
			hasCode, codeStart, startLine = true, i, line
		}
		switch {
		case c == '\n':
			line++
		case c == ';':
			end(i)
		case c == '\'' || c == '"' || c == '`' || c == '[':
			closer, opened := c, line
			if c == '[' {
				closer = ']'
			}
			j := i + 1
			for ; j < len(src); j++ {
				if src[j] == '\n' {
					line++
				}
				if src[j] == closer {
					// A doubled quote is an escaped one, not the end.
					if closer != ']' && j+1 < len(src) && src[j+1] == closer {
						j++
						continue
					}
					break
				}
			}
			if j >= len(src) {
				return nil, fmt.Errorf("line %d: unterminated %c", opened, c)
			}
			i = j
		case strings.HasPrefix(src[i:], "--"):
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				i = len(src)
				continue
			}
			i += j - 1 // the newline is counted next
		case strings.HasPrefix(src[i:], "/*"):
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("line %d: unterminated /* comment", line)
			}
			line += strings.Count(src[i:i+2+j], "\n")
			i += 2 + j + 1
		case c == '?':
			return nil, fmt.Errorf("line %d: positional parameter ?: use named parameters (:msg_id, :amount, ...)", line)
		case c == ':' && strings.HasPrefix(src[i:], "::"):
			i++ // a PostgreSQL cast, not a parameter
		case c == ':' || c == '@' || c == '$':
			if c == '$' && i > 0 && isWordByte(src[i-1]) {
				continue // SQLite allows $ inside an identifier: a$b
			}
			j := i + 1
			for j < len(src) {
				r, size := utf8.DecodeRuneInString(src[j:])
				if !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
					break
				}
				j += size
			}
			if c == '$' && j < len(src) && src[j] == '$' {
				// A dollar-quoted string: $$...$$ or $tag$...$tag$.
				delim := src[i : j+1]
				k := strings.Index(src[j+1:], delim)
				if k < 0 {
					return nil, fmt.Errorf("line %d: unterminated %s string", line, delim)
				}
				line += strings.Count(src[i:j+1+k], "\n")
				i = j + k + len(delim)
				continue
			}
			if j == i+1 {
				continue
			}
			name := src[i+1 : j]
			if r, _ := utf8.DecodeRuneInString(name); !unicode.IsLetter(r) {
				return nil, fmt.Errorf("line %d: parameter %c%s: a name must begin with a letter (positional parameters are not supported)", line, c, name)
			}
			k, ok := index[name]
			if !ok {
				k = len(cur.params)
				index[name] = k
				cur.params = append(cur.params, name)
			}
			cur.refs = append(cur.refs, paramRef{start: i - codeStart, end: j - codeStart, param: k})
			i = j - 1
		}
	}
	end(len(src))
	return stmts, nil
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 0x80 || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// newSQLHandler checks a --sql file's statements against the ledger and
// returns the handler that runs them. Each statement is prepared in a
// transaction that is rolled back; those without parameters (CREATE TABLE
// IF NOT EXISTS...) are also run, each in a savepoint, so that the
// statements after them can refer to what they create. A statement that
// does not compile is a configuration error: exit 2, before anything is
// consumed.
func newSQLHandler(ctx context.Context, l *ledger.DB, path string, stmts []sqlStatement) (*sqlHandler, error) {
	h := &sqlHandler{dialect: l.Dialect()}
	for _, s := range stmts {
		h.statements = append(h.statements, boundStatement{sqlStatement: s, query: s.bind(h.dialect)})
	}
	tx, err := l.SQL().BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("--sql %s: check against the ledger: %w", path, err)
	}
	// Nothing of the check may stay.
	defer func() { _ = tx.Rollback() }()
	for i, s := range h.statements {
		st, err := tx.PrepareContext(ctx, s.query)
		if err != nil {
			return nil, &usageError{msg: fmt.Sprintf("--sql %s: statement %d (line %d): %v", path, i+1, s.line, err)}
		}
		cerr := st.Close()
		if cerr != nil {
			return nil, fmt.Errorf("--sql %s: statement %d: %w", path, i+1, cerr)
		}
		if len(s.params) > 0 {
			continue
		}
		// Its failure is the data's business, found again per message; the
		// savepoint keeps it from aborting the check's transaction
		// (PostgreSQL).
		if _, err := tx.ExecContext(ctx, "SAVEPOINT spool_check"); err != nil {
			return nil, fmt.Errorf("--sql %s: check: %w", path, err)
		}
		undo := "RELEASE SAVEPOINT spool_check"
		if _, err := tx.ExecContext(ctx, s.query); err != nil {
			undo = "ROLLBACK TO SAVEPOINT spool_check"
		}
		if _, err := tx.ExecContext(ctx, undo); err != nil {
			return nil, fmt.Errorf("--sql %s: check: %w", path, err)
		}
	}
	return h, nil
}

// boundStatement is a statement with its placeholders in the engine's
// syntax.
type boundStatement struct {
	sqlStatement
	query string
}

// sqlHandler runs a --sql file's statements in the ledger transaction.
type sqlHandler struct {
	dialect    ledger.Dialect
	statements []boundStatement
}

// Handle runs each statement with its parameters bound to the message. A
// statement's failure is permanent (a constraint, a type, a missing table)
// unless the database reports a conflict that a later attempt may not
// meet: SQLite busy or locked; a PostgreSQL serialization failure,
// deadlock, lock or statement timeout.
func (h *sqlHandler) Handle(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
	m, file := d.Message, fileName(d)
	for i, s := range h.statements {
		args := make([]any, 0, len(s.params))
		for _, name := range s.params {
			v, err := sqlParam(name, m, file)
			if err != nil {
				return spool.Permanent(fmt.Errorf("sql statement %d (line %d): parameter :%s: %w", i+1, s.line, name, err))
			}
			args = append(args, v)
		}
		if _, err := tx.ExecContext(ctx, s.query, args...); err != nil {
			err = fmt.Errorf("sql statement %d (line %d): %w", i+1, s.line, err)
			if isConflict(err) {
				return err
			}
			return spool.Permanent(err)
		}
	}
	return nil
}

// sqlParam is the value of a named parameter for m: spool's own names
// first, then the message's top-level field of that name (a string
// decoded, null as NULL, anything else its JSON text), else NULL.
func sqlParam(name string, m *spool.Message, file string) (any, error) {
	switch name {
	case "msg_id":
		return m.MsgID, nil
	case "order_no":
		return nullText(m.OrderNo), nil
	case "seq":
		if m.Seq == 0 {
			return nil, nil
		}
		return m.Seq, nil
	case "amount":
		return nullText(string(m.Amount)), nil
	case "file":
		return nullText(file), nil
	case "payload":
		return string(m.Raw), nil
	}
	f, ok := m.Field(name)
	if !ok {
		return nil, nil
	}
	switch f.Kind {
	case spool.KindNull:
		return nil, nil
	case spool.KindString:
		var s string
		if err := json.Unmarshal(f.Raw, &s); err != nil {
			return nil, fmt.Errorf("decode string: %w", err)
		}
		return s, nil
	}
	return string(f.Raw), nil
}

func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// isConflict reports whether err is the database telling of a conflict
// with other work, which a later attempt may not meet, rather than a fault
// of the statement or the message.
func isConflict(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		const sqliteBusy, sqliteLocked = 5, 6
		switch se.Code() & 0xff {
		case sqliteBusy, sqliteLocked:
			return true
		}
		return false
	}
	// PostgreSQL's errors (pgconn.PgError) carry their SQLSTATE.
	var pe interface{ SQLState() string }
	if errors.As(err, &pe) {
		switch pe.SQLState() {
		case "40001", // serialization_failure
			"40P01", // deadlock_detected
			"55P03", // lock_not_available (lock_timeout)
			"57014": // query_canceled (statement_timeout)
			return true
		}
	}
	return false
}
