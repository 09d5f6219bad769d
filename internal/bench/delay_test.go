package bench

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDelay: bytes through the proxy reach the server and come back in
// order, each round trip at least two delays long, and stop ends the
// connections it forwards.
func TestDelay(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	const delay = 20 * time.Millisecond
	through, stop, err := Delay(t.Context(), "postgres://u@"+l.Addr().String()+"/db?sslmode=disable", delay)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(through)
	if err != nil || u.Host == l.Addr().String() || u.Path != "/db" || u.RawQuery != "sslmode=disable" || u.User.Username() != "u" {
		t.Fatalf("URL through the proxy: %q, %v", through, err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sent bytes.Buffer
	start := time.Now()
	for i := range 200 {
		msg := []byte(strings.Repeat(string(rune('a'+i%26)), 1+i))
		sent.Write(msg)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, sent.Len())
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < 2*delay {
		t.Errorf("round trip of %v through a proxy of %v each way", rtt, delay)
	}
	if !bytes.Equal(got, sent.Bytes()) {
		t.Error("the bytes came back out of order or changed")
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("read %d bytes after stop, want the connection closed", n)
	}
}

// TestDelayStopWhileDialing: stop does not wait for a dial to a server
// that does not answer (one whose queue of connections is full and which
// never accepts), and a connection that waits for such a dial holds up no
// other.
func TestDelayStopWhileDialing(t *testing.T) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	for range 4 { // fill the queue; the dials after the first may time out
		d := net.Dialer{Timeout: 300 * time.Millisecond}
		if c, err := d.Dial("tcp", addr); err == nil {
			defer c.Close()
		}
	}
	through, stop, err := Delay(t.Context(), "postgres://u@"+addr+"/db", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(through)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatalf("a second connection while the first waits for its dial: %v", err)
		}
		defer c.Close()
	}
	time.Sleep(100 * time.Millisecond) // the dials begin
	done := make(chan error, 1)
	go func() { done <- stop() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("stop: %v", err)
		}
	case <-time.After(5 * time.Second): // the dials' own timeout is 10 s
		t.Fatal("stop still waiting for the dials after 5 s")
	}
}

func TestDelayBadURL(t *testing.T) {
	for _, dsn := range []string{"file.db", "postgres://localhost/db", "::"} {
		if _, _, err := Delay(t.Context(), dsn, time.Millisecond); err == nil {
			t.Errorf("Delay(%q): no error", dsn)
		}
	}
}
