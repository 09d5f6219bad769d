// Package e2e holds spool's end-to-end tests. They build the real spool
// binary once (TestMain, with -race when the tests themselves run with the
// race detector) and drive it as an operator or a script would: init, schema,
// consume, dups, errors, order-check, lag, replay and enqueue, on queue
// directories the tests generate in temporary directories.
//
// Every test checks the invariants of docs/DESIGN.md from the outside, by
// reading the four stage directories and the SQLite ledger (read-only, with
// database/sql and the modernc driver):
//
//   - TestLabFlow, TestOrderCheckProblems: the lab's 20-file fixture and
//     every command's contract (init, schema, consume, dups, errors,
//     order-check, lag, replay and its all-or-nothing refusals, status).
//   - TestCrashInjection: consumers killed with SIGKILL at random instants
//     and right after their first claims, while late redeliveries arrive;
//     then I1 to I5 and I7 (no message is a duplicate of its own
//     interrupted processing).
//   - TestKilledWhileJoining: consumers killed as their claim directory
//     appears; processing/ must still end empty (I5).
//   - TestConcurrentConsumers, TestCrashWhileConcurrent: I6, several
//     consumer processes on one queue, one of them killed repeatedly.
//   - TestHostileInbox: empty, truncated, nested, huge, non-UTF-8 files,
//     symlinks (never followed: their targets' access times are checked),
//     FIFOs, directories, odd names, and non-messages left untouched.
//   - TestRedeliveryAfterRestart: the other half of I7, a later redelivery
//     of the same name and content is a duplicate; enqueue's refusals.
//   - TestWatchShutdown: consume --watch, and SIGTERM finishing in-flight
//     work. TestWatchPickup: arrivals consumed with notifications and with
//     --poll; TestWatchOverflow: 50 000 files written while the watcher is
//     stopped overflow inotify's queue, and none is lost;
//     TestWatchRecoversDeadConsumer: a consumer SIGKILLed while a watcher
//     runs has its claims recovered by it; TestWatchMinAge: a file written
//     in place is left alone until it settles, then consumed whole;
//     TestWatchNoNotifications: with its user's inotify instances all
//     taken (by the test binary as a helper), a watcher polls instead.
//   - TestCrossDeviceRefused: stages on two filesystems are refused.
//   - TestStrictConfig: a spool.conf with a key in another case, a
//     repeated key, "" or null for a value, or a wrong type is refused
//     with exit 2 before the queue or the ledger is touched.
//   - TestFailedDrainSummary: a drain that fails after committing (done/
//     made immutable) prints what it committed.
//   - TestUnreadableMessage, TestReadOnlyLedger,
//     TestRecoveredDeadLetterNotified: run spool as the user nobody (root
//     ignores file modes): a mode-000 message is a dead letter of its own
//     reason, unreadable; a read-only ledger or sidecar is refused naming
//     the file, and a stale read-only -shm is repaired; a dead letter
//     recorded but not moved (error/ read-only) is reported when recovery
//     moves it.
//   - TestShutdownGraceful, TestShutdownSecondSignal, TestShutdownTimeout,
//     TestShutdownHungLedger, TestShutdownSDNotify: SIGTERM and SIGINT,
//     the shutdown timeout and the grace after it (a commit blocked behind
//     a PostgreSQL table lock), sd_notify.
//   - TestDiskFull: a full disk mid-drain loses nothing.
//   - TestExec*, TestSQLHandler*, TestPostHandler, TestBackoff*,
//     TestRestartDuringBackoff, TestOnDeadLetter*: business handlers,
//     retries with backoff, and the dead-letter notifier.
//   - TestLostLedgerRefused, TestRelativeDBFromAnotherDirectory,
//     TestTwoQueuesOneLedger, TestReportsNeverCreateALedger,
//     TestNewLedgerOnPurpose, TestLegacyQueueAdopted, TestCorruptQueueID,
//     TestLedgerRestoredFromBeforeFirstConsume, TestPostgresQueueSchemas:
//     a ledger belongs to its queue; refusals change nothing.
//   - TestFsck*: every kind of damage fsck names, inflicted on purpose,
//     reported, repaired, and clean on the next run.
//   - TestReplayCrash, TestReplayResumeOnABusyQueue,
//     TestReplayRefusalsRecordNothing: spool replay --all killed at random
//     instants, finished by the next run, all or nothing.
//   - TestStaleTempFiles: a killed writer's temp file is counted and
//     removed; one still held is kept.
//   - TestLagMaxAgeAndJSON, TestStatusJSON: lag --max-age and --json,
//     status --json, their field names and numbers.
//   - TestLogLevels, TestLogRecoveryAndJSONWarnings: consume's slog
//     records at each level and format; TestProgressBarNotOnAPipe,
//     TestProgressBarOnATerminal: the bar on a pseudo-terminal only.
//   - TestCronJobs, TestSystemdUnit: the operations kit in examples/ops,
//     the cron jobs run on healthy and broken queues, the unit verified.
//   - TestAlertRules, TestAlertRulesPromtool, TestDashboard,
//     TestDashboardPromtool: its Prometheus alert rules and Grafana
//     dashboard name only the metrics spool serves (spoolMetrics), link
//     their runbook sections, and pass promtool's checks and unit tests
//     (skipped without promtool, a failure in CI).
//
// Failures print the random seed; SPOOL_E2E_SEED=N replays it. With -short
// the queues are smaller. The tests need Linux (flock, mkfifo, /dev/shm for
// the cross-device case, which is skipped without it).
//
// The package has no API; this file exists so that it is a package.
package e2e
