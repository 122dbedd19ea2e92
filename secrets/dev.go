package secrets

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/custos-mcp/custos/internal/durable"
	"github.com/custos-mcp/custos/internal/owner"
)

// KeySize is the size in bytes of every symmetric key this package hands out
// (AES-256).
const KeySize = 32

// Key is a symmetric key together with the id of its version. The id is safe
// to record (it names the key, not its bytes); the bytes are not.
type Key struct {
	ID    string
	Bytes []byte
}

// String prints only the key id, so a key passed to a formatter by mistake
// does not leak.
func (k Key) String() string { return "key(" + k.ID + ")" }

// LogValue implements slog.LogValuer with the same rule as String.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// Dev is the development provider: keys drawn from crypto/rand when it is
// created and never persisted. Cursors sealed by one process cannot be opened
// by the next, which is the intended behaviour for a demo.
type Dev struct {
	cursor  Key
	audit   Key
	id      Key
	signPub ed25519.PublicKey
	signKey ed25519.PrivateKey
	signID  string
}

// NewDev returns a development provider with fresh random keys.
func NewDev() (*Dev, error) {
	b := make([]byte, 3*KeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("secrets: drawing dev key: %w", err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("secrets: drawing dev signing key: %w", err)
	}
	return &Dev{
		cursor:  Key{ID: "dev-ephemeral-1", Bytes: b[:KeySize]},
		audit:   Key{ID: "dev:ephemeral", Bytes: b[KeySize : 2*KeySize]},
		id:      Key{ID: "dev:ephemeral", Bytes: b[2*KeySize:]},
		signPub: pub, signKey: priv, signID: "dev:ephemeral",
	}, nil
}

// CursorKeys returns the one cursor key.
func (d *Dev) CursorKeys(ctx context.Context) ([]Key, error) {
	k, err := d.CursorKey(ctx)
	return []Key{k}, err
}

// AuditKeys returns the one audit keyed-hash key.
func (d *Dev) AuditKeys(context.Context) ([]Key, error) { return []Key{d.audit.clone()}, nil }

// DevKeyFile is the file, in a dev data directory, that PersistIn uses.
const DevKeyFile = "dev-keys.json"

type devKeyFile struct {
	AuditHMAC   string `json:"audit_hmac"`
	SigningSeed string `json:"signing_seed"`
	// IDKey was added later: a file without it gets one drawn and written.
	IDKey string `json:"id_key,omitempty"`
}

// PersistIn makes the audit keyed-hash key, the checkpoint signing key and
// the resource id key persistent across dev runs on one data directory:
// they are read from dir/dev-keys.json, or drawn and written there (mode
// 0600) if it does not exist (a file written before the id key existed gets
// one added). `custos audit hash`, reports and checkpoint verification then
// work on a dev data directory, and demo, serve and import name imported
// resources alike. The keys get the id "dev:file". The cursor key
// stays ephemeral. Production keys live in Vault, never in a file beside
// the log; this exists for the demo and synthetic data only.
func (d *Dev) PersistIn(dir string) error {
	path := filepath.Join(dir, DevKeyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		kf := devKeyFile{
			AuditHMAC:   base64.StdEncoding.EncodeToString(d.audit.Bytes),
			SigningSeed: base64.StdEncoding.EncodeToString(d.signKey.Seed()),
			IDKey:       base64.StdEncoding.EncodeToString(d.id.Bytes),
		}
		if b, err = writeDevKeys(path, kf, false); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("secrets: reading %s: %w", DevKeyFile, err)
	}
	var kf devKeyFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&kf); err != nil {
		return fmt.Errorf("%w: %s is not a dev key file", ErrBadConfig, path)
	}
	if kf.IDKey == "" {
		kf.IDKey = base64.StdEncoding.EncodeToString(d.id.Bytes)
		if _, err := writeDevKeys(path, kf, true); err != nil {
			return err
		}
	}
	ak, err1 := base64.StdEncoding.Strict().DecodeString(kf.AuditHMAC)
	seed, err2 := base64.StdEncoding.Strict().DecodeString(kf.SigningSeed)
	ik, err3 := base64.StdEncoding.Strict().DecodeString(kf.IDKey)
	if err1 != nil || err2 != nil || err3 != nil || len(ak) != KeySize || len(seed) != ed25519.SeedSize || len(ik) != KeySize {
		return fmt.Errorf("%w: %s holds malformed keys", ErrBadConfig, path)
	}
	d.audit = Key{ID: "dev:file", Bytes: ak}
	d.id = Key{ID: "dev:file", Bytes: ik}
	d.signKey = ed25519.NewKeyFromSeed(seed)
	d.signPub = d.signKey.Public().(ed25519.PublicKey)
	d.signID = "dev:file"
	return nil
}

// writeDevKeys writes kf to path (mode 0600): a new file, or with replace
// a new version of an existing one (through a temporary file and a rename,
// so a crash leaves the old or the new file, never half of one). It
// returns the bytes of the file now at path.
//
// A new file is written whole to a temporary file first and linked to
// path only then: two processes drawing keys for one data directory at
// once must not both win (link(2) fails for the second, which then reads
// and returns the winner's file), and the name never holds a partial file
// (created first and then written, a process killed in between left an
// empty dev-keys.json that every later start on that directory refused as
// "not a dev key file"; probe-chaos). Keys that cannot be written whole (a
// full disk) leave nothing behind.
func writeDevKeys(path string, kf devKeyFile, replace bool) ([]byte, error) {
	b, _ := json.Marshal(kf)
	b = append(b, '\n')
	if replace {
		if err := durable.WriteFile(path, b, 0o600); err != nil {
			return nil, fmt.Errorf("secrets: writing %s: %w", DevKeyFile, err)
		}
		return b, nil
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+DevKeyFile+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("secrets: creating %s: %w", DevKeyFile, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	owner.Match(f, dir) // run as root: the data directory owner's, as serve runs
	_, werr := f.Write(b)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Link(tmp, path)
		if errors.Is(werr, fs.ErrExist) { // another process drew them first
			won, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("secrets: reading %s: %w", DevKeyFile, err)
			}
			return won, nil
		}
	}
	if werr == nil {
		werr = durable.SyncDir(dir)
	}
	if werr != nil {
		return nil, fmt.Errorf("secrets: writing %s: %w", DevKeyFile, werr)
	}
	return b, nil
}

// IDKey returns the resource id key (store.ResourceID): ephemeral, or
// persisted by PersistIn so that demo, serve and import agree.
func (d *Dev) IDKey(context.Context) (Key, error) { return d.id.clone(), nil }

// AuditKey returns the audit keyed-hash key.
func (d *Dev) AuditKey(context.Context) (Key, error) { return d.audit.clone(), nil }

// KeyIDs names the dev keys in the form audit records carry.
func (d *Dev) KeyIDs() []string {
	return []string{"audit-hmac=" + d.audit.ID, "cursor=dev:ephemeral", d.SigningKeyID(1)}
}

// Check always succeeds: dev keys never go stale.
func (d *Dev) Check() error { return nil }

// Sign signs msg with the ephemeral ed25519 key (version 1).
func (d *Dev) Sign(_ context.Context, msg []byte) ([]byte, int, error) {
	return ed25519.Sign(d.signKey, msg), 1, nil
}

// Verify checks a signature made by Sign.
func (d *Dev) Verify(msg, sig []byte, ver int) bool {
	return ver == 1 && ed25519.Verify(d.signPub, msg, sig)
}

// PublicKey returns the ephemeral public key (version 1).
func (d *Dev) PublicKey(ver int) (ed25519.PublicKey, int, error) {
	if ver != 0 && ver != 1 {
		return nil, 0, fmt.Errorf("%w: no signing key version %d", ErrMissing, ver)
	}
	return append(ed25519.PublicKey(nil), d.signPub...), 1, nil
}

// CursorKey returns the key that seals list cursors.
func (d *Dev) CursorKey(context.Context) (Key, error) {
	return d.cursor.clone(), nil
}

// Dev reports true: keys from this provider are ephemeral development keys.
func (d *Dev) Dev() bool { return true }

// Name describes the provider for the startup banner.
func (d *Dev) Name() string { return "dev (ephemeral in-memory keys)" }

// SigningKeyID names the signing key as audit records do ("signing=dev:file"
// or, never stored, "signing=dev:ephemeral"); it has one version.
func (d *Dev) SigningKeyID(int) string { return "signing=" + d.signID }

// SigningVersions lists the one signing key version.
func (d *Dev) SigningVersions() []int { return []int{1} }
