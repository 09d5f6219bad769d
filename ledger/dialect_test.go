package ledger

import (
	"strings"
	"testing"
)

func TestOrderCheckSQLEmbedded(t *testing.T) {
	if !strings.Contains(OrderCheckSQL, "LAG(seq) OVER (PARTITION BY order_no ORDER BY seq)") {
		t.Error("OrderCheckSQL does not hold the query")
	}
	if strings.ContainsRune(OrderCheckSQL, '?') {
		t.Error("OrderCheckSQL has a placeholder; it must run as is in sqlite3 and psql")
	}
}
