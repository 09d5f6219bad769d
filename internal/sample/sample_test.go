package sample

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/spoolq/spool"
)

// outcomes parses files with the default contract the way the consumer
// would and counts what the ledger would record.
func outcomes(t *testing.T, files []File) (unique, dups int, reasons map[spool.Reason]int, seqs map[string][]int64) {
	t.Helper()
	c := spool.DefaultContract()
	seen := map[string][]byte{}
	reasons = map[spool.Reason]int{}
	seqs = map[string][]int64{}
	for _, f := range files {
		m, err := c.Parse(f.Data)
		var rej *spool.RejectError
		switch {
		case errors.As(err, &rej):
			reasons[rej.Reason]++
			continue
		case err != nil:
			t.Fatalf("%s: %v", f.Name, err)
		}
		if prev, ok := seen[m.MsgID]; ok {
			if !bytes.Equal(prev, f.Data) {
				t.Errorf("%s: redelivery of %s with other content", f.Name, m.MsgID)
			}
			dups++
			continue
		}
		seen[m.MsgID] = f.Data
		unique++
		seqs[m.OrderNo] = append(seqs[m.OrderNo], m.Seq)
	}
	return unique, dups, reasons, seqs
}

func TestLab(t *testing.T) {
	files := Lab()
	if len(files) != LabMessages {
		t.Fatalf("Lab() has %d files, want %d", len(files), LabMessages)
	}
	names := map[string]bool{}
	for i, f := range files {
		if names[f.Name] {
			t.Errorf("name %s repeats", f.Name)
		}
		names[f.Name] = true
		if i > 0 && files[i-1].Name >= f.Name {
			t.Errorf("names not in order: %s before %s", files[i-1].Name, f.Name)
		}
		if !strings.HasSuffix(f.Name, ".json") || strings.HasPrefix(f.Name, ".") {
			t.Errorf("%s is not a message name", f.Name)
		}
	}
	unique, dups, reasons, seqs := outcomes(t, files)
	if unique != LabUnique || dups != LabDuplicates {
		t.Errorf("unique=%d duplicates=%d, want %d and %d", unique, dups, LabUnique, LabDuplicates)
	}
	want := map[spool.Reason]int{spool.ReasonParse: 1, spool.ReasonMissingField: 1}
	if len(reasons) != len(want) || reasons[spool.ReasonParse] != 1 || reasons[spool.ReasonMissingField] != 1 {
		t.Errorf("dead letters by reason = %v, want %v", reasons, want)
	}
	for order, s := range seqs {
		for i, seq := range slices.Sorted(slices.Values(s)) {
			if seq != int64(i+1) {
				t.Errorf("order %s has seqs %v, want 1..%d", order, s, len(s))
				break
			}
		}
	}
	// Exactness: the amounts come back as written, not through float64.
	m, err := spool.DefaultContract().Parse(files[3].Data)
	if err != nil || m.Amount != "12345678901234567.89" {
		t.Errorf("string amount = %q, %v; want 12345678901234567.89", m.Amount, err)
	}
	m, err = spool.DefaultContract().Parse(files[0].Data)
	if err != nil || m.Amount != "1999.90" {
		t.Errorf("number amount = %q, %v; want 1999.90", m.Amount, err)
	}
	// Deterministic.
	again := Lab()
	for i := range files {
		if files[i].Name != again[i].Name || !bytes.Equal(files[i].Data, again[i].Data) {
			t.Fatalf("Lab() differs between calls at %d", i)
		}
	}
}

func collect(t *testing.T, n int, o Options) ([]File, Expected) {
	t.Helper()
	var files []File
	exp, err := Generate(n, o, func(f File) error { files = append(files, f); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return files, exp
}

func TestGenerate(t *testing.T) {
	o := Options{DupFrac: 0.1, PoisonFrac: 0.05, Seed: 42}
	files, exp := collect(t, 5000, o)
	if len(files) != 5000 || exp.Unique+exp.Duplicates+exp.DeadLetters != 5000 {
		t.Fatalf("%d files, expected %+v", len(files), exp)
	}
	unique, dups, reasons, seqs := outcomes(t, files)
	dead := 0
	for _, n := range reasons {
		dead += n
	}
	if unique != exp.Unique || dups != exp.Duplicates || dead != exp.DeadLetters {
		t.Errorf("parsed unique=%d dups=%d dead=%d, Generate said %+v", unique, dups, dead, exp)
	}
	for _, r := range []spool.Reason{spool.ReasonParse, spool.ReasonMissingField, spool.ReasonInvalidField} {
		if reasons[r] == 0 {
			t.Errorf("no poison of reason %s in %v", r, reasons)
		}
	}
	// Fractions are honoured within a few percent at this size.
	if f := float64(exp.Duplicates) / 5000; f < 0.08 || f > 0.12 {
		t.Errorf("duplicate fraction %.3f, want about 0.10", f)
	}
	if f := float64(exp.DeadLetters) / 5000; f < 0.035 || f > 0.065 {
		t.Errorf("poison fraction %.3f, want about 0.05", f)
	}
	for order, s := range seqs {
		for i, seq := range slices.Sorted(slices.Values(s)) {
			if seq != int64(i+1) {
				t.Fatalf("order %s has seqs %v", order, s)
			}
		}
	}
	total := 0
	names := map[string]bool{}
	for i, f := range files {
		total += len(f.Data)
		if names[f.Name] || (i > 0 && files[i-1].Name >= f.Name) {
			t.Fatalf("name %s repeats or is out of order", f.Name)
		}
		names[f.Name] = true
	}
	if avg := total / len(files); avg < 150 || avg > 260 {
		t.Errorf("average body %d bytes, want about 200", avg)
	}

	again, exp2 := collect(t, 5000, o)
	if exp2 != exp {
		t.Errorf("second run expected %+v, first %+v", exp2, exp)
	}
	for i := range files {
		if files[i].Name != again[i].Name || !bytes.Equal(files[i].Data, again[i].Data) {
			t.Fatalf("Generate differs between runs at %d", i)
		}
	}
	other, _ := collect(t, 10, Options{Seed: 43})
	if bytes.Equal(other[0].Data, files[0].Data) {
		t.Error("seeds 42 and 43 gave the same first message")
	}
}

func TestGenerateErrors(t *testing.T) {
	for _, o := range []Options{{DupFrac: -0.1}, {PoisonFrac: 1.1}, {DupFrac: 0.6, PoisonFrac: 0.6}} {
		if _, err := Generate(1, o, func(File) error { return nil }); err == nil {
			t.Errorf("Generate(%+v) accepted bad fractions", o)
		}
	}
	stop := errors.New("stop")
	n := 0
	_, err := Generate(100, Options{}, func(File) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Errorf("Generate after emit error: err=%v after %d calls, want stop after 3", err, n)
	}
}
