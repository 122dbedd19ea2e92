package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/custos-mcp/custos/internal/owner"
)

// ReencryptStats summarizes a successful Reencrypt. Every blob is counted
// once.
type ReencryptStats struct {
	Blobs     int `json:"blobs"`     // blobs in the catalog
	Converted int `json:"converted"` // plaintext blobs sealed under a fresh data key
	Rewrapped int `json:"rewrapped"` // data keys rewrapped under the newest KEK version
	Unchanged int `json:"unchanged"` // blobs verified and left as they were
	// Compacted reports that the file was rewritten into a fresh file that
	// replaced it, so that the freed pages holding the old values (plaintext
	// or previously wrapped keys) are gone from catalog.db.
	Compacted bool `json:"compacted"`
}

// compactTxMaxSize bounds the transactions of the compaction copy; the copy
// is a scratch file until it is renamed, so partial commits are harmless.
const compactTxMaxSize = 64 << 20

// Reencrypt brings every blob under envelope encryption with the current KEK
// version. The store must be open read-write with Options.DataKeys.
//
//   - A plaintext catalog (opened with Options.Migrate) is converted: every
//     blob is sealed under a fresh data key, and the catalog is recorded as
//     EncryptionEnvelope under DataKeys.KEK (schema 2).
//   - In an encrypted catalog, if DataKeys implements Rewrapper, every
//     wrapped data key is rewrapped under the newest KEK version; the
//     ciphertexts are unchanged. Without Rewrapper every blob is only
//     verified.
//
// Every blob is verified before (its plaintext hashes to its digest) and
// after (the new envelope unwraps through the provider, decrypts, and hashes
// to its digest). All or nothing: the new values are computed outside any
// write transaction (with up to 8 provider calls in flight) and committed in
// one transaction, which fails if any blob changed meanwhile; integrity
// problems are reported for every bad blob (up to a cap) and nothing is
// written; a provider failure returns a *KeyError and nothing is written.
// All old and new values are held in memory until commit.
//
// Every successful run then compacts the file (every key and value copied
// into a fresh file, which is synced and renamed over the catalog) because
// bbolt keeps freed pages, with the old plaintext or old wrapped keys, in
// the file. During the commit and compaction the Store is locked: other
// calls wait. If compaction fails, the re-encryption stays committed, the
// error says so, and the old values may remain in free pages; run Reencrypt
// again, which compacts on every run. See doc.go, "Encryption at rest".
//
// progress, if not nil, is called from the calling goroutine with done
// growing to total, the number of blobs.
func (s *Store) Reencrypt(ctx context.Context, progress func(done, total int)) (ReencryptStats, error) {
	if s.readOnly {
		return ReencryptStats{}, errors.New("store: reencrypt a read-only store")
	}
	if s.keys == nil {
		return ReencryptStats{}, errors.New("store: reencrypt needs a data key provider")
	}
	// Snapshot the blobs.
	var mode string
	var keys, olds [][]byte
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		if mode, _, err = encryption(tx); err != nil {
			return err
		}
		return tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
			if len(k) != sha256.Size {
				return fmt.Errorf("%w: blob key of %d bytes", ErrCorrupt, len(k))
			}
			keys = append(keys, bytes.Clone(k))
			olds = append(olds, bytes.Clone(v))
			return nil
		})
	})
	if err != nil {
		return ReencryptStats{}, err
	}
	rewrapper, _ := s.keys.(Rewrapper)
	st := ReencryptStats{Blobs: len(keys)}
	s.log.Info("reencrypt verifying", "blobs", len(keys), "mode", mode, "rewrap", rewrapper != nil)

	// Compute the new values outside any write transaction.
	news := make([][]byte, len(keys)) // nil: unchanged
	bad := make([]error, len(keys))   // integrity problems, all reported
	prog := newProgress(progress, len(keys))
	err = runWorkers(ctx, len(keys), newBlobWorkers, func(ctx context.Context, i int) error {
		digest := formatDigest([sha256.Size]byte(keys[i]))
		var err error
		if mode == EncryptionNone {
			news[i], err = s.convert(ctx, digest, keys[i], olds[i])
		} else {
			news[i], err = s.rewrap(ctx, rewrapper, digest, keys[i], olds[i])
		}
		var ie *IntegrityError
		if errors.As(err, &ie) {
			bad[i] = err // keep verifying the others
			return nil
		}
		return err
	}, prog.set)
	if err != nil {
		s.log.Warn("reencrypt failed; nothing written", "err", err)
		return ReencryptStats{}, err
	}
	var probs []error
	for _, e := range bad {
		if e != nil {
			if len(probs) == maxReportedProblems {
				probs = append(probs, fmt.Errorf("%w: more corrupt blobs not shown", ErrCorrupt))
				break
			}
			probs = append(probs, e)
		}
	}
	if len(probs) > 0 {
		err := errors.Join(probs...)
		s.log.Error("reencrypt found corrupt blobs; nothing written", "corrupt", len(probs))
		return ReencryptStats{}, err
	}
	for i := range keys {
		switch {
		case news[i] == nil:
			st.Unchanged++
		case mode == EncryptionNone:
			st.Converted++
		default:
			st.Rewrapped++
		}
	}
	// Commit, then compact, holding the Store exclusively.
	s.mu.Lock()
	defer s.mu.Unlock()
	if mode == EncryptionNone || st.Rewrapped > 0 {
		err = s.commitReencrypt(mode, keys, olds, news)
	}
	if err != nil {
		s.log.Warn("reencrypt failed; nothing written", "err", err)
		return ReencryptStats{}, err
	}
	prog.finish()
	s.log.Info("reencrypt committed", "converted", st.Converted, "rewrapped", st.Rewrapped, "unchanged", st.Unchanged)
	if err := s.compactLocked(); err != nil {
		s.log.Error("reencrypt committed but compaction failed", "err", err)
		return st, fmt.Errorf("store: reencrypt committed, but compaction failed, so old values may remain in freed pages of the file: %w", err)
	}
	st.Compacted = true
	s.log.Info("reencrypt compacted")
	return st, nil
}

// commitReencrypt writes the changed blobs (news[i] != nil) in one
// transaction, after checking that the mode and every changed blob are as
// they were in the snapshot, and records the envelope mode.
func (s *Store) commitReencrypt(mode string, keys, olds, news [][]byte) error {
	return s.commit(func(tx *bolt.Tx) error {
		m, _, err := encryption(tx)
		if err != nil {
			return err
		}
		if m != mode {
			return errors.New("store: encryption mode changed during reencrypt; run it again")
		}
		blobs := tx.Bucket(bucketBlobs)
		for i, k := range keys {
			if news[i] == nil {
				continue
			}
			if !bytes.Equal(blobs.Get(k), olds[i]) {
				return errors.New("store: a blob changed during reencrypt; run it again")
			}
			if err := blobs.Put(k, news[i]); err != nil {
				return fmt.Errorf("store: put blob: %w", err)
			}
		}
		if mode == EncryptionNone {
			return putEncryption(tx, EncryptionEnvelope, s.keys)
		}
		return nil
	})
}

// convert verifies the plaintext blob v stored under key and returns its
// envelope under a fresh data key, verified by opening it through the
// provider.
func (s *Store) convert(ctx context.Context, digest string, key, v []byte) ([]byte, error) {
	if got := sha256.Sum256(v); !bytes.Equal(got[:], key) {
		return nil, &IntegrityError{Digest: digest, Got: formatDigest(got)}
	}
	dk, wrapped, err := s.keys.NewDataKey(ctx)
	var env []byte
	if err == nil {
		env, err = sealBlobRandom(dk, wrapped, key, v)
	}
	if err != nil {
		return nil, &KeyError{Op: "new", Digest: digest, Err: err}
	}
	if err := s.verifyEnvelope(ctx, digest, key, env); err != nil {
		return nil, err
	}
	return env, nil
}

// rewrap verifies the envelope v stored under key and, with a Rewrapper,
// returns v with its data key rewrapped (nil if the provider returns the
// same wrapped bytes or there is no Rewrapper). The new envelope is verified
// by opening it through the provider; its data key must be the old one.
func (s *Store) rewrap(ctx context.Context, rw Rewrapper, digest string, key, v []byte) ([]byte, error) {
	if err := s.verifyEnvelope(ctx, digest, key, v); err != nil {
		return nil, err
	}
	if rw == nil {
		return nil, nil
	}
	env, _ := parseEnvelope(v) // verified above
	wrapped, err := rw.RewrapDataKey(ctx, env.wrapped)
	if err != nil {
		return nil, &KeyError{Op: "rewrap", Digest: digest, Err: err}
	}
	if bytes.Equal(wrapped, env.wrapped) {
		return nil, nil
	}
	nv, ok := encodeEnvelope(wrapped, env.nonce, env.ciphertext)
	if !ok {
		return nil, &KeyError{Op: "rewrap", Digest: digest, Err: fmt.Errorf("provider returned a wrapped key of %d bytes, want 1..%d", len(wrapped), maxWrappedLen)}
	}
	oldKey, err := s.keys.UnwrapDataKey(ctx, env.wrapped)
	if err != nil {
		return nil, &KeyError{Op: "unwrap", Digest: digest, Err: err}
	}
	newKey, err := s.keys.UnwrapDataKey(ctx, wrapped)
	if err != nil {
		return nil, &KeyError{Op: "unwrap", Digest: digest, Err: err}
	}
	if subtle.ConstantTimeCompare(oldKey, newKey) != 1 {
		return nil, &KeyError{Op: "rewrap", Digest: digest, Err: errors.New("rewrapped data key differs from the original")}
	}
	if err := s.verifyEnvelope(ctx, digest, key, nv); err != nil {
		return nil, err
	}
	return nv, nil
}

// verifyEnvelope opens env through the provider, without modifying it, and
// checks that the plaintext hashes to key.
func (s *Store) verifyEnvelope(ctx context.Context, digest string, key, env []byte) error {
	pt, err := s.decrypt(ctx, digest, key, env, false)
	if err != nil {
		return err
	}
	if got := sha256.Sum256(pt); !bytes.Equal(got[:], key) {
		return &IntegrityError{Digest: digest, Got: formatDigest(got)}
	}
	return nil
}

// compactLocked rewrites the catalog into a fresh file in the same
// directory (bbolt's Compact copies keys and values, not pages, so freed
// pages are left behind), syncs it, renames it over the catalog, syncs the
// directory and reopens. s.mu must be held exclusively. If the reopen fails
// the Store is left closed.
func (s *Store) compactLocked() (err error) {
	path := s.db.Path()
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".compact-*")
	if err != nil {
		return fmt.Errorf("create scratch file: %w", pathless(err))
	}
	tmp := f.Name()
	owner.Match(f, path) // run as root: the compacted file stays the catalog owner's
	f.Close()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{
		Timeout:         s.boltOpts.Timeout,
		NoSync:          true, // synced once below
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: initialMmapSize,
	})
	if err != nil {
		return fmt.Errorf("open scratch file: %w", err)
	}
	if err := bolt.Compact(dst, s.db, compactTxMaxSize); err != nil {
		dst.Close()
		return fmt.Errorf("compact: %w", err)
	}
	// The copy's transaction ids restart: its marker of settled labels is
	// written anew if the catalog's labels were settled, else removed (it
	// could happen to match the copy's id); so is its label rules version.
	var rules uint32
	var whyRules string
	wasSettled := s.db.View(func(tx *bolt.Tx) error {
		rules, whyRules = labelRules(tx, tx.ID())
		return settled(tx, tx.ID())
	}) == nil
	if err := dst.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if whyRules == "" {
			if err := putLabelRules(tx, rules); err != nil {
				return err
			}
		} else if meta != nil {
			if err := meta.Delete(metaLabelRulesKey); err != nil {
				return err
			}
		}
		if wasSettled {
			return markSettled(tx)
		}
		if meta != nil {
			return meta.Delete(metaSettledKey)
		}
		return nil
	}); err != nil {
		dst.Close()
		return fmt.Errorf("compact: %w", err)
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return fmt.Errorf("sync scratch file: %w", err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("close scratch file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace catalog: %w", pathless(err))
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	// The old inode, still locked by s.db, is now unlinked: close it and
	// open the compacted file in its place.
	s.db.Close()
	db, err := openBolt(path, &s.boltOpts)
	if err != nil {
		return fmt.Errorf("reopen compacted catalog: %w", err)
	}
	s.db = db
	return nil
}
