// Package task makes replays and discards durable tasks in the ledger,
// under four eyes when the queue's approval policy asks for it
// (docs/DESIGN.md, "Tasks").
//
// A task is asked with a Request: a kind (Replay or Discard), a
// Selection (names, a reason or all, narrowed by the filters Since, Until,
// DetailMatch, MsgID and OrderNo) and its options (a note, force, a --to
// directory, a rate). Service.Create resolves it against error/ and the
// ledger into the exact file set it will move, each file with its name,
// inode and the SHA-256 of its body, and records the task with that set,
// its count and digest, who asked (an Identity) and why. Service.Preview
// is the same resolution as a dry run: the count, nothing recorded.
//
// A task that selects more files than the queue's policy allows for its
// kind waits (StateWaiting) for Service.Approve by another person, with
// the role RoleApprover: the requester's own approval, in any realm, is
// refused (ErrOwnRequest, SamePerson),
// so is a lower role (ErrForbidden) and a set that changed since the
// request (a *StaleError naming each file replayed, discarded or fixed
// meanwhile: an approval approves what was seen, and nothing is moved
// blindly). Other tasks are approved (StateApproved) when created.
//
// Service.Run moves an approved task's files in chunks, at Request.Rate
// files a second if given. Each chunk is a replay intent or discard batch
// of packages replay and discard, begun with the task's cursor in one
// transaction: a task killed at any instant is resumed by the next Run,
// which finishes the chunk under way and goes on from the cursor, so each
// file of the set moves exactly once. Before its chunk, each file is
// checked against the set again: one that changed is left where it is and
// counted as changed. Service.Cancel stops a task: the chunk under way
// finishes, no other begins, and every file is either moved and recorded
// or still in error/ under its name.
//
// Every action and every refusal is an audit row (ledger.AuditEntry) with
// the task's id: action "replay" or "discard" for the request, "approve",
// "cancel", and "run" for a run, with the identity's name, its role (none
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
// (queue.Dir.LockReplays) for each resolution and each chunk, so tasks,
// spool replay and spool discard never race over error/.
package task
