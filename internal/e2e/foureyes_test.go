package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

func init() {
	// spool takes the person who ran sudo for who runs it as root
	// (cmd/spool/operator.go): these tests run it as root, and say in each
	// case whether through sudo.
	os.Unsetenv("SUDO_USER")
	os.Unsetenv("SUDO_UID")
}

// strictPolicy makes every replay and discard wait for another person.
const strictPolicy = `{"approval": {"replay_over": 0, "discard_over": 0}}`

// nameless prepares to run spool as a uid that has no passwd entry, as in
// a container; it skips where this process is not root (fails on CI).
func nameless(t *testing.T) *osUserAs {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root, to run spool as a uid without a passwd entry")
	}
	for uid := 4242; uid < 5242; uid++ {
		if _, err := user.LookupId(strconv.Itoa(uid)); err != nil {
			return prepareAs(t, "uid:"+strconv.Itoa(uid), uint32(uid), uint32(uid))
		}
	}
	t.Fatal("no free uid between 4242 and 5242")
	return nil
}

// fourEyesQueue makes a queue in as's directory with n dead letters
// (p0.json...), conf as its spool.conf ("" for none), owned by as.
func fourEyesQueue(t *testing.T, as *osUserAs, conf string, n int) string {
	t.Helper()
	q := filepath.Join(as.dir, fmt.Sprintf("q%d", time.Now().UnixNano()))
	mustRun(t, 0, "init", q)
	for i := range n {
		putMessage(t, q, fmt.Sprintf("p%d.json", i), "not json")
	}
	requireStats(t, "poison", mustRun(t, 0, "consume", q), consumeStats{DeadLetters: n})
	if conf != "" {
		writeFile(t, q, "spool.conf", conf)
	}
	as.chown(t, q)
	return q
}

// auditLines are the audit rows after the first skip, each as
// "actor action task outcome detail".
func auditLines(t *testing.T, q string, skip int) []string {
	t.Helper()
	var out []string
	for _, r := range taskAuditRows(t, q)[skip:] {
		task := "-"
		if r.Task != nil {
			task = strconv.FormatInt(*r.Task, 10)
		}
		out = append(out, fmt.Sprintf("%s %s %s %s %s", r.Actor, r.Action, task, r.Outcome, r.Detail))
	}
	return out
}

// requireAuditLines fails unless the audit rows after the first skip are want.
func requireAuditLines(t *testing.T, q string, skip int, want ...string) {
	t.Helper()
	if got := auditLines(t, q, skip); !slices.Equal(got, want) {
		t.Fatalf("audit rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestFourEyesNotFromEnvironment: on the command line the operator is
// the passwd name of the real uid, never $USER. A uid without a passwd
// entry claiming USER=alice may neither ask (exit 2, audited as uid:N)
// nor, claiming USER=bob, approve root's request; a user with a passwd
// entry and USER=root is recorded by the passwd name and may not approve
// their own request; without a policy the nameless uid is recorded as
// uid:N.
func TestFourEyesNotFromEnvironment(t *testing.T) {
	t.Parallel()
	ghost := nameless(t)
	q := fourEyesQueue(t, ghost, strictPolicy, 3)
	noName := fmt.Sprintf("uid %d has no user name (no passwd entry): under the approval policy", ghost.uid)
	refusal := fmt.Sprintf("uid %d has no user name (no passwd entry): under the approval policy the operator must be a named OS user, and $USER proves nothing. Try: run spool as a user with a passwd entry (useradd, or the host's /etc/passwd in the container)", ghost.uid)

	r := ghost.with("USER=alice", "LOGNAME=alice").run(t, "replay", q, "--all", "--note", "as alice")
	if r.code != 2 || !strings.Contains(r.stderr, noName) || countNames(t, q, errorStage) != 3 {
		t.Fatalf("a nameless uid claiming USER=alice asks: want exit 2 naming the uid, nothing moved\n%s", r)
	}
	if ts := tasksOf(t, q); len(ts) != 0 {
		t.Fatalf("tasks after the refusal: %+v, want none", ts)
	}
	r = spoolAt{bin: spoolBin, env: []string{"USER=alice"}}.run(t, "replay", q, "--all", "--note", "root asks")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "task 1: replay of 3 files waits for approval") {
		t.Fatalf("root asks:\n%s", r)
	}
	ghost.chown(t, q)
	r = ghost.with("USER=bob").run(t, "approve", q, "1")
	if r.code != 2 || !strings.Contains(r.stderr, noName) {
		t.Fatalf("a nameless uid claiming USER=bob approves: want exit 2 naming the uid\n%s", r)
	}
	r = ghost.run(t, "policy", "set", q, "replay_over=1000")
	if r.code != 2 || !strings.Contains(r.stderr, fmt.Sprintf("uid %d has no user name", ghost.uid)) {
		t.Fatalf("a nameless uid sets the policy: want exit 2\n%s", r)
	}
	if ts := tasksOf(t, q); len(ts) != 1 || ts[0].State != "waiting" || ts[0].By != "os:root" || ts[0].ByOS != "root" || ts[0].ApprovedBy != "" {
		t.Fatalf("task after the refusals: %+v, want waiting, asked by os:root (not alice)", ts)
	}
	id := "uid:" + strconv.Itoa(int(ghost.uid))
	var sel map[string]any
	rows := taskAuditRows(t, q)
	if err := json.Unmarshal(rows[2].Selection, &sel); err != nil || sel["env_user"] != "alice" {
		t.Errorf("the refusal's selection %s: want what USER claimed beside it", rows[2].Selection)
	}
	requireAuditLines(t, q, 1, // after the bind
		id+" policy - ok adopted the approval section of "+filepath.Join(q, "spool.conf")+": replay_over=0 discard_over=0",
		id+" replay - refused "+refusal,
		"os:root replay 1 ok task 1 waits for approval: 3 files, over replay_over 0",
		id+" approve - refused "+refusal,
		id+" policy - refused "+refusal,
	)

	// A passwd name wins over USER.
	as := secondUser(t)
	q2 := fourEyesQueue(t, as, strictPolicy, 2)
	if r := as.with("USER=root").run(t, "replay", q2, "--all"); r.code != 0 || !strings.HasPrefix(r.stdout, "task 1: replay of 2 files waits") {
		t.Fatalf("%s asks with USER=root:\n%s", asker, r)
	}
	if ts := tasksOf(t, q2); len(ts) != 1 || ts[0].By != "os:"+asker {
		t.Fatalf("task: %+v, want asked by os:%s", ts, asker)
	}
	as.chown(t, q2)
	if r := as.with("USER=root").run(t, "approve", q2, "1"); r.code != 1 || !strings.Contains(r.stderr, "task 1 was asked by os:"+asker+": a request needs someone else's approval") {
		t.Fatalf("%s approves their own request with USER=root: want exit 1\n%s", asker, r)
	}

	// Without a policy the nameless uid acts, recorded as uid:N.
	q3 := fourEyesQueue(t, ghost, "", 1)
	if r := ghost.with("USER=alice").run(t, "replay", q3, "--all"); r.code != 0 || r.stdout != "replayed p0.json -> inbox/p0.json\n" {
		t.Fatalf("a nameless uid replays without a policy:\n%s", r)
	}
	if rows := auditLines(t, q3, 0); len(rows) != 2 || !strings.HasPrefix(rows[1], id+" replay 1 ok") {
		t.Fatalf("audit without a policy:\n%s\nwant the replay by %s", strings.Join(rows, "\n"), id)
	}
}

// TestFourEyesSudo: as root through sudo (SUDO_USER and SUDO_UID, whose
// passwd name is SUDO_USER) the person is the sudo user: they may not
// approve their own request through sudo, nor, having asked through sudo,
// approve it as themselves; SUDO_USER with a SUDO_UID of another user is
// not believed (root). With sudo installed, the same through sudo itself.
func TestFourEyesSudo(t *testing.T) {
	t.Parallel()
	as := secondUser(t)
	viaSudo := spoolAt{bin: spoolBin, env: []string{"SUDO_USER=" + as.name, "SUDO_UID=" + strconv.Itoa(int(as.uid)), "SUDO_GID=" + strconv.Itoa(int(as.gid)), "USER=root"}}
	q := fourEyesQueue(t, as, strictPolicy, 2)

	if r := as.run(t, "replay", q, "--all"); r.code != 0 || !strings.HasPrefix(r.stdout, "task 1: replay of 2 files waits") {
		t.Fatalf("%s asks:\n%s", as.name, r)
	}
	own := "a request needs someone else's approval"
	if r := viaSudo.run(t, "approve", q, "1"); r.code != 1 || !strings.Contains(r.stderr, "task 1 was asked by os:"+as.name+": "+own) {
		t.Fatalf("%s approves their own request through sudo: want exit 1\n%s", as.name, r)
	}
	mustRun(t, 0, "cancel", q, "1")
	if r := viaSudo.run(t, "replay", q, "--all"); r.code != 0 || !strings.HasPrefix(r.stdout, "task 2: replay of 2 files waits") {
		t.Fatalf("%s asks through sudo:\n%s", as.name, r)
	}
	if ts := tasksOf(t, q); ts[0].By != "os:"+as.name || ts[0].ByOS != as.name {
		t.Fatalf("a request through sudo: %+v, want asked by os:%s", ts[0], as.name)
	}
	as.chown(t, q)
	if r := as.run(t, "approve", q, "2"); r.code != 1 || !strings.Contains(r.stderr, own) {
		t.Fatalf("%s approves, as themselves, what they asked through sudo: want exit 1\n%s", as.name, r)
	}
	if realSudo, err := exec.LookPath("sudo"); err == nil {
		// Checked by visudo before it goes in: a drop-in sudo cannot parse
		// would stop sudo for everyone on the machine.
		rule := filepath.Join(t.TempDir(), "rule")
		if err := os.WriteFile(rule, []byte(as.name+" ALL=(root) NOPASSWD: "+as.bin+"\n"), 0o440); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("visudo", "-cf", rule).CombinedOutput(); err != nil {
			t.Fatalf("visudo -cf %s: %v: %s", rule, err, out)
		}
		sudoers := filepath.Join("/etc/sudoers.d", fmt.Sprintf("spool-e2e-%d", os.Getpid()))
		if err := copyFile(rule, sudoers, 0o440); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(sudoers) })
		through := *as
		through.via = []string{realSudo, "-n"}
		r := through.run(t, "approve", q, "2")
		if r.code != 1 || !strings.Contains(r.stderr, "task 2 was asked by os:"+as.name+": "+own) {
			t.Fatalf("%s approves their own request through sudo itself: want exit 1\n%s", as.name, r)
		}
	} else {
		t.Log("sudo is not installed: only SUDO_USER and SUDO_UID as sudo sets them are checked")
	}
	// SUDO_UID 0 is root's, not SUDO_USER's: the variables are not believed.
	forged := spoolAt{bin: spoolBin, env: []string{"SUDO_USER=" + as.name, "SUDO_UID=0"}}
	if r := forged.run(t, "approve", q, "2", "--yes"); r.code != 0 || !strings.Contains(r.stdout, "\ntask 2 approved: replay of 2 files asked by os:"+as.name+"\n") {
		t.Fatalf("root with a SUDO_UID that is not SUDO_USER's approves: want root's approval\n%s", r)
	}
	if ts := tasksOf(t, q); ts[0].State != "done" || ts[0].ApprovedBy != "os:root" {
		t.Fatalf("task 2 after root's approval: %+v", ts[0])
	}
}

// TestFourEyesAcrossRealms: a token and an OS user are one person when
// the token's name is the OS user's in any case, or its line says
// os=USER: the token Root may not approve OS user root's request, the
// token whose line says os=ASKER may not approve ASKER's, and ASKER may
// not approve what that token asked. Another person's approval is taken.
// serve judges the console's requests by the ledger's policy, as it is
// when they come (spool policy set while it runs), with no spool.conf.
func TestFourEyesAcrossRealms(t *testing.T) {
	t.Parallel()
	as := secondUser(t)
	q := fourEyesQueue(t, as, "", 6)
	mustRun(t, 0, "policy", "set", q, "replay_over=0")
	if r := mustRun(t, 0, "replay", q, "p0.json", "p1.json"); !strings.HasPrefix(r.stdout, "task 1: replay of 2 files waits") {
		t.Fatalf("root asks:\n%s", r)
	}
	as.chown(t, q)
	if r := as.run(t, "replay", q, "p2.json", "p3.json"); r.code != 0 || !strings.HasPrefix(r.stdout, "task 2: replay of 2 files waits") {
		t.Fatalf("%s asks:\n%s", as.name, r)
	}
	dir := t.TempDir()
	tokens := tokenFile(t, dir, "tokens", tokenLine("Root", "approver", "root-token")+
		fmt.Sprintf("ops approver %s os=%s\n", sha256Hex("ops-token"), as.name)+
		fmt.Sprintf("deploy operator %s os=%s\n", sha256Hex("deploy-token"), as.name)+
		tokenLine("ada", "approver", "ada-token"))
	_, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--auth", tokens, "--metrics-refresh", "200ms")

	if code, body := apiCall(t, base, "root-token", "POST", "/api/v1/tasks/1/approve", ""); code != 403 || !strings.Contains(body, "task 1 was asked by os:root") {
		t.Fatalf("token Root approves OS user root's request: %d %s, want 403", code, body)
	}
	if code, body := apiCall(t, base, "ops-token", "POST", "/api/v1/tasks/2/approve", ""); code != 403 || !strings.Contains(body, "task 2 was asked by os:"+as.name) {
		t.Fatalf("token ops (os=%s) approves %s's request: %d %s, want 403", as.name, as.name, code, body)
	}
	code, body := apiCall(t, base, "deploy-token", "POST", "/api/v1/replays", `{"names": ["p4.json", "p5.json"], "note": "deploy"}`)
	if id, state := taskOf(t, body); code != 201 || id != 3 || state != "waiting" {
		t.Fatalf("token deploy asks: %d %s, want task 3 waiting under the ledger's policy", code, body)
	}
	as.chown(t, q)
	if r := as.run(t, "approve", q, "3"); r.code != 1 || !strings.Contains(r.stderr, "task 3 was asked by token:deploy: a request needs someone else's approval") {
		t.Fatalf("%s approves what token deploy (os=%s) asked: want exit 1\n%s", as.name, as.name, r)
	}
	if code, body := apiCall(t, base, "ada-token", "POST", "/api/v1/tasks/1/approve", `{"digest": "`+tasksOf(t, q)[len(tasksOf(t, q))-1].Digest+`"}`); code != 200 {
		t.Fatalf("ada approves root's request: %d %s", code, body)
	}
	// A policy set while serve runs applies to its next request.
	mustRun(t, 0, "policy", "set", q, "discard_over=0")
	code, body = apiCall(t, base, "deploy-token", "POST", "/api/v1/discards", `{"names": ["p4.json"], "note": "gone"}`)
	if _, state := taskOf(t, body); code != 201 || state != "waiting" {
		t.Fatalf("a discard after discard_over=0 was set: %d %s, want waiting", code, body)
	}
	var refused []string
	for _, r := range taskAuditRows(t, q) {
		if r.Action == "approve" && r.Outcome == "refused" {
			refused = append(refused, r.Actor+" "+r.Role+" "+r.Via)
		}
	}
	if want := []string{"token:Root approver http", "token:ops approver http", "os:" + as.name + "  cli"}; !slices.Equal(refused, want) {
		t.Fatalf("refused approvals in the audit: %q, want %q", refused, want)
	}
}

// TestTokenAdd: spool token add prints a new token, alone, once, and
// appends its hash to a file it creates 0600, with which serve --auth
// then lets its holder in; a name already there is refused; a token file
// every user may read, one that begins with a byte order mark and a FIFO
// are refused by serve (exit 2, one line naming the file), the FIFO at
// once, not waited on.
func TestTokenAdd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q := filepath.Join(dir, "q")
	mustRun(t, 0, "init", q)
	path := filepath.Join(dir, "tokens")
	r := mustRun(t, 0, "token", "add", path, "olga", "operator")
	token := strings.TrimSuffix(r.stdout, "\n")
	if r.stderr != "" || strings.ContainsAny(token, " \n") || len(token) < 40 {
		t.Fatalf("token add printed %q and %q, want the token alone on stdout", r.stdout, r.stderr)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, %v; want mode 0600", fi, err)
	}
	if r := run(t, "token", "add", path, "OLGA", "viewer"); r.code != 2 || !strings.Contains(r.stderr, `name "olga" is on line 1 already`) {
		t.Fatalf("a name already there: want exit 2\n%s", r)
	}
	r = mustRun(t, 0, "token", "add", path, "ada", "approver", "--os", "ada.k")
	text, _ := os.ReadFile(path)
	if ls := lines(string(text)); len(ls) != 2 || !strings.HasPrefix(ls[0], "olga operator "+sha256Hex(token)) || !strings.HasSuffix(ls[1], " os=ada.k") {
		t.Fatalf("token file:\n%s", text)
	}
	_, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--auth", path)
	if code, body := apiCall(t, base, token, "GET", "/api/v1/session", ""); code != 200 || !strings.Contains(body, `"name": "token:olga"`) {
		t.Fatalf("the printed token's session: %d %s", code, body)
	}
	if code, _ := apiCall(t, base, strings.TrimSpace(r.stdout), "GET", "/api/v1/session", ""); code != 200 {
		t.Fatalf("ada's token: %d", code)
	}

	refuses := func(what, file, want string) {
		t.Helper()
		r := runWithin(t, 20*time.Second, "serve", q, "--listen", "127.0.0.1:0", "--auth", file)
		if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "token file "+file+": ") || !strings.Contains(r.stderr, want) {
			t.Errorf("serve --auth with %s: want exit 2 and one line naming the file and %q\n%s", what, want, r)
		}
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	refuses("a file every user may read", path, "mode 0644 lets every user read it. Try: chmod 600 "+path)
	if r := run(t, "token", "add", path, "vic", "viewer"); r.code != 2 || !strings.Contains(r.stderr, "chmod 600 "+path) {
		t.Errorf("token add to a 0644 file: want exit 2\n%s", r)
	}
	bom := tokenFile(t, dir, "bom", "\uFEFF"+tokenLine("olga", "operator", "x"))
	refuses("a byte order mark", bom, "line 1: a UTF-8 byte order mark")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	refuses("a FIFO", fifo, "a FIFO, not a regular file")
	if r := runWithin(t, 20*time.Second, "token", "add", fifo, "vic", "viewer"); r.code != 2 || !strings.Contains(r.stderr, "a FIFO, not a regular file") {
		t.Errorf("token add to a FIFO: want exit 2\n%s", r)
	}
}

// TestPolicyInLedger: the ledger adopts spool.conf's approval section the
// first time a replay sees it (audited); spool.conf moved aside, a replay
// of everything still waits for approval; a section that says otherwise
// is exit 2 naming both, and spool policy show exits 1 saying so; spool
// policy set changes the ledger's policy with the old and new values in
// the audit.
func TestPolicyInLedger(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	for i := range 3 {
		putMessage(t, q, fmt.Sprintf("p%d.json", i), "not json")
	}
	requireStats(t, "poison", mustRun(t, 0, "consume", q), consumeStats{DeadLetters: 3})
	conf := filepath.Join(q, "spool.conf")
	writeFile(t, q, "spool.conf", `{"approval": {"replay_over": 1}}`)
	if r := mustRun(t, 0, "policy", "show", q); !strings.HasPrefix(r.stdout, "replay_over=1 discard_over=none\nnot in the ledger yet") {
		t.Fatalf("policy show before any replay:\n%s", r)
	}
	mustRun(t, 0, "replay", q, "p0.json", "--note", "one file")
	if err := os.Rename(conf, conf+".aside"); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, 0, "replay", q, "--all", "--note", "while spool.conf is away")
	if !strings.HasPrefix(r.stdout, "task 2: replay of 2 files waits for approval") || countNames(t, q, errorStage) != 2 {
		t.Fatalf("replay --all with spool.conf moved aside: want it to wait for approval\n%s", r)
	}
	if r := mustRun(t, 0, "policy", "show", q); !strings.HasPrefix(r.stdout, "replay_over=1 discard_over=none\nset by os:root at ") || !strings.HasSuffix(r.stdout, " (adopted from spool.conf)\n") {
		t.Fatalf("policy show:\n%s", r)
	}
	writeFile(t, q, "spool.conf", `{"approval": {"replay_over": 100}}`)
	r = run(t, "replay", q, "--all")
	if r.code != 2 || !strings.Contains(r.stderr, "the approval section of "+conf+" (replay_over=100 discard_over=none) differs from the approval policy of the ledger (replay_over=1 discard_over=none, set by os:root at ") {
		t.Fatalf("a section that says otherwise: want exit 2 naming both\n%s", r)
	}
	if r := run(t, "policy", "show", q); r.code != 1 || !strings.Contains(r.stderr, "differs from the ledger's policy") {
		t.Fatalf("policy show with a differing section: want exit 1\n%s", r)
	}
	if err := os.Remove(conf); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "policy", "set", q, "replay_over=-1"); r.code != 2 || !strings.Contains(r.stderr, "bad request: replay_over=-1: want a whole number of files >= 0, or none") {
		t.Fatalf("policy set replay_over=-1: want exit 2\n%s", r)
	}
	before := len(taskAuditRows(t, q))
	r = mustRun(t, 0, "policy", "set", q, "replay_over=5", "discard_over=0")
	if r.stdout != "approval policy: replay_over=1 discard_over=none -> replay_over=5 discard_over=0\n" {
		t.Fatalf("policy set printed %q", r.stdout)
	}
	rows := taskAuditRows(t, q)[before:]
	var sel bytes.Buffer
	if len(rows) == 1 {
		_ = json.Compact(&sel, rows[0].Selection)
	}
	if len(rows) != 1 || rows[0].Actor != "os:root" || rows[0].Action != "policy" || rows[0].Outcome != "ok" ||
		sel.String() != `{"new":{"discard_over":0,"replay_over":5},"old":{"discard_over":null,"replay_over":1}}` ||
		rows[0].Detail != "approval policy replay_over=1 discard_over=none -> replay_over=5 discard_over=0" {
		t.Fatalf("the audit of policy set: %+v", rows)
	}
	var js struct {
		Policy struct {
			ReplayOver, DiscardOver *int
		} `json:"policy"`
		SetBy   string `json:"set_by"`
		Source  string
		Matches bool `json:"config_matches"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "policy", "show", q, "--json").stdout), &js); err != nil || js.SetBy != "os:root" || js.Source != "set" || !js.Matches {
		t.Fatalf("policy show --json: %+v, %v", js, err)
	}
	if r := mustRun(t, 0, "replay", q, "--all", "--dry-run"); strings.Contains(r.stdout, "needs approval") {
		t.Fatalf("a dry run of 2 files under replay_over=5:\n%s", r)
	}
	if r := mustRun(t, 0, "discard", q, "p1.json", "--note", "x", "--dry-run"); !strings.Contains(r.stdout, ", needs approval") {
		t.Fatalf("a dry discard under discard_over=0:\n%s", r)
	}
}
