package endpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCheckListen: each rule refuses with the flag's words, a host typo
// alone (Alone), and sound options pass without TLS.
func TestCheckListen(t *testing.T) {
	given := func(names ...string) func(string) bool {
		return func(n string) bool {
			for _, g := range names {
				if g == n {
					return true
				}
			}
			return false
		}
	}
	missing := filepath.Join(t.TempDir(), "none.pem")
	for _, c := range []struct {
		o     ListenOptions
		want  string // "" for no error
		alone bool
	}{
		{ListenOptions{}, "", false},
		{ListenOptions{Need: true}, "--listen ADDR is required", false},
		{ListenOptions{Given: given("listen")}, "--listen is empty: want host:port (127.0.0.1:9464 for this host alone, :9464 for every interface)", false},
		{ListenOptions{Given: given("tls-key")}, "--tls-cert and --tls-key need --listen", false},
		{ListenOptions{Addr: "9464", Refresh: time.Second}, `--listen "9464": want host:port`, false},
		{ListenOptions{Addr: ":http", Refresh: time.Second}, `--listen ":http": the port "http" is not a number from 0 to 65535`, false},
		{ListenOptions{Addr: "1.2.3.4.5:1", Refresh: time.Second}, `--listen "1.2.3.4.5:1": "1.2.3.4.5" is not an IP address`, true},
		{ListenOptions{Addr: "127.0.0.1:0"}, "--metrics-refresh 0s: want a duration above 0", false},
		{ListenOptions{Addr: "127.0.0.1:0", Refresh: time.Second}, "", false},
		{ListenOptions{Addr: "127.0.0.1:0", Refresh: time.Second, Given: given("tls-cert")}, "--tls-cert and --tls-key are empty: want the PEM files' paths", false},
		{ListenOptions{Addr: "127.0.0.1:0", Refresh: time.Second, KeyFile: missing}, "--tls-key needs --tls-cert", false},
		{ListenOptions{Addr: "127.0.0.1:0", Refresh: time.Second, CertFile: missing}, "--tls-cert needs --tls-key", false},
		{ListenOptions{Addr: "127.0.0.1:0", Refresh: time.Second, CertFile: missing, KeyFile: missing}, "--tls-cert: ", false},
	} {
		tls, err := CheckListen(context.Background(), c.o)
		var le *ListenError
		switch {
		case c.want == "" && (err != nil || tls != nil):
			t.Errorf("%+v: %v, %v; want nil, nil", c.o, tls, err)
		case c.want != "" && (!errors.As(err, &le) || len(le.Msg) < len(c.want) || le.Msg[:len(c.want)] != c.want || le.Alone != c.alone):
			t.Errorf("%+v: %v (%+v), want a *ListenError starting %q, alone %v", c.o, err, le, c.want, c.alone)
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("CheckListen created a file")
	}
}
