//go:build linux

package queue

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// ScanWindow is how many names ScanOrdered holds at once: about 6 MiB for
// names of 30 bytes. ScanWindowBytes bounds the same names' bytes, so that
// a backlog of long names (up to 255 bytes each) holds fewer of them.
const (
	ScanWindow      = 1 << 17
	ScanWindowBytes = 8 << 20
)

// window bounds what one read of the directory keeps.
type window struct{ names, bytes int }

// maxWindows bounds the directory reads of one ScanOrdered. Each window
// costs a read of the whole directory (an ext4 directory does not shrink as
// its files leave), so a backlog of k windows is read k times over: past
// maxWindows windows that costs more than it saves, and the rest is taken
// in directory order.
const maxWindows = 16

// ScanOrdered calls fn with the message names of a stage in ascending name
// order, ScanChunk names at a time, while holding at most ScanWindow names
// (and ScanWindowBytes of them) in memory: each read of the directory keeps
// the smallest names after the last one delivered. A backlog of more than
// maxWindows windows is taken in windows of its smallest names first, then
// in directory order (as Scan), so that the reads stay linear in its size.
//
// Why the consumer wants it: a drop folder's names usually carry the order
// the producer wrote in (a sequence number, a timestamp), and so, often, do
// its msg_ids. In name order a backlog drains oldest first on any machine
// (directory order is a hash of the names on ext4, seeded per filesystem),
// and the ledger's msg_id index grows at its end instead of at random
// places: at a million messages that halved the ledger's cost per message.
//
// A name that sorts before the last one delivered and appears later (a new
// file, a retry sent back) is not delivered by this call: as with Scan,
// callers that must see everything scan again until a pass finds nothing.
func (d *Dir) ScanOrdered(s Stage, fn func(names []string) error) error {
	return d.scanOrdered(s, window{ScanWindow, ScanWindowBytes}, fn)
}

func (d *Dir) scanOrdered(s Stage, w window, fn func(names []string) error) error {
	after := ""
	for range maxWindows {
		// Nothing refers to the previous window any more but its last
		// name (after), so the collector can take it during this read.
		names, more, err := d.smallest(s, w, after)
		if err != nil {
			return err
		}
		slices.Sort(names)
		for chunk := range slices.Chunk(names, ScanChunk) {
			if err := fn(chunk); err != nil {
				return err
			}
		}
		if more == 0 {
			return nil
		}
		if len(names) == 0 {
			break // no name fit the window's bytes: take them as they come
		}
		after = names[len(names)-1]
		if more > (maxWindows-1)*len(names) {
			break
		}
	}
	// The rest in directory order, but for the names delivered already.
	return d.Scan(s, func(names []string) error {
		names = slices.DeleteFunc(names, func(n string) bool { return n <= after })
		if len(names) == 0 {
			return nil
		}
		return fn(names)
	})
}

// smallest reads the stage's directory once and returns its smallest
// message names (as many as w allows) that sort after after, in no
// particular order, and how many names after after it
// left out. The names are read without a string for each: most are
// compared and dropped.
func (d *Dir) smallest(s Stage, w window, after string) ([]string, int, error) {
	fd, err := unix.Openat(d.fd(s), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("scan %s: %w", s, err)
	}
	defer unix.Close(fd)
	var h maxHeap
	more, held := 0, 0 // names left out; bytes of the names in h
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("scan %s: %w", s, err)
		}
		if n <= 0 {
			break
		}
		for off := 0; off < n; {
			name := direntName(buf[off:n])
			off += int(binary.NativeEndian.Uint16(buf[off+16:]))
			// The string conversions in comparisons do not allocate.
			// after is "" on the first read, before every message name.
			if !d.isMessage(s, name) || string(name) <= after {
				continue
			}
			// Once a name has been left out, only a name smaller than the
			// largest held may come in: every name held must sort before
			// every name left out, or the next read, which starts after
			// the largest held, would skip one.
			if more == 0 && len(h) < w.names && held+len(name) <= w.bytes {
				h.push(string(name))
				held += len(name)
				continue
			}
			more++
			if len(h) == 0 || string(name) >= h[0] {
				continue
			}
			// It takes the largest name's place, and more of the largest
			// leave while the names held are over the byte bound.
			held += len(name) - len(h[0])
			h.replaceMax(string(name))
			for held > w.bytes && len(h) > 1 {
				held -= len(h[0])
				h.popMax()
				more++
			}
		}
	}
	return h, more, nil
}

// direntName is the name of the linux_dirent64 at the start of b: after
// d_ino (8 bytes), d_off (8), d_reclen (2) and d_type (1), NUL-terminated
// within the record.
func direntName(b []byte) []byte {
	reclen := int(binary.NativeEndian.Uint16(b[16:]))
	name := b[19:reclen]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	return name
}

// maxHeap keeps the largest of the names it holds at its root, so that a
// smaller name can replace it. It is container/heap's algorithm on a
// []string: through heap.Interface every name pushed would be boxed into an
// interface, an allocation per name that the collector must then find.
type maxHeap []string

func (h *maxHeap) push(name string) {
	*h = append(*h, name)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if s[parent] >= s[i] {
			break
		}
		s[parent], s[i] = s[i], s[parent]
		i = parent
	}
}

// replaceMax puts name, smaller than the root, in the root's place.
func (h maxHeap) replaceMax(name string) {
	h[0] = name
	h.down()
}

// popMax removes the root.
func (h *maxHeap) popMax() {
	s := *h
	last := len(s) - 1
	s[0] = s[last]
	*h = s[:last]
	h.down()
}

// down moves the root down to its place.
func (h maxHeap) down() {
	for i := 0; ; {
		largest, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h[l] > h[largest] {
			largest = l
		}
		if r < len(h) && h[r] > h[largest] {
			largest = r
		}
		if largest == i {
			return
		}
		h[i], h[largest] = h[largest], h[i]
		i = largest
	}
}
