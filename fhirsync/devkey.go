package fhirsync

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/custos-mcp/custos/internal/owner"
)

// DevKey loads the local ECDSA P-384 client key at path (PKCS #8 PEM),
// creating it (mode 0600) if missing; a key that could not be written
// whole (a full disk) is removed again. It is the --dev stand-in for the
// Vault Transit key: the private key is on disk, so it is for demos and
// tests only. kid is "dev:" + the key's RFC 7638 thumbprint.
func DevKey(path string) (key crypto.Signer, kid string, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		k, gerr := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
		if gerr != nil {
			return nil, "", gerr
		}
		der, merr := x509.MarshalPKCS8PrivateKey(k)
		if merr != nil {
			return nil, "", merr
		}
		b = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		f, oerr := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if oerr != nil {
			return nil, "", oerr
		}
		// Run as root ('custos sync --dev' on a stopped server's data
		// directory), the key is the directory owner's, as sync-<id>.json
		// is: root's with mode 0600, serve's scheduled sync, running as
		// that account, could not read it.
		owner.Match(f, filepath.Dir(path))
		// A key that cannot be written whole (a full disk) is removed:
		// a partial file would be refused by every later call.
		_, werr := f.Write(b)
		if werr == nil {
			werr = f.Sync()
		}
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return nil, "", werr
		}
	} else if err != nil {
		return nil, "", err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, "", fmt.Errorf("%w: %s is not a PKCS #8 PEM private key", ErrBadConfig, path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s: unparsable private key", ErrBadConfig, path)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P384() {
		return nil, "", fmt.Errorf("%w: %s: not an ECDSA P-384 key", ErrBadConfig, path)
	}
	tp, err := (&jose.JSONWebKey{Key: ek.Public()}).Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, "", err
	}
	return ek, "dev:" + base64.RawURLEncoding.EncodeToString(tp), nil
}
