//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// genFile is one entry a test puts into inbox/, with what must become of it.
type genFile struct {
	Name    string
	Data    []byte // content of a regular file
	Special string // "" for a regular file, "dir", "symlink" or "fifo"
	Target  string // a symlink's target
	// For a valid message (first delivery or redelivery):
	MsgID, OrderNo, Amount string
	Seq                    int64
	// Stage is where it must end: done or error; Reason the dead letter's.
	Stage, Reason string
}

// content identifies what the entry holds, as statFile reports it.
func (g *genFile) content() string {
	switch g.Special {
	case "dir":
		return "dir:inside.json"
	case "symlink":
		return "symlink:" + g.Target
	case "fifo":
		return "special:" + fs.ModeNamedPipe.String()
	}
	return "file:" + sha256hex(g.Data)
}

// key identifies one delivery whatever stage it is in: its name without a
// collision suffix, and its content.
func (g *genFile) key() string { return g.Name + "\x00" + g.content() }

func fileKey(f file) string { return originalName(f.Name) + "\x00" + f.Content }

// corpus is a generated inbox and the expected outcome of consuming it.
type corpus struct {
	files []*genFile
	// valid maps each distinct valid msg_id to its first delivery; copies
	// counts its valid deliveries (more than one: redelivered).
	valid  map[string]*genFile
	copies map[string]int
	// outside holds the targets of symlinks, outside the queue: they must
	// stay untouched, never read and never consumed.
	outside map[string]outsideFile
}

// outsideFile is a symlink target as the test created it. Its access time
// tells whether anything read it since: the file systems tests run on
// update it on the first read after a write (relatime), or never (noatime).
type outsideFile struct {
	Data  []byte
	ATime syscall.Timespec
}

// redeliveries is how many valid deliveries are duplicates of an earlier one.
func (c *corpus) redeliveries() int {
	n := 0
	for _, k := range c.copies {
		n += k - 1
	}
	return n
}

// dupIDs is what spool dups must print: the redelivered msg_ids, ascending.
func (c *corpus) dupIDs() []string {
	var ids []string
	for id, k := range c.copies {
		if k > 1 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // byte order, as ORDER BY on TEXT in SQLite (BINARY) and PostgreSQL ("C")
	return ids
}

func (c *corpus) count(stage string) int {
	n := 0
	for _, g := range c.files {
		if g.Stage == stage {
			n++
		}
	}
	return n
}

// genOptions shapes a generated corpus.
type genOptions struct {
	Total   int  // entries in inbox/, about
	Hostile bool // add a few hostile entries (symlink, directory, empty, huge)
}

// poisons are the poison messages a corpus cycles through: the reason each
// must be dead-lettered for, and its content given a fresh msg_id and one
// of a valid message (a poison message must not affect it).
var poisons = []struct {
	reason string
	data   func(id, validID string) string
}{
	{"parse", func(id, _ string) string { return `{"msg_id":"` + id + `","order_no":"x","seq":1,"amount":` }},
	{"parse", func(id, _ string) string { return `{"msg_id":"` + id + `","order_no":"x","seq":1,"amount":1} trailing` }},
	{"parse", func(id, _ string) string { return `[{"msg_id":"` + id + `"}]` }},
	{"missing-field", func(id, _ string) string { return `{"msg_id":"` + id + `","order_no":"x","seq":1}` }},
	{"missing-field", func(_, vid string) string { return `{"msg_id":"` + vid + `","order_no":"x","seq":1,"amount":null}` }},
	{"missing-field", func(_, _ string) string { return `{"order_no":"x","seq":1,"amount":"1.00"}` }},
	{"invalid-field", func(id, _ string) string { return `{"msg_id":"` + id + `","order_no":"x","seq":0,"amount":1}` }},
	{"invalid-field", func(_, vid string) string { return `{"msg_id":"` + vid + `","order_no":"x","seq":"three","amount":1}` }},
	{"invalid-field", func(id, _ string) string { return `{"msg_id":"` + id + `","order_no":"x","seq":1,"amount":"12,50"}` }},
	{"invalid-field", func(_, _ string) string { return `{"msg_id":"","order_no":"x","seq":1,"amount":1}` }},
	{"invalid-field", func(id, _ string) string {
		return `{"msg_id":"` + id + `","order_no":"x","seq":1,"amount":1,"msg_id":"other"}`
	}},
}

// amountForms are the ways a valid message writes its amount: the JSON text
// and what the ledger must store.
var amountForms = []func(i int) (json, stored string){
	func(i int) (string, string) { s := fmt.Sprintf("%d.%02d", i%100000, i%100); return s, s },
	func(i int) (string, string) { s := fmt.Sprintf("%d.%02d", i%1000, i%97); return `"` + s + `"`, s },
	func(i int) (string, string) { s := fmt.Sprintf("-%d.50", i%50); return s, s },
	func(i int) (string, string) { s := strconv.Itoa(i); return s, s },
	func(i int) (string, string) { return "12345678901234567.89", "12345678901234567.89" },
	func(i int) (string, string) { return `"0.10"`, "0.10" },
	func(i int) (string, string) { return "1.5e3", "1.5e3" },
}

// validMessage renders a valid message.
func validMessage(id, idJSON, order string, seq int64, amountJSON, extra string) []byte {
	return fmt.Appendf(nil, `{"msg_id":%s,"order_no":%q,"seq":%d,"amount":%s%s}`, idJSON, order, seq, amountJSON, extra)
}

// genCorpus generates about opt.Total entries: ~88% distinct valid
// messages in orders with gap-free sequences, ~10% redeliveries (the same
// content under another name), ~2% poison, and the hostile extras.
func genCorpus(rng *rand.Rand, opt genOptions) *corpus {
	c := &corpus{valid: map[string]*genFile{}, copies: map[string]int{}, outside: map[string]outsideFile{}}
	nPoison := max(len(poisons), opt.Total*2/100)
	nRedeliver := opt.Total / 10
	nValid := opt.Total - nPoison - nRedeliver
	var valid []*genFile
	order, seq, orderLen := 0, int64(0), int64(0)
	for i := range nValid {
		if seq == orderLen {
			order++
			seq, orderLen = 0, int64(1+rng.IntN(8))
		}
		seq++
		id, idJSON := fmt.Sprintf("m-%06d", i), ""
		if i%25 == 7 {
			// An integer msg_id is kept as its decimal text.
			id = strconv.Itoa(900000 + i)
			idJSON = id
		} else {
			idJSON = strconv.Quote(id)
		}
		amountJSON, amount := amountForms[i%len(amountForms)](i)
		extra := ""
		switch i % 5 {
		case 1:
			extra = fmt.Sprintf(`,"customer":"c-%d","note":"café ☕ %d"`, i%37, i)
		case 2:
			extra = `,"lines":[{"sku":"A","qty":2}],"express":true`
		}
		g := &genFile{
			Data:  validMessage(id, idJSON, fmt.Sprintf("o-%05d", order), seq, amountJSON, extra),
			MsgID: id, OrderNo: fmt.Sprintf("o-%05d", order), Seq: seq, Amount: amount, Stage: done,
		}
		valid = append(valid, g)
		c.valid[id] = g
		c.copies[id] = 1
	}
	entries := append([]*genFile(nil), valid...)
	for range nRedeliver {
		orig := valid[rng.IntN(len(valid))]
		cp := *orig
		entries = append(entries, &cp)
		c.copies[orig.MsgID]++
	}
	for i := range nPoison {
		p := poisons[i%len(poisons)]
		vid := valid[rng.IntN(len(valid))].MsgID
		entries = append(entries, &genFile{
			Data:  []byte(p.data(fmt.Sprintf("p-%05d", i), vid)),
			Stage: errorStage, Reason: p.reason,
		})
	}
	// Names carry no meaning: a random number orders them, the suffix says
	// what the entry is, for whoever reads a failure.
	perm := rng.Perm(len(entries) + 16)
	for i, g := range entries {
		kind := "msg"
		switch {
		case g.Stage == errorStage:
			kind = "poison-" + g.Reason
		case g != c.valid[g.MsgID]:
			kind = "redelivery-" + g.MsgID
		}
		g.Name = fmt.Sprintf("%06d-%s.json", perm[i], kind)
	}
	if opt.Hostile {
		n := perm[len(entries):]
		entries = append(entries,
			&genFile{Name: fmt.Sprintf("%06d-empty.json", n[0]), Data: []byte{}, Stage: errorStage, Reason: "parse"},
			&genFile{Name: fmt.Sprintf("%06d-null.json", n[1]), Data: []byte("null"), Stage: errorStage, Reason: "parse"},
			&genFile{Name: fmt.Sprintf("%06d-dir.json", n[2]), Special: "dir", Stage: errorStage, Reason: "not-regular"},
			&genFile{Name: fmt.Sprintf("%06d-link.json", n[3]), Special: "symlink", Stage: errorStage, Reason: "not-regular"},
			&genFile{Name: fmt.Sprintf("%06d-huge.json", n[4]), Data: hugeMessage(1<<20 + 1), Stage: errorStage, Reason: "too-large"},
			&genFile{Name: fmt.Sprintf("%06d-fifo.json", n[6]), Special: "fifo", Stage: errorStage, Reason: "not-regular"},
		)
		// A valid message under an awkward name is consumed like any other.
		id := "m-odd-name"
		g := &genFile{
			Name: fmt.Sprintf("%06d odd\nname, заказ.json", n[5]),
			Data: validMessage(id, strconv.Quote(id), "o-odd", 1, "7.00", ""), MsgID: id, OrderNo: "o-odd",
			Seq: 1, Amount: "7.00", Stage: done,
		}
		entries = append(entries, g)
		c.valid[id] = g
		c.copies[id] = 1
	}
	c.files = entries
	return c
}

// redeliverLate delivers again, under its own name, up to n valid messages
// that already sit in done/ under that name: the same name and content as
// a processed delivery, so a duplicate (I7) that only a claim's identity
// tells from the original. It writes them the producer's way (hidden temp
// file, then rename) while consumers may run, and returns how many.
func (c *corpus) redeliverLate(t testing.TB, rng *rand.Rand, q string, n int) int {
	t.Helper()
	added := 0
	late := map[string]bool{}
	for _, g := range c.files {
		if g.Stage == done && g != c.valid[g.MsgID] {
			late[g.Name] = true // an earlier late redelivery may still wait in inbox/
		}
	}
	for _, i := range rng.Perm(len(c.files)) {
		g := c.files[i]
		if added == n {
			break
		}
		if g.Stage != done || late[g.Name] {
			continue
		}
		if _, err := os.Lstat(filepath.Join(q, done, g.Name)); err != nil {
			continue
		}
		tmp := filepath.Join(q, inbox, fmt.Sprintf(".late-%d.tmp", added))
		if err := os.WriteFile(tmp, g.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(q, inbox, g.Name)); err != nil {
			t.Fatal(err)
		}
		cp := *g
		c.files = append(c.files, &cp)
		c.copies[g.MsgID]++
		late[g.Name] = true
		added++
	}
	return added
}

// hugeMessage is a valid message padded to size bytes: only its size may
// make it a dead letter.
func hugeMessage(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"msg_id":"huge","order_no":"o-huge","seq":1,"amount":1,"pad":"`)
	b.WriteString(strings.Repeat("x", max(0, size-b.Len()-2)))
	b.WriteString(`"}`)
	return b.Bytes()
}

// write puts the corpus into dir (a queue's inbox/, or a source directory).
// Symlink targets go to outside, which must not be inside the queue.
func (c *corpus) write(t testing.TB, dir, outside string) {
	t.Helper()
	for i, g := range c.files {
		p := filepath.Join(dir, g.Name)
		var err error
		switch g.Special {
		case "dir":
			if err = os.Mkdir(p, 0o755); err == nil {
				err = os.WriteFile(filepath.Join(p, "inside.json"), validMessage(`"inside"`, `"inside"`, "o-in", 1, "1", ""), 0o644)
			}
		case "symlink":
			if g.Target == "" {
				// A valid message outside the queue, with a field of its
				// own: it must never be read through the link.
				target := filepath.Join(outside, fmt.Sprintf("target-%d.json", i))
				data := validMessage(`"outside"`, `"outside"`, "o-out", 1, "1", `,"outside_only":true`)
				if err = os.WriteFile(target, data, 0o644); err != nil {
					break
				}
				var st syscall.Stat_t
				if err = syscall.Stat(target, &st); err != nil {
					break
				}
				g.Target = target
				c.outside[target] = outsideFile{Data: data, ATime: st.Atim}
			}
			err = os.Symlink(g.Target, p)
		case "fifo":
			err = syscall.Mkfifo(p, 0o644)
		default:
			err = os.WriteFile(p, g.Data, 0o644)
		}
		if err != nil {
			t.Fatalf("write corpus: %v", err)
		}
	}
}
