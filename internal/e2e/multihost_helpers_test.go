//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The multi-host test's world: each host is a network namespace of its own
// (ip netns), joined to the test's namespace by a veth pair, with a
// hostname of its own (unshare --uts), so that its consumers' sessions are
// another host's to the others (queue.Host), whose lock they cannot trust
// and whose lease they judge by the ledger. All hosts share the queue
// directory (one filesystem, as over NFS) and reach the machine's
// PostgreSQL and the downstream HTTP server through their veth: the
// server listens on 127.0.0.1 only, so the test forwards a port of its
// own namespace to it (pgProxy). Taking a host's veth down cuts it off
// from both, as a partition would.

// netHost is one host: its namespace, hostname and addresses.
type netHost struct {
	name    string // hostname, and the HTTP path its calls go to
	ns      string // network namespace
	veth    string // the test namespace's end of the pair
	gateway string // the test namespace's address on the pair, as the host sees it
}

// ipCmd runs ip with args, failing the test on error.
func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newNetHost makes host i: a namespace, a veth pair with a /30 between the
// test's namespace and it, both ends up. It is removed when the test ends.
func newNetHost(t *testing.T, i int) *netHost {
	t.Helper()
	tag := fmt.Sprintf("%d", os.Getpid()%100000)
	h := &netHost{
		name: fmt.Sprintf("host%d", i),
		ns:   "spool-mh-" + tag + "-" + fmt.Sprint(i),
		veth: fmt.Sprintf("smh%sa%d", tag, i),
	}
	peer := fmt.Sprintf("smh%sb%d", tag, i)
	net3 := (os.Getpid()%60)*4 + i // the third octet: one /24 per host and run
	h.gateway = fmt.Sprintf("10.213.%d.1", net3)
	ipCmd(t, "netns", "add", h.ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", h.ns).Run() })
	ipCmd(t, "link", "add", h.veth, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", h.veth).Run() })
	ipCmd(t, "link", "set", peer, "netns", h.ns)
	ipCmd(t, "addr", "add", h.gateway+"/24", "dev", h.veth)
	ipCmd(t, "link", "set", h.veth, "up")
	ipCmd(t, "-n", h.ns, "addr", "add", fmt.Sprintf("10.213.%d.2/24", net3), "dev", peer)
	ipCmd(t, "-n", h.ns, "link", "set", peer, "up")
	ipCmd(t, "-n", h.ns, "link", "set", "lo", "up")
	return h
}

// partition takes the host's link down (true) or up again (false).
func (h *netHost) partition(t *testing.T, cut bool) {
	t.Helper()
	state := "up"
	if cut {
		state = "down"
	}
	ipCmd(t, "link", "set", h.veth, state)
}

// waitReach waits until a TCP connection from the host to addr succeeds,
// failing the test after within. A link just brought up again can still
// answer "no route to host" for a while (its neighbour entries failed
// during the partition): a consumer started then fails to open its
// ledger, which is not what the test is about.
func (h *netHost) waitReach(t *testing.T, addr string, within time.Duration) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	dial := fmt.Sprintf("exec 3<>/dev/tcp/%s/%s", host, port)
	var out []byte
	if !poll(within, 100*time.Millisecond, func() bool {
		out, err = exec.Command("ip", "netns", "exec", h.ns, "timeout", "2", "bash", "-c", dial).CombinedOutput()
		return err == nil
	}) {
		t.Fatalf("%s cannot reach %s within %v of its partition's end: %v\n%s", h.name, addr, within, err, out)
	}
}

// lockedBuffer is a bytes.Buffer safe to read while a process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// hostProc is one spool process running on a host.
type hostProc struct {
	h      *netHost
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
}

// startOn starts spool with args on host h: in its namespace, under its
// hostname. The process is spool itself (ip, unshare and sh each exec the
// next), so signals to it reach spool.
func startOn(t *testing.T, h *netHost, env []string, args ...string) *hostProc {
	t.Helper()
	argv := append([]string{"netns", "exec", h.ns, "unshare", "--uts", "--", "sh", "-c",
		`hostname "$1" && shift && exec "$@"`, "sh", h.name, spoolBin}, args...)
	cmd := exec.Command("ip", argv...)
	cmd.Env = append(os.Environ(), env...)
	p := &hostProc{h: h, cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = io.Discard, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start on %s: %v", h.name, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *hostProc) signal(s syscall.Signal) { _ = p.cmd.Process.Signal(s) }

func (p *hostProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// pgProxy forwards connections to one of the test namespace's ports to
// PostgreSQL's address (which may listen on 127.0.0.1 only), one
// connection to the server per connection accepted.
func pgProxy(t *testing.T, target string) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer s.Close()
				go func() { _, _ = io.Copy(s, c); s.Close() }()
				_, _ = io.Copy(c, s)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// hostCall is one request the downstream saw.
type hostCall struct {
	host       string
	key        string
	start, end time.Time
}

// hostCallServer is the downstream of the multi-host test: it answers every
// POST 200 after a latency, and keeps each request's host (its path), key
// (Idempotency-Key) and when the server began and ended it.
type hostCallServer struct {
	latency time.Duration
	mu      sync.Mutex
	calls   []hostCall
	now     map[string]int // requests in flight per host
}

func newHostCallServer(t *testing.T, latency time.Duration) (*hostCallServer, int) {
	t.Helper()
	s := &hostCallServer{latency: latency, now: map[string]int{}}
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return s, ln.Addr().(*net.TCPAddr).Port
}

func (s *hostCallServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	host := strings.Trim(r.URL.Path, "/")
	c := hostCall{host: host, key: r.Header.Get("Idempotency-Key"), start: time.Now()}
	s.mu.Lock()
	s.now[host]++
	s.mu.Unlock()
	time.Sleep(s.latency) // the downstream's latency, not a synchronisation
	w.WriteHeader(http.StatusOK)
	c.end = time.Now()
	s.mu.Lock()
	s.now[host]--
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

// inFlight is how many requests of host the server is answering now.
func (s *hostCallServer) inFlight(host string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now[host]
}

// waitInFlight waits until host has a request in flight, for at most d.
func (s *hostCallServer) waitInFlight(host string, d time.Duration) bool {
	return poll(d, 2*time.Millisecond, func() bool { return s.inFlight(host) > 0 })
}

func (s *hostCallServer) all() []hostCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hostCall(nil), s.calls...)
}
