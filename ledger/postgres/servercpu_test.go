package postgres

import "testing"

func TestServerCPU(t *testing.T) {
	// Only a PostgreSQL URL is looked for; the backends need not exist.
	for _, dsn := range []string{"", "mysql://root@127.0.0.1:3306/test", "ledger.db"} {
		if _, ok := ServerCPU(dsn); ok {
			t.Errorf("ServerCPU(%q) found a server", dsn)
		}
	}
	if _, ok := ServerCPU("postgres://u@127.0.0.1:1/spool_no_such_database_here"); ok {
		t.Error("ServerCPU found backends of a database that no server serves")
	}
	if _, ok := procCPUTicks("/proc/self/stat"); !ok {
		t.Error("procCPUTicks could not read /proc/self/stat")
	}
}
