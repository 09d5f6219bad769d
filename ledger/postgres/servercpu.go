package postgres

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture spool builds for.
const clockTicks = 100

// ServerCPU is the user and system time so far of the PostgreSQL backends
// on this machine that serve dsn's database (false when dsn is no
// postgres:// URL or no such backend runs here), found by their process titles
// ("postgres: ... USER DATABASE HOST(PORT) ..."), and whether dsn names
// such a server: the server's share of a drain on the same cores, which
// the bench process's own getrusage does not see. Any client's backends
// on that database count, so a database of the run's own gives the
// drain's alone; a backend that exits between two readings loses its
// time, so read it while the ledger is open.
func ServerCPU(dsn string) (time.Duration, bool) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return 0, false
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = u.User.Username()
	}
	if db == "" {
		return 0, false
	}
	needle := []byte(" " + db + " ")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var ticks int64
	found := false
	for _, d := range dirs {
		cmd, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.HasPrefix(cmd, []byte("postgres:")) || !bytes.Contains(cmd, needle) {
			continue
		}
		t, ok := procCPUTicks(filepath.Join(d, "stat"))
		if ok {
			ticks += t
			found = true
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, found
}

// procCPUTicks reads utime+stime from a /proc/PID/stat file.
func procCPUTicks(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return 0, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return ut + st, true
}
