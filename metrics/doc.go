// Package metrics keeps spool's Prometheus metrics and serves them, with
// the health endpoints, for `spool consume --listen` and `spool serve`.
//
// A Metrics is a spool.Observer: a consumer configured with it
// (spool.Config.Observer) counts its deliveries, commits, calls and
// recoveries as they happen. The queue's gauges (messages and oldest age
// per stage) are not computed when Prometheus scrapes: Refresh lists the
// stages in the background, each again no sooner than a hundred times its
// last listing took, and the consumer's own deliveries keep the done/ and
// error/ counts current between listings. A scrape only reads those cached
// values, so it costs the same with a million files in done/ as with none.
//
// Every metric is in the Metrics' own registry (never the global one), so
// that a program embedding spool chooses what it exports. docs/OPERATIONS.md
// lists the metrics and what each means.
package metrics
