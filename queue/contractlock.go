//go:build linux

package queue

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ContractFile is the file in the queue directory that holds the contract
// of the consumers running now, as the record they gave HoldContract. Each
// live consumer holds a shared flock on it for its whole life, so the
// kernel tells a newcomer whether any is alive, however the others died;
// its content is then what they all run. Without a live holder the content
// is only the last contract run, and the next consumer replaces it.
const ContractFile = "contract.lock"

// ContractDiffersError is returned by HoldContract when consumers that are
// alive run under another record than the one given.
type ContractDiffersError struct {
	// Live is the record of the consumers running now.
	Live []byte
}

func (e *ContractDiffersError) Error() string {
	return "consumers of this queue are running with another contract"
}

// ContractHold is a consumer's share of ContractFile's lock; Close gives
// it up.
type ContractHold struct{ f *os.File }

// Close releases the hold (closing the file drops the flock).
func (h *ContractHold) Close() error {
	if err := h.f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", ContractFile, err)
	}
	return nil
}

// maxContractRecord bounds what HoldContract reads of ContractFile.
const maxContractRecord = 64 << 10

// HoldContract makes the caller one of the queue's live consumers under
// record (an opaque description of its contract, compared byte for byte):
// when no consumer is alive, record is written to ContractFile, durably,
// and held; when some are, the caller joins them if they run under the
// same record, and gets a *ContractDiffersError with theirs otherwise,
// holding nothing. Two starting at once with different records never both
// succeed: the writer holds the lock exclusively while it writes, and every
// holder reads the file back once it holds its share.
func (d *Dir) HoldContract(record []byte) (*ContractHold, error) {
	fd, err := unix.Openat(d.root, ContractFile, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("hold contract: open %s: %w", ContractFile, err)
	}
	f := os.NewFile(uintptr(fd), d.path+"/"+ContractFile)
	h, err := d.holdContract(f, record)
	if err != nil {
		_ = f.Close() // read or locked only: the error that matters is hold's
		return nil, err
	}
	return h, nil
}

func (d *Dir) holdContract(f *os.File, record []byte) (*ContractHold, error) {
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("hold contract: %w", err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("hold contract: %s is not a regular file", f.Name())
	}
	fd := int(f.Fd())
	for range 50 {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			// No consumer is alive: this record is the queue's now.
			if err := d.writeContract(f, record); err != nil {
				return nil, err
			}
		case !errors.Is(err, unix.EWOULDBLOCK):
			return nil, fmt.Errorf("hold contract: lock %s: %w", f.Name(), err)
		}
		// Share the lock (a conversion from exclusive is not atomic:
		// another may write in between, hence the reading back), waiting
		// out a newcomer's write.
		if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
			return nil, fmt.Errorf("hold contract: lock %s: %w", f.Name(), err)
		}
		live, err := readContract(f)
		if err != nil {
			return nil, err
		}
		switch {
		case string(live) == string(record):
			return &ContractHold{f: f}, nil
		case len(live) > 0:
			return nil, &ContractDiffersError{Live: live}
		}
		// Empty: a writer died before writing. Try again for the lock.
		if err := unix.Flock(fd, unix.LOCK_UN); err != nil {
			return nil, fmt.Errorf("hold contract: unlock %s: %w", f.Name(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil, fmt.Errorf("hold contract: %s stays empty while locked", f.Name())
}

// writeContract replaces the content of the locked ContractFile with
// record, durably: the file and the queue directory are fsynced.
func (d *Dir) writeContract(f *os.File, record []byte) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("hold contract: write %s: %w", f.Name(), err)
	}
	if _, err := f.WriteAt(record, 0); err != nil {
		return fmt.Errorf("hold contract: write %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("hold contract: sync %s: %w", f.Name(), err)
	}
	if err := unix.Fsync(d.root); err != nil {
		return fmt.Errorf("hold contract: sync %s: %w", d.path, err)
	}
	return nil
}

// readContract reads the whole of the ContractFile f.
func readContract(f *os.File) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, 0, maxContractRecord+1), maxContractRecord+1))
	if err != nil {
		return nil, fmt.Errorf("hold contract: read %s: %w", f.Name(), err)
	}
	if len(b) > maxContractRecord {
		return nil, fmt.Errorf("hold contract: %s is over %d bytes", f.Name(), maxContractRecord)
	}
	return b, nil
}
