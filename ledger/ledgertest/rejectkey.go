package ledgertest

import (
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testRejectKey: a dead letter rejected with a valid key records it: the
// story of that msg_id tells it; a key longer than the engine keeps is
// not recorded.
func testRejectKey(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	d := rejected("c1", "a.json", 300, spool.ReasonMissingField, "order_no", "required field is missing")
	d.Reject.MsgID = "a2"
	long := rejected("c2", "b.json", 301, spool.ReasonMissingField, "order_no", "required field is missing")
	long.Reject.MsgID = strings.Repeat("k", 3000) // over every MaxKey
	record(t, db, d, long)
	st, err := db.Messages().Story(ctx, "a2", "")
	if err != nil || len(st.Deliveries) != 1 || st.Deliveries[0].File != "a.json" || st.Deliveries[0].MsgID != "a2" {
		t.Errorf("Messages().Story(a2) = %+v, %v; want its dead letter", st, err)
	}
	if limit := db.Dialect().MaxKey(); limit > 0 {
		if n := count(t, db, `SELECT COUNT(*) FROM deliveries WHERE file = 'b.json' AND msg_id IS NULL`); n != 1 {
			t.Errorf("a key of 3000 bytes was recorded by an engine that keeps %d", limit)
		}
	} else if n := count(t, db, `SELECT COUNT(*) FROM deliveries WHERE file = 'b.json' AND msg_id IS NOT NULL`); n != 1 {
		t.Errorf("a key of 3000 bytes was not recorded by an engine without a limit")
	}
}
