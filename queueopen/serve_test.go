package queueopen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/spoolq/spool/endpoint"
	"github.com/spoolq/spool/queueopen"
)

// TestServe: a queue without a ledger is refused before anything
// listens; an initialised one is served (its /healthz answers) until
// Wait returns.
func TestServe(t *testing.T) {
	ctx := context.Background()
	dir := newQueue(t)
	listen := endpoint.ServeOptions{Addr: "127.0.0.1:0", Refresh: time.Second}
	err := queueopen.Serve(ctx, dir, queueopen.Options{}, queueopen.ServeOptions{Listen: listen, Wait: func() { t.Error("served without a ledger") }})
	if !errors.As(err, new(*queueopen.LedgerError)) {
		t.Errorf("no ledger: %v, want a *LedgerError", err)
	}
	if _, err := queueopen.Init(ctx, dir, queueopen.Options{Use: queueopen.Write}); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	status := 0
	err = queueopen.Serve(ctx, dir, queueopen.Options{}, queueopen.ServeOptions{Listen: listen,
		Logger: slog.New(slog.NewJSONHandler(&log, nil)),
		Wait: func() {
			var rec struct{ Msg, Addr string }
			for _, line := range bytes.Split(log.Bytes(), []byte("\n")) {
				if json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" {
					break
				}
			}
			resp, err := http.Get("http://" + rec.Addr + "/healthz")
			if err != nil {
				t.Errorf("GET /healthz at %q: %v", rec.Addr, err)
				return
			}
			status = resp.StatusCode
			_ = resp.Body.Close()
		}})
	if err != nil || status != http.StatusOK {
		t.Errorf("Serve: %v, /healthz %d; want nil, 200", err, status)
	}
}
