// Package console is spool serve's HTTP API under /api/v1 and its web
// console at /, for the identities of a token file (LoadTokens): a viewer
// reads the queue's overview (with its last hour and day as charts,
// sampled in memory: series.go, chart.go), dead letters, groups, messages,
// tasks and audit; an operator also asks for replays and discards and cancels
// tasks; an approver also approves the requests of others. A request
// carries its token as "Authorization: Bearer TOKEN", or the session
// cookie that POST /login sets; a state change from a cookie session
// also carries the page's CSRF token (header X-CSRF-Token). No token is
// 401, a role too low 403, and every action and every refusal of one is a
// row of the ledger's audit (via http, the token's name and role).
//
// The console's assets are embedded in the binary and load nothing from
// another origin (Content-Security-Policy default-src 'self'); what comes
// from a message (names, bodies, details) is set as text, never as HTML.
package console
