package main

import (
	"flag"
	"strings"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
)

// configName is the queue's contract file, DIR/spool.conf, which the
// library reads (queueopen.ReadConfig); the flags below override it.
const configName = queueopen.ConfigName

// contractFlags are the flags that override the queue's contract file.
type contractFlags struct {
	fs                      *flag.FlagSet
	key, order, seq, amount string
	require                 string
	maxSize                 cmdline.Size
}

// addContractFlags registers the contract flags on fs.
func addContractFlags(fs *flag.FlagSet) *contractFlags {
	cf := &contractFlags{fs: fs}
	fs.StringVar(&cf.key, "key", "", "idempotency-key `FIELD` (default msg_id)")
	fs.StringVar(&cf.order, "order-key", "", "ordering-key `FIELD` (default order_no)")
	fs.StringVar(&cf.seq, "seq", "", "sequence `FIELD` (default seq)")
	fs.StringVar(&cf.amount, "amount", "", "money `FIELD`, kept exactly as written (default amount)")
	fs.StringVar(&cf.require, "require", "", "comma-separated required `FIELDS` (default: the four role fields; the key is always required)")
	fs.Var(&cf.maxSize, "max-size", "largest message in `BYTES`, or with KiB/MiB/GiB (default 1MiB)")
	return cf
}

// contractFrom returns the contract of the queue at dir: the defaults,
// then DIR/spool.conf if it exists, then the flags that were given (when
// neither the file nor the flags list the required fields, they are the
// four role fields under their final names, so renaming a field does not
// leave the old name required); and what DIR/spool.conf says (nil
// without the file), for telling where each value came from.
func (cf *contractFlags) contractFrom(dir string) (spool.Contract, *queueopen.Config, error) {
	return queueopen.LoadContract(dir, cf.override())
}

// override is what the contract flags given change of spool.conf.
func (cf *contractFlags) override() queueopen.Override {
	var o queueopen.Override
	cf.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "key":
			o.KeyField = &cf.key
		case "order-key":
			o.OrderField = &cf.order
		case "seq":
			o.SeqField = &cf.seq
		case "amount":
			o.AmountField = &cf.amount
		case "require":
			o.Required = splitList(cf.require)
		case "max-size":
			o.MaxSize = &cf.maxSize.N
		}
	})
	return o
}

// splitList splits a comma-separated list, trimming spaces and dropping
// empty items ("" is the empty list).
func splitList(s string) []string {
	out := []string{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
