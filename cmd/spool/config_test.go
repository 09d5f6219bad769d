package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spoolq/spool"
)

func TestContract(t *testing.T) {
	def := spool.DefaultContract()
	tests := []struct {
		name  string
		conf  string // "" for no file
		flags []string
		want  spool.Contract
	}{
		{name: "defaults", want: def},
		{
			name: "file renames fields; required follows the new names",
			conf: `{"key_field":"id","order_field":"acct"}`,
			want: spool.Contract{KeyField: "id", OrderField: "acct", SeqField: "seq", AmountField: "amount",
				Required: []string{"id", "acct", "seq", "amount"}, MaxSize: def.MaxSize},
		},
		{
			name: "explicit empty required list",
			conf: `{"required":[],"max_size":2048}`,
			want: spool.Contract{KeyField: "msg_id", OrderField: "order_no", SeqField: "seq", AmountField: "amount",
				Required: []string{}, MaxSize: 2048},
		},
		{
			name:  "flags override the file",
			conf:  `{"key_field":"id","required":["id","acct"],"max_size":2048}`,
			flags: []string{"--key", "event_id", "--require", " event_id , amount ", "--max-size", "1KiB"},
			want: spool.Contract{KeyField: "event_id", OrderField: "order_no", SeqField: "seq", AmountField: "amount",
				Required: []string{"event_id", "amount"}, MaxSize: 1024},
		},
		{
			name:  "flags alone; --require empty means only the key",
			flags: []string{"--seq", "n", "--amount", "value", "--order-key", "acct", "--require", ""},
			want: spool.Contract{KeyField: "msg_id", OrderField: "acct", SeqField: "n", AmountField: "value",
				Required: []string{}, MaxSize: def.MaxSize},
		},
		{
			name:  "file's required kept when flags rename",
			conf:  `{"required":["msg_id"]}`,
			flags: []string{"--amount", "value"},
			want: spool.Contract{KeyField: "msg_id", OrderField: "order_no", SeqField: "seq", AmountField: "value",
				Required: []string{"msg_id"}, MaxSize: def.MaxSize},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.conf != "" {
				write(t, filepath.Join(dir, configName), tt.conf)
			}
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			cf := addContractFlags(fs)
			if _, err := parseInterleaved(fs, tt.flags); err != nil {
				t.Fatal(err)
			}
			got, err := cf.contract(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got.KeyField != tt.want.KeyField || got.OrderField != tt.want.OrderField || got.SeqField != tt.want.SeqField ||
				got.AmountField != tt.want.AmountField || got.MaxSize != tt.want.MaxSize || !slices.Equal(got.Required, tt.want.Required) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestKeywordDSNRefused(t *testing.T) {
	for db, want := range map[string]bool{
		"host=127.0.0.1 port=5432 dbname=test": true,
		"dbname=spool":                         true,
		"ledger.db":                            false,
		"/var/lib/spool/host.db":               false,
		"my host=notes.db":                     true,
		"":                                     false,
	} {
		if got := isKeywordDSN(db); got != want {
			t.Errorf("isKeywordDSN(%q) = %v, want %v", db, got, want)
		}
	}
	dir := t.TempDir()
	_, err := openLedgerWith(t.Context(), dir, "host=127.0.0.1 dbname=test", ledgerOpts{use: writeLedger})
	var u *usageError
	if !errors.As(err, &u) {
		t.Fatalf("openLedger with a keyword DSN: %v, want a usage error", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("it left %d files in %s", len(entries), dir)
	}
}
