package checkpoint

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// KeySigner is the signing backend: an ed25519 key with versions, such as
// a Vault Transit key (*secrets.Vault) or an ephemeral development key
// (*secrets.Dev).
//
// Sign signs msg itself (not a pre-hash) with the newest key version and
// returns the 64-byte ed25519 signature and the version that made it.
// PublicKey returns the public key of version (0 = newest) and the version
// number it resolved to. Both must be safe for concurrent use.
type KeySigner interface {
	Sign(ctx context.Context, msg []byte) (sig []byte, version int, err error)
	PublicKey(version int) (ed25519.PublicKey, int, error)
}

// DefaultSignTimeout bounds each call to KeySigner.Sign made by a Signer.
const DefaultSignTimeout = 10 * time.Second

// probeText is signed once by NewSigner to prove the backend produces
// signatures note verifiers accept. It has one line, so it can never be
// mistaken for a checkpoint body (which has three).
const probeText = "custos checkpoint signer probe\n"

// Signer is a note.Signer whose key lives in a KeySigner. Its name is the
// checkpoint origin and its key hash is the note key hash of the key
// version it currently signs with. It is safe for concurrent use.
//
// Key rotation: note.Sign asks for KeyHash before calling Sign, so a
// signature made by a different version than the one announced cannot be
// used. When the backend answers with another version, Sign verifies the
// signature under that version's public key, switches the Signer to it and
// returns a *KeyRotatedError (ErrKeyRotated); signing the note again
// succeeds. The package-level Sign retries once by itself.
type Signer struct {
	ks      KeySigner
	origin  string
	ctx     context.Context
	timeout time.Duration
	st      *signerState
}

type signerState struct {
	mu      sync.Mutex
	version int
	hash    uint32
	pub     ed25519.PublicKey
	vkey    string
}

var _ note.Signer = (*Signer)(nil)

// NewSigner returns a note signer named origin backed by ks's newest key
// version, and that version's verifier key ("origin+hash+base64(0x01||pub)")
// to give to auditors. It signs a one-line probe text (not a checkpoint)
// and verifies it, so a misconfigured backend fails at startup rather than
// at the first checkpoint.
//
// ctx's values (not its cancellation) are kept for the signer's calls to
// ks.Sign, each bounded by DefaultSignTimeout; use WithContext to bound a
// signing with a caller's context (Checkpointer does).
func NewSigner(ctx context.Context, origin string, ks KeySigner) (*Signer, string, error) {
	if err := validOrigin(origin); err != nil {
		return nil, "", err
	}
	if ks == nil {
		return nil, "", errors.New("checkpoint: nil KeySigner")
	}
	st, err := loadKey(origin, ks, 0)
	if err != nil {
		return nil, "", err
	}
	s := &Signer{ks: ks, origin: origin, ctx: context.WithoutCancel(ctx), timeout: DefaultSignTimeout, st: st}
	if _, err := note.Sign(&note.Note{Text: probeText}, s.WithContext(ctx)); err != nil {
		if !errors.Is(err, ErrKeyRotated) {
			return nil, "", fmt.Errorf("checkpoint: signer probe: %w", err)
		}
		if _, err := note.Sign(&note.Note{Text: probeText}, s.WithContext(ctx)); err != nil {
			return nil, "", fmt.Errorf("checkpoint: signer probe: %w", err)
		}
	}
	return s, s.VerifierKey(), nil
}

func loadKey(origin string, ks KeySigner, version int) (*signerState, error) {
	pub, ver, err := ks.PublicKey(version)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: signing public key version %d: %w", version, err)
	}
	vkey, err := note.NewEd25519VerifierKey(origin, pub)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: signing public key version %d: %w", ver, err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: signing public key version %d: %w", ver, err)
	}
	return &signerState{version: ver, hash: v.KeyHash(), pub: pub, vkey: vkey}, nil
}

// Name returns the origin.
func (s *Signer) Name() string { return s.origin }

// KeyHash returns the note key hash of the current key version.
func (s *Signer) KeyHash() uint32 {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.st.hash
}

// Version returns the key version the signer currently signs with.
func (s *Signer) Version() int {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.st.version
}

// VerifierKey returns the verifier key of the current key version.
func (s *Signer) VerifierKey() string {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.st.vkey
}

// WithContext returns a view of s (sharing its key state) whose Sign calls
// the backend with ctx, still bounded by DefaultSignTimeout.
func (s *Signer) WithContext(ctx context.Context) note.Signer {
	c := *s
	c.ctx = ctx
	return &c
}

// Sign signs msg with the backend, checks the version that signed is the
// announced one and that the signature verifies under its public key.
func (s *Signer) Sign(msg []byte) ([]byte, error) {
	s.st.mu.Lock()
	ver, pub := s.st.version, s.st.pub
	s.st.mu.Unlock()

	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	sig, got, err := s.ks.Sign(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: signing with key version %d: %w", ver, err)
	}
	if got != ver {
		st, err := loadKey(s.origin, s.ks, got)
		if err != nil {
			return nil, err
		}
		if len(sig) != ed25519.SignatureSize || !ed25519.Verify(st.pub, msg, sig) {
			return nil, fmt.Errorf("%w: backend signature does not verify under key version %d", ErrBadSignature, got)
		}
		s.st.mu.Lock()
		if s.st.version == ver {
			s.st.version, s.st.hash, s.st.pub, s.st.vkey = st.version, st.hash, st.pub, st.vkey
		}
		s.st.mu.Unlock()
		return nil, &KeyRotatedError{Old: ver, New: got}
	}
	if len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, msg, sig) {
		return nil, fmt.Errorf("%w: backend signature does not verify under key version %d", ErrBadSignature, ver)
	}
	return sig, nil
}

// Sign validates c, checks that signer is named c.Origin, and returns the
// signed note: c.Marshal(), a blank line, one signature line. If signer
// reports ErrKeyRotated it signs once more (with the new key version).
func Sign(c Checkpoint, signer note.Signer) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if signer == nil || signer.Name() != c.Origin {
		return nil, fmt.Errorf("%w: signer name does not match origin %q", ErrBadCheckpoint, c.Origin)
	}
	n := &note.Note{Text: string(c.Marshal())}
	msg, err := note.Sign(n, signer)
	if errors.Is(err, ErrKeyRotated) {
		msg, err = note.Sign(n, signer)
	}
	if err != nil {
		return nil, err
	}
	return msg, nil
}

// Open verifies a signed checkpoint and parses its body. It requires at
// least one valid signature, by a key in verifiers named like the
// checkpoint's origin; any signature by a known key that fails makes it
// fail. Errors match ErrBadSignature (signature or note framing; also
// ErrUnknownKey, as *UnknownKeyError, when no signature is by a key
// given) or ErrBadCheckpoint (body).
func Open(signedNote []byte, verifiers note.Verifiers) (Checkpoint, *note.Note, error) {
	n, err := note.Open(signedNote, verifiers)
	if err != nil {
		var unv *note.UnverifiedNoteError
		if errors.As(err, &unv) && unv.Note != nil {
			origin, _, _ := strings.Cut(unv.Note.Text, "\n")
			signers := make([]string, 0, len(unv.Note.UnverifiedSigs))
			for _, s := range unv.Note.UnverifiedSigs {
				signers = append(signers, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
			}
			return Checkpoint{}, nil, &UnknownKeyError{Origin: origin, Signers: signers, Err: err}
		}
		return Checkpoint{}, nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	c, err := Parse([]byte(n.Text))
	if err != nil {
		return Checkpoint{}, nil, err
	}
	for _, sig := range n.Sigs {
		if sig.Name == c.Origin {
			return c, n, nil
		}
	}
	return Checkpoint{}, nil, fmt.Errorf("%w: no verified signature by a key named %q", ErrBadSignature, c.Origin)
}

// VerifierKeyName is the name of verifier key vkey as signatures and
// messages name it: "origin+hash" (the line 'custos audit pubkey' writes,
// without the public key).
func VerifierKeyName(vkey string) string {
	name, rest, _ := strings.Cut(vkey, "+")
	hash, _, _ := strings.Cut(rest, "+")
	return name + "+" + hash
}

// VerifierKeys returns the verifier keys of origin for the given key
// versions of ks, in order. With no versions it returns one per version
// from 1 to the newest, skipping versions ks no longer has (Vault's
// min_available_version), but it fails if none is left.
func VerifierKeys(origin string, ks KeySigner, versions ...int) ([]string, error) {
	if err := validOrigin(origin); err != nil {
		return nil, err
	}
	explicit := len(versions) > 0
	if !explicit {
		_, newest, err := ks.PublicKey(0)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: signing public key: %w", err)
		}
		for v := 1; v <= newest; v++ {
			versions = append(versions, v)
		}
	}
	var vkeys []string
	for _, v := range versions {
		st, err := loadKey(origin, ks, v)
		if err != nil {
			if explicit {
				return nil, err
			}
			continue
		}
		vkeys = append(vkeys, st.vkey)
	}
	if len(vkeys) == 0 {
		return nil, errors.New("checkpoint: no signing key versions")
	}
	return vkeys, nil
}

// FormatVerifierFile returns the verifier file for vkeys: one verifier key
// per line.
func FormatVerifierFile(vkeys []string) []byte {
	var b bytes.Buffer
	for _, k := range vkeys {
		b.WriteString(k)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ParseVerifierFile parses a verifier file: one note verifier key per
// line; empty lines and lines starting with '#' are ignored; surrounding
// spaces are trimmed. Repeated identical keys count once; two different
// keys with the same name and key hash, an invalid line, or a file with no
// key are errors (a verifier file must never silently trust nothing).
func ParseVerifierFile(data []byte) (note.Verifiers, error) {
	seen := make(map[string]string) // name+hash -> vkey
	var list []note.Verifier
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := note.NewVerifier(line)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: verifier file line %d: %v", i+1, err)
		}
		id := fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash())
		if prev, ok := seen[id]; ok {
			if prev != line {
				return nil, fmt.Errorf("checkpoint: verifier file line %d: two keys for %s", i+1, id)
			}
			continue
		}
		seen[id] = line
		list = append(list, v)
	}
	if len(list) == 0 {
		return nil, errors.New("checkpoint: verifier file holds no key")
	}
	return note.VerifierList(list...), nil
}
