package handler

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spoolq/spool/ledger"
)

// Script is a parsed SQL file for SQL: its statements, each with its named
// parameters.
type Script struct {
	statements []statement
}

// statement is one statement of a Script.
type statement struct {
	text string
	line int // where it starts in the file, from 1
	// params are the names of its named parameters, each once, in the
	// order they first appear.
	params []string
	// refs are where the parameters appear in text, for bind.
	refs []paramRef
}

// paramRef is one appearance of a named parameter: text[start:end] is
// ":name" (or @name, $name), and param indexes statement.params.
type paramRef struct {
	start, end, param int
}

// bind returns the statement with each named parameter replaced by the
// engine's placeholder, so the same file runs on every ledger (drivers
// such as PostgreSQL's know no named parameters), and for each placeholder
// in order the index in params of its value. With numbered placeholders
// (?NNN on SQLite, $N on PostgreSQL) each parameter is passed once, in
// params order; with positional ones (ledger.Positional) once per
// appearance.
func (s statement) bind(d ledger.Dialect) (string, []int) {
	var b strings.Builder
	var args []int
	positional := ledger.Positional(d)
	if !positional {
		for i := range s.params {
			args = append(args, i)
		}
	}
	last := 0
	for _, r := range s.refs {
		b.WriteString(s.text[last:r.start])
		b.WriteString(d.Placeholder(r.param + 1))
		if positional {
			args = append(args, r.param)
		}
		last = r.end
	}
	b.WriteString(s.text[last:])
	return b.String(), args
}

// ParseSQL parses the content of a SQL file: statements separated by ';',
// with named parameters (:name, @name or $name; see SQL.Handle for their
// values). It refuses a file without a statement, positional parameters
// (?, $1), transaction control (BEGIN, COMMIT, SAVEPOINT, LOCK TABLES...),
// which would end or cut into the ledger's transaction, and any change of
// the session's settings (SET, RESET, set_config(...), PRAGMA, ATTACH...),
// which would hold for the ledger's own statements and commit after the
// script's: synchronous_commit = off would have a commit acknowledged
// before its row is on disk (I3). Each refusal names the statement, its
// line, what it does and why. A CREATE TRIGGER or a function body holds
// ';' outside quotes and cannot be split this way: create those
// beforehand.
func ParseSQL(src string) (*Script, error) {
	stmts, err := splitSQL(src)
	if err != nil {
		return nil, err
	}
	if len(stmts) == 0 {
		return nil, errors.New("no SQL statement in the file")
	}
	for i, s := range stmts {
		if why := refusal(i+1, s); why != "" {
			return nil, errors.New(why)
		}
	}
	return &Script{statements: stmts}, nil
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
func splitSQL(src string) ([]statement, error) {
	var (
		stmts     []statement
		line      = 1
		startLine = 1
		codeStart = 0     // where the statement's first token is
		hasCode   = false // something besides blanks and comments
		cur       statement
		index     = map[string]int{}
	)
	end := func(i int) {
		if hasCode {
			cur.text, cur.line = strings.TrimRightFunc(src[codeStart:i], unicode.IsSpace), startLine
			stmts = append(stmts, cur)
		}
		hasCode, cur, index = false, statement{}, map[string]int{}
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
		case strings.HasPrefix(src[i:], "/*!") || strings.HasPrefix(src[i:], "/*M!"):
			// MariaDB runs the text of such a comment as SQL, which
			// ParseSQL's refusals would not have seen.
			return nil, fmt.Errorf("line %d: %s comment: MariaDB runs its text as SQL, unchecked by spool; write it as plain SQL", line, src[i:i+strings.IndexByte(src[i:], '!')+1])
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
