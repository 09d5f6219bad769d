package ledger

import (
	"database/sql"
	"math/bits"
	"testing"
)

// TestMultiRowSplit: every row count goes out as prepared forms only
// (powers of two up to rowsPerInsert), largest first, each row once.
func TestMultiRowSplit(t *testing.T) {
	const cols = 3
	m := &multiRow{cols: cols}
	for n := 1; n <= rowsPerInsert; n *= 2 {
		m.forms = append(m.forms, new(sql.Stmt))
	}
	for n := 0; n <= 3*rowsPerInsert+5; n++ {
		args := make([]any, n*cols)
		for i := range args {
			args[i] = i
		}
		next, last := 0, rowsPerInsert
		err := m.split(args, func(st *sql.Stmt, piece []any) error {
			rows := len(piece) / cols
			if len(piece)%cols != 0 || bits.OnesCount(uint(rows)) != 1 || rows > last {
				t.Fatalf("%d rows: a piece of %d values (%d rows) after one of %d rows", n, len(piece), rows, last)
			}
			if st != m.forms[bits.Len(uint(rows))-1] {
				t.Fatalf("%d rows: a piece of %d rows went to another form", n, rows)
			}
			for _, a := range piece {
				if a.(int) != next {
					t.Fatalf("%d rows: value %v where %d was due", n, a, next)
				}
				next++
			}
			last = rows
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if next != n*cols {
			t.Fatalf("%d rows: %d values sent, want %d", n, next, n*cols)
		}
	}
}

// TestMultiRowSplitPadded: with pad, each row goes out once and in order,
// in full forms of rowsPerInsert and then one more statement, its form
// filled up with copies of the last row only.
func TestMultiRowSplitPadded(t *testing.T) {
	const cols = 2
	m := &multiRow{cols: cols, pad: true}
	for n := 1; n <= rowsPerInsert; n *= 2 {
		m.forms = append(m.forms, new(sql.Stmt))
	}
	for n := 0; n <= 3*rowsPerInsert+5; n++ {
		args := make([]any, n*cols)
		for i := range args {
			args[i] = i
		}
		next, statements := 0, 0
		err := m.split(args, func(st *sql.Stmt, piece []any) error {
			statements++
			rows := len(piece) / cols
			if len(piece)%cols != 0 || bits.OnesCount(uint(rows)) != 1 || st != m.forms[bits.Len(uint(rows))-1] {
				t.Fatalf("%d rows: a piece of %d values that is no prepared form", n, len(piece))
			}
			for r := range rows {
				row := piece[r*cols : (r+1)*cols]
				if next == n*cols {
					// Padding: a copy of the last row.
					if row[0].(int) != (n-1)*cols {
						t.Fatalf("%d rows: padded with %v, want copies of the last row", n, row)
					}
					continue
				}
				for _, a := range row {
					if a.(int) != next {
						t.Fatalf("%d rows: value %v where %d was due", n, a, next)
					}
					next++
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if next != n*cols {
			t.Fatalf("%d rows: %d values sent, want %d", n, next, n*cols)
		}
		if want := (n + rowsPerInsert - 1) / rowsPerInsert; statements != want {
			t.Fatalf("%d rows: %d statements, want %d", n, statements, want)
		}
	}
}
