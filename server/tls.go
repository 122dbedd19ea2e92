package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// CertReloader serves a certificate and key pair from files and reloads
// them when either file changes (checked at most once a second, on a
// handshake), so that a renewed certificate takes effect without a restart.
// A pair that does not load is logged and the previous one keeps serving.
type CertReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // mtimes and sizes of both files
	checked time.Time
}

// NewCertReloader loads the pair once (an error if it does not load).
func NewCertReloader(certFile, keyFile string, log *slog.Logger) (*CertReloader, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &CertReloader{certFile: certFile, keyFile: keyFile, log: log}
	stamp, err := c.fileStamp()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: TLS certificate and key: %v", ErrBadConfig, err)
	}
	c.cert, c.stamp, c.checked = &cert, stamp, time.Now()
	return c, nil
}

func (c *CertReloader) fileStamp() (string, error) {
	var out string
	for _, f := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("%w: TLS file: %v", ErrBadConfig, err)
		}
		out += fmt.Sprintf("%d:%d;", fi.ModTime().UnixNano(), fi.Size())
	}
	return out, nil
}

// GetCertificate is the tls.Config hook.
func (c *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) >= time.Second {
		c.checked = time.Now()
		if stamp, err := c.fileStamp(); err == nil && stamp != c.stamp {
			cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
			if err != nil {
				c.log.Error("TLS certificate changed but does not load; keeping the previous one", "err", err)
			} else {
				c.cert, c.stamp = &cert, stamp
				c.log.Info("TLS certificate reloaded")
			}
		}
	}
	return c.cert, nil
}

// TLSConfig is the server TLS configuration: TLS 1.3 unless allow12.
func (c *CertReloader) TLSConfig(allow12 bool) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: c.GetCertificate}
	if allow12 {
		cfg.MinVersion = tls.VersionTLS12
	}
	return cfg
}
