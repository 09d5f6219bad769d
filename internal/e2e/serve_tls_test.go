//go:build linux

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 named cn, and its key,
// as PEM files under dir, and returns their paths and the certificate.
func selfSigned(t *testing.T, dir, cn string) (certPath, keyPath string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	// Written under temporary names and renamed in, as a renewal would.
	for path, block := range map[string]*pem.Block{certPath: {Type: "CERTIFICATE", Bytes: der}, keyPath: {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(path+".tmp", pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	return certPath, keyPath, cert
}

// TestServeTLS: serve --auth with --tls-cert and --tls-key serves the
// endpoints and the console over HTTPS only; the session cookie of a
// login is Secure there; a renewed certificate is served at the next
// handshake without a restart; the flags' mistakes are usage errors of
// one line.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q := filepath.Join(dir, "q")
	mustRun(t, 0, "init", q)
	tokens := tokenFile(t, dir, "tokens", tokenLine("olga", "viewer", "olga-token"))
	certPath, keyPath, first := selfSigned(t, dir, "first")

	for _, args := range [][]string{
		{"serve", q, "--listen", "127.0.0.1:0", "--tls-cert", certPath},
		{"serve", q, "--listen", "127.0.0.1:0", "--tls-key", keyPath},
		{"serve", q, "--listen", "127.0.0.1:0", "--tls-cert", keyPath, "--tls-key", certPath},
		{"serve", q, "--listen", "127.0.0.1:0", "--tls-cert", filepath.Join(dir, "missing.pem"), "--tls-key", keyPath},
		{"consume", q, "--tls-cert", certPath, "--tls-key", keyPath},
	} {
		r := run(t, args...)
		if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "tls") {
			t.Errorf("spool %q: exit %d, stderr %q; want 2 and one line about the TLS flags", args, r.code, r.stderr)
		}
	}

	f := &addrFinder{addr: make(chan string, 1)}
	p := spoolAt{bin: spoolBin, tee: f}.start(t, "serve", q, "--listen", "127.0.0.1:0", "--auth", tokens, "--tls-cert", certPath, "--tls-key", keyPath)
	var addr string
	select {
	case addr = <-f.addr:
	case <-p.done:
		t.Fatalf("serve exited before listening\n%s", p.result())
	case <-time.After(cmdTimeout):
		t.Fatal("serve logged no \"listening\" record")
	}
	base := "https://" + addr
	// The client trusts exactly the certificate it expects next, so that
	// a handshake shows which one the server presented.
	client := func(want *x509.Certificate) *http.Client {
		pool := x509.NewCertPool()
		pool.AddCert(want)
		return &http.Client{
			Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Timeout:       30 * time.Second,
		}
	}
	c := client(first)
	// The queue's gauges come with the first background listing, which
	// may follow the "listening" record (CI once scraped before it).
	var code int
	var body []byte
	if !poll(cmdTimeout, 50*time.Millisecond, func() bool {
		resp, err := c.Get(base + "/metrics")
		if err != nil {
			t.Fatalf("GET /metrics over HTTPS: %v", err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		code = resp.StatusCode
		return code == 200 && strings.Contains(string(body), "spool_queue_messages")
	}) {
		t.Errorf("GET /metrics over HTTPS: %d, want 200 and the metrics\n%s", code, body)
	}
	resp, err := c.PostForm(base+"/login", url.Values{"token": {"olga-token"}})
	if err != nil {
		t.Fatalf("POST /login over HTTPS: %v", err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cookies) != 1 || !cookies[0].Secure || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Errorf("login over HTTPS: %d with cookies %+v, want 303 and one Secure, HttpOnly, SameSite=Strict cookie", resp.StatusCode, cookies)
	}
	// Plain HTTP on the TLS port is answered with an error, never served.
	if code, body := get(t, "http://"+addr, "/metrics"); code != http.StatusBadRequest || strings.Contains(body, "spool_queue_messages") {
		t.Errorf("plain HTTP to the TLS port: %d %q, want 400 and no metrics", code, body)
	}

	// A renewal: new files renamed over the old ones. The next handshake
	// presents the new certificate; a client that trusts only the old one
	// now fails.
	time.Sleep(10 * time.Millisecond) // a modification time the old files do not have
	_, _, second := selfSigned(t, dir, "second")
	resp, err = client(second).Get(base + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz after the renewal, trusting the new certificate: %v\n%s", err, f.String())
	}
	resp.Body.Close()
	if _, err := client(first).Get(base + "/healthz"); err == nil {
		t.Error("after the renewal the server still presents the old certificate")
	}
	if !strings.Contains(f.String(), "TLS certificate reloaded") {
		t.Errorf("serve does not log the reload\n%s", f.String())
	}
	// A renewal caught half-written: the pair in use stays, one warning
	// for any number of handshakes.
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(certPath, []byte("-----BEGIN CERT"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		resp, err = client(second).Get(base + "/healthz")
		if err != nil {
			t.Fatalf("GET /healthz with the certificate file half-written: %v", err)
		}
		resp.Body.Close()
	}
	if n := strings.Count(f.String(), "cannot be loaded"); n != 1 {
		t.Errorf("%d warnings of the unreadable renewal, want 1\n%s", n, f.String())
	}
}
