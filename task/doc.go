// Package task is the one way replays and discards of dead letters are
// done: every one is a durable task in the ledger, asked, approved when
// the queue's approval policy asks for it, run in chunks, resumed after a
// kill and cancelled through the Service, which also writes their audit
// (docs/DESIGN.md, "Tasks"). The command line, the HTTP API and the
// console only translate their input into a Request and the Service's
// answers into their output.
//
// A task is asked with a Request: a kind (Replay or Discard), a
// Selection (names, a reason or all, narrowed by the filters Since, Until,
// DetailMatch, MsgID and OrderNo) and its options (a note, force, a To
// directory, a rate). Every part is checked when it is asked, before
// anything is recorded: a bad one is a *RequestError (ErrBadRequest),
// among them a To the files could not go to (missing, not a directory,
// inside the queue, on another filesystem, open to other users, not
// writable: queue.Dir.OpenTarget) and a reason no dead letter could have.
// The request is then resolved against error/ and the ledger into the
// exact file set it moves, each file with its name, inode and the SHA-256
// of its body, with a count and a digest (Preview, the dry run). Create
// records the task with that set, who asked (an Identity) and why; Do
// does the same and runs it at once, the command line's call.
//
// A task that selects more files than the queue's policy allows for its
// kind waits (StateWaiting) for Service.Approve by another person, with
// the role RoleApprover, who names the digest of the set they were shown
// (Review shows it): an approval approves what was seen. The requester's
// own approval, in any realm, is refused (ErrOwnRequest, SamePerson), so
// is a lower role (ErrForbidden), another digest (ErrDigest) and a set
// that changed since the request (a *StaleError naming each file
// replayed, discarded or fixed meanwhile): nothing is moved blindly.
// Other tasks are approved when created.
//
// A task moves its files in chunks, each a replay intent or discard batch
// (packages replay and discard do the moves: replay.Finish,
// discard.Finish) begun with the task's cursor in one transaction. Without
// a rate the whole set is one chunk, all or nothing, as a plain spool
// replay has always been; at Request.Rate files a second the chunks are a
// tenth of a second's files, and a cancel (Service.Cancel) is taken
// between them, every file then moved and recorded or still in error/
// under its name. A task killed at any instant is finished by the next
// run: the chunk under way by any task's next chunk, a consumer's start
// (FinishReplays) or fsck --repair, the chunks after it by Run from the
// cursor, so each file of the set moves once. Before its chunk, each file
// is checked against the set again: one that changed is left where it is
// and counted as changed.
//
// Every action and every refusal is an audit row (ledger.AuditEntry),
// written by the Service alone: action "replay" or "discard" for a
// request (Do's row spans its run too), "approve", "cancel", "run" for a
// run, and "replay" or "discard" with selection {"resume": [ids]} for the
// finishing of interrupted ones, with the identity's name, its role (none
// on the command line), the selection and counts, the outcome and why.
//
// Roles are RoleViewer < RoleOperator < RoleApprover: a viewer reads, an
// operator also asks and cancels, an approver also approves (another's
// request). On the command line the identity is the OS user with
// RoleApprover (OSUser, "os:alice"; the OS's permissions on the queue are
// the gate there); over HTTP it is a token's name and role ("token:olga"),
// from a token file read by ReadTokenFile (lines NAME ROLE
// SHA256-OF-TOKEN [os=USER], # comments). identity.go says when two
// identities are one person.
//
// The policy is the ledger's (policystore.go): Service.QueuePolicy
// adopts the configuration's approval section once and then refuses one
// that differs, Service.SetPolicy changes it, audited, and a Service
// judges each request by the ledger's policy as it is then.
//
// The caller holds no lock: the Service takes the queue's replay lock
// (queue.Dir.LockReplays) for each resolution and each chunk, so that
// tasks never race each other over error/.
package task
