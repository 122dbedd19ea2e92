package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"
)

// CertReloader serves a certificate and key pair from files and reloads
// them when either file changes (checked at most once a second, on a
// handshake), so that a renewed certificate takes effect without a restart.
// A pair that does not load, or whose certificate is outside its validity
// window, is logged at error level and the previous one keeps serving;
// files that can no longer be read are logged once, and the previous pair
// keeps serving.
type CertReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu         sync.Mutex
	cert       *tls.Certificate
	stamp      string // mtimes and sizes of both files
	checked    time.Time
	unreadable bool // the files could not be read at the last check
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
	if err := checkValidity(&cert, time.Now()); err != nil {
		return nil, fmt.Errorf("%w: TLS certificate %s: %v: every client would refuse it; install a current one", ErrBadConfig, certFile, err)
	}
	c.cert, c.stamp, c.checked = &cert, stamp, time.Now()
	return c, nil
}

// checkValidity says why cert's leaf is not valid at now (expired, or not
// yet valid), nil if it is.
func checkValidity(cert *tls.Certificate, now time.Time) error {
	leaf := cert.Leaf // set by tls.LoadX509KeyPair
	if leaf == nil {
		if len(cert.Certificate) == 0 {
			return fmt.Errorf("no certificate")
		}
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return err
		}
	}
	switch {
	case now.After(leaf.NotAfter):
		return fmt.Errorf("expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
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
		stamp, err := c.fileStamp()
		switch {
		case err != nil:
			if !c.unreadable {
				c.log.Error("TLS certificate or key file unreadable; keeping the previous certificate", "err", err)
			}
			c.unreadable = true
		case stamp != c.stamp:
			c.unreadable = false
			cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
			if err == nil {
				err = checkValidity(&cert, c.checked)
			}
			if err != nil {
				c.log.Error("TLS certificate changed but does not load or is not valid now; keeping the previous one", "err", err)
			} else {
				c.cert, c.stamp = &cert, stamp
				c.log.Info("TLS certificate reloaded")
			}
		default:
			c.unreadable = false
		}
	}
	return c.cert, nil
}

// TLS12Suites are the only TLS 1.2 cipher suites served (with allow12):
// ECDHE key exchange with an AEAD cipher. Go's defaults also enable the
// ECDHE suites with AES-CBC and HMAC-SHA1 (no AEAD, the Lucky13 family of
// padding-oracle attacks), which no TLS 1.2 client of the last decade
// needs. TLS 1.3's suites are not configurable and all AEAD.
var TLS12Suites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// TLSConfig is the server TLS configuration: TLS 1.3 unless allow12, which
// also accepts TLS 1.2 with TLS12Suites only.
func (c *CertReloader) TLSConfig(allow12 bool) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: c.GetCertificate}
	if allow12 {
		cfg.MinVersion = tls.VersionTLS12
		cfg.CipherSuites = slices.Clone(TLS12Suites)
	}
	return cfg
}
