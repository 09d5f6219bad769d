package endpoint

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// CertFiles is a certificate and key in PEM files (--tls-cert, --tls-key). The
// pair is read again when either file's modification time changes, at
// the next handshake, so that a renewed certificate (certbot, a secret
// rotated by the orchestrator) is served without a restart; a pair that
// cannot be read then keeps the one in use, with one warning per change.
type CertFiles struct {
	cert, key string
	log       *slog.Logger

	mu              sync.Mutex
	pair            *tls.Certificate
	certMod, keyMod time.Time
	// failed: a change failed to load, the files' times then.
	failed                      bool
	failedCertMod, failedKeyMod time.Time
}

// LoadCertFiles reads the pair once, as a check of the configuration: a
// wrong path or a key that does not match is an error before anything
// listens.
func LoadCertFiles(cert, key string) (*CertFiles, error) {
	c := &CertFiles{cert: cert, key: key, log: slog.Default()}
	cm, km, err := c.mods()
	if err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate %s and key %s: %w", cert, key, err)
	}
	c.pair, c.certMod, c.keyMod = &pair, cm, km
	return c, nil
}

// mods returns the modification times of the two files.
func (c *CertFiles) mods() (cert, key time.Time, err error) {
	ci, err := os.Stat(c.cert)
	if err != nil {
		return cert, key, fmt.Errorf("TLS certificate: %w", err)
	}
	ki, err := os.Stat(c.key)
	if err != nil {
		return cert, key, fmt.Errorf("TLS key: %w", err)
	}
	return ci.ModTime(), ki.ModTime(), nil
}

// get is tls.Config.GetCertificate: the pair in use, read again first
// when a file changed. A change that cannot be loaded is warned of once
// and not tried again until the files change once more.
func (c *CertFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cm, km, err := c.mods()
	same := func(a, b time.Time) bool { return cm.Equal(a) && km.Equal(b) }
	if err == nil && same(c.certMod, c.keyMod) || c.failed && same(c.failedCertMod, c.failedKeyMod) {
		return c.pair, nil
	}
	var pair tls.Certificate
	if err == nil {
		pair, err = tls.LoadX509KeyPair(c.cert, c.key)
	}
	if err != nil {
		c.failed, c.failedCertMod, c.failedKeyMod = true, cm, km
		c.log.Warn("TLS certificate changed but cannot be loaded (a half-written renewal?); serving the one loaded before", "cert", c.cert, "key", c.key, "err", err)
		return c.pair, nil
	}
	c.pair, c.certMod, c.keyMod = &pair, cm, km
	c.log.Info("TLS certificate reloaded", "cert", c.cert)
	return c.pair, nil
}

// Config is a server's TLS configuration serving c, TLS 1.2 at least;
// reloads are logged to log.
func (c *CertFiles) Config(log *slog.Logger) *tls.Config {
	c.mu.Lock()
	c.log = log
	c.mu.Unlock()
	return &tls.Config{GetCertificate: c.get, MinVersion: tls.VersionTLS12}
}
