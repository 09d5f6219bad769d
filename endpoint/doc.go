// Package endpoint serves spool's HTTP endpoints (the metrics and health
// of consume --listen and serve, and serve --auth's console) on a network
// that may be hostile: bounded waits for a slow or silent client, a cap
// of connections per client address and in all, under which idle and
// slow clients make room instead of keeping others out, and a TLS
// certificate that is read again when its files change, so that a
// renewal needs no restart.
//
// It holds no handler: package metrics and package console give those.
// Serve wires them for a queue: metrics.Mux with the ledger's readiness,
// and the gauges of the queue, its outbox and its holds kept fresh.
package endpoint
