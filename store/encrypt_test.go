package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

const testKEK = "fake-transit:transit/custos-blob-kek"

// openKeyed opens path with dk (which may be nil) and closes it, checking
// the file, at the end of the test.
func openKeyed(t testing.TB, path string, opts Options) *Store {
	t.Helper()
	opts.Timeout = 200 * time.Millisecond
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// seedFixture builds n entries; every file holds phiMarker.
func seedFixture(t testing.TB, n int) *fixture {
	t.Helper()
	f := newFixture(t)
	f.addN(n)
	f.writeManifest()
	return f
}

// checkBlobs reads every fixture entry through Blob and compares it with the
// file.
func checkBlobs(t testing.TB, s *Store, f *fixture) {
	t.Helper()
	for _, e := range f.entries {
		r, err := s.Get(e.URI)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Blob(context.Background(), r.Digest)
		if err != nil {
			t.Fatalf("Blob(%s): %v", r.Digest, err)
		}
		if !bytes.Equal(b, f.readFile(e.File)) {
			t.Fatalf("Blob(%s) differs from the imported file", r.Digest)
		}
	}
}

// fileHolds reports whether the raw database file contains s.
func fileHolds(t testing.TB, path, s string) bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(raw, []byte(s))
}

// rawBlobs returns a copy of the blobs bucket.
func rawBlobs(t testing.TB, s *Store) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
			out[string(k)] = bytes.Clone(v)
			return nil
		})
	})
	return out
}

// editDB runs fn in a write transaction on the closed store file.
func editDB(t testing.TB, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func TestEnvelopeRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	dk := newFakeKeys(testKEK)
	s := openKeyed(t, path, Options{DataKeys: dk})
	f := seedFixture(t, 40)
	// Two entries with the same content are one blob, sealed once.
	dup := f.add("note")
	f.writeFile(f.entries[dup].File, f.readFile(f.entries[dup-9].File))
	f.writeManifest()
	var last, total int
	rep, err := s.Import(context.Background(), f.dir, func(d, tot int) { last, total = d, tot })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Created != 41 || last != total || total != 3*41 {
		t.Fatalf("report %+v, progress %d/%d", rep, last, total)
	}
	if got := dk.newCalls.Load(); got != 40 {
		t.Fatalf("NewDataKey called %d times, want one per distinct blob (40)", got)
	}
	mode, kek, err := s.Encryption()
	if mode != EncryptionEnvelope || kek != testKEK || err != nil {
		t.Fatalf("Encryption() = %q, %q, %v", mode, kek, err)
	}
	checkBlobs(t, s, f)
	wrapped := map[string]bool{}
	for k, v := range rawBlobs(t, s) {
		env, reason := parseEnvelope(v)
		if reason != "" {
			t.Fatalf("blob %x: %s", k, reason)
		}
		if wrapped[string(env.wrapped)] {
			t.Fatal("two blobs share a data key")
		}
		wrapped[string(env.wrapped)] = true
	}
	s.Close()
	if fileHolds(t, path, phiMarker) {
		t.Fatal("plaintext content found in the encrypted catalog file")
	}
	checkDB(t, path)

	// Reopen read-only with the same provider.
	s = openKeyed(t, path, Options{ReadOnly: true, DataKeys: dk})
	checkBlobs(t, s, f)
}

func TestEnvelopeTamper(t *testing.T) {
	dir := t.TempDir()
	f := seedFixture(t, 2)
	for _, tc := range []struct {
		name   string
		edit   func(v []byte) []byte
		reason string // "" means a *KeyError, not corruption
	}{
		{"ciphertext byte", func(v []byte) []byte { v[len(v)-20] ^= 1; return v }, errAuth},
		{"tag byte", func(v []byte) []byte { v[len(v)-1] ^= 0x80; return v }, errAuth},
		{"nonce byte", func(v []byte) []byte {
			n := int(binary.BigEndian.Uint16(v[2:]))
			v[4+n] ^= 1
			return v
		}, errAuth},
		{"truncated", func(v []byte) []byte { return v[:20] }, "envelope truncated"},
		{"format marker", func(v []byte) []byte { v[1] = '9'; return v }, "envelope has an unknown format marker"},
		{"plaintext in an encrypted catalog", func([]byte) []byte { return f.readFile(f.entries[0].File) }, "envelope has an unknown format marker"},
		{"wrapped key byte", func(v []byte) []byte { v[12] ^= 1; return v }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".db")
			dk := newFakeKeys(testKEK)
			s := openKeyed(t, path, Options{DataKeys: dk})
			mustImport(t, s, f.dir)
			r, _ := s.Get(f.entries[0].URI)
			other, _ := s.Get(f.entries[1].URI)
			s.Close()
			editDB(t, path, func(tx *bolt.Tx) error {
				b := tx.Bucket(bucketBlobs)
				k := mustDigestKey(t, r.Digest)
				return b.Put(k, tc.edit(bytes.Clone(b.Get(k))))
			})
			s = openKeyed(t, path, Options{ReadOnly: true, DataKeys: dk})
			b, err := s.Blob(context.Background(), r.Digest)
			if b != nil {
				t.Fatalf("Blob returned %d bytes", len(b))
			}
			if strings.Contains(err.Error(), phiMarker) {
				t.Fatalf("error quotes content: %v", err)
			}
			if tc.reason == "" {
				var ke *KeyError
				if !errors.As(err, &ke) || !errors.Is(err, ErrDataKey) || errors.Is(err, ErrCorrupt) || ke.Digest != r.Digest {
					t.Fatalf("err = %v, want a *KeyError for %s", err, r.Digest)
				}
			} else {
				var ie *IntegrityError
				if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ie) {
					t.Fatalf("err = %v, want *IntegrityError", err)
				}
				if ie.Digest != r.Digest || ie.Reason != tc.reason || ie.Got != "" {
					t.Fatalf("evidence %+v, want digest %s reason %q", ie, r.Digest, tc.reason)
				}
				if !strings.Contains(err.Error(), r.Digest) {
					t.Fatalf("message %q lacks the digest", err)
				}
			}
			if _, err := s.Blob(context.Background(), other.Digest); err != nil {
				t.Fatalf("untouched blob: %v", err)
			}
		})
	}
}

// An envelope copied under another content address fails authentication
// (the AAD binds it to its digest) before the hash check.
func TestEnvelopeMovedToAnotherDigest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	dk := newFakeKeys(testKEK)
	s := openKeyed(t, path, Options{DataKeys: dk})
	f := seedFixture(t, 2)
	mustImport(t, s, f.dir)
	a, _ := s.Get(f.entries[0].URI)
	b, _ := s.Get(f.entries[1].URI)
	s.Close()
	editDB(t, path, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketBlobs)
		return bk.Put(mustDigestKey(t, b.Digest), bytes.Clone(bk.Get(mustDigestKey(t, a.Digest))))
	})
	s = openKeyed(t, path, Options{DataKeys: dk})
	_, err := s.Blob(context.Background(), b.Digest)
	var ie *IntegrityError
	if !errors.As(err, &ie) || ie.Digest != b.Digest || ie.Reason != errAuth {
		t.Fatalf("err = %v, want an authentication failure for %s", err, b.Digest)
	}
}

func TestUnwrapFailureIsNotCorruption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	dk := newFakeKeys(testKEK)
	s := openKeyed(t, path, Options{DataKeys: dk})
	f := seedFixture(t, 1)
	mustImport(t, s, f.dir)
	r, _ := s.Get(f.entries[0].URI)
	down := errFakeUnavailable
	dk.unwrapErr.Store(&down)
	b, err := s.Blob(context.Background(), r.Digest)
	if b != nil || !errors.Is(err, ErrDataKey) || !errors.Is(err, errFakeUnavailable) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Blob = %d bytes, %v; want ErrDataKey and the provider's error, not ErrCorrupt", len(b), err)
	}
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Op != "unwrap" || ke.Digest != r.Digest {
		t.Fatalf("err = %#v", err)
	}
	dk.unwrapErr.Store(nil)
	if _, err := s.Blob(context.Background(), r.Digest); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
}

// A provider that returns a key of the wrong size fails the import without
// writing, and the error names sizes, not bytes.
func TestBadDataKeySize(t *testing.T) {
	s := openKeyed(t, filepath.Join(t.TempDir(), "catalog.db"), Options{DataKeys: &fakeKeys{name: testKEK, versions: [][]byte{make([]byte, 32)}, keyLen: 16}})
	f := seedFixture(t, 3)
	_, err := s.Import(context.Background(), f.dir, nil)
	if !errors.Is(err, ErrDataKey) || !strings.Contains(err.Error(), "16 bytes, want 32") {
		t.Fatalf("Import: %v", err)
	}
	if n := blobCount(t, s); n != 0 {
		t.Fatalf("%d blobs written", n)
	}
}

func TestImportAllOrNothingWhenNewDataKeyFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	dk := newFakeKeys(testKEK)
	dk.failNewAfter.Store(7)
	s := openKeyed(t, path, Options{DataKeys: dk})
	f := seedFixture(t, 30)
	_, err := s.Import(context.Background(), f.dir, nil)
	if !errors.Is(err, ErrDataKey) || !errors.Is(err, errFakeUnavailable) {
		t.Fatalf("Import: %v, want ErrDataKey wrapping the provider error", err)
	}
	if n, _ := s.Count(); n != 0 || blobCount(t, s) != 0 {
		t.Fatalf("after a failed import: %d resources, %d blobs", n, blobCount(t, s))
	}
	dk.failNewAfter.Store(0)
	mustImport(t, s, f.dir)
	checkBlobs(t, s, f)
}

func TestOpenModeRefusals(t *testing.T) {
	dir := t.TempDir()
	f := seedFixture(t, 3)
	dk := newFakeKeys(testKEK)

	encrypted := filepath.Join(dir, "encrypted.db")
	s := openKeyed(t, encrypted, Options{DataKeys: dk})
	mustImport(t, s, f.dir)
	s.Close()

	plain := filepath.Join(dir, "plain.db")
	s = openKeyed(t, plain, Options{})
	mustImport(t, s, f.dir)
	s.Close()

	other := newFakeKeys("fake-transit:transit/another-kek")
	for _, tc := range []struct {
		name string
		path string
		opts Options
		want error
	}{
		{"encrypted without keys", encrypted, Options{}, ErrEncrypted},
		{"encrypted without keys read-only", encrypted, Options{ReadOnly: true}, ErrEncrypted},
		{"plaintext with keys", plain, Options{DataKeys: dk}, ErrPlaintext},
		{"plaintext with keys read-only", plain, Options{DataKeys: dk, ReadOnly: true}, ErrPlaintext},
		{"kek mismatch", encrypted, Options{DataKeys: other}, ErrKEKMismatch},
		{"kek mismatch read-only", encrypted, Options{DataKeys: other, ReadOnly: true}, ErrKEKMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Timeout = 200 * time.Millisecond
			s, err := Open(tc.path, tc.opts)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open = %v, want %v", err, tc.want)
			}
			if tc.want == ErrKEKMismatch && (!strings.Contains(err.Error(), testKEK) || !strings.Contains(err.Error(), other.KEK())) {
				t.Fatalf("message %q does not name both KEKs", err)
			}
		})
	}
	// MetadataOnly reads an encrypted catalog's labels without keys (what
	// 'custos btg grant' needs to find a patient), and no content.
	meta, err := Open(encrypted, Options{ReadOnly: true, MetadataOnly: true, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open MetadataOnly: %v", err)
	}
	page, err := meta.Page("", 1)
	if err != nil || len(page) != 1 {
		t.Fatalf("Page MetadataOnly: %v %v", page, err)
	}
	if tenants, err := meta.PatientTenants(page[0].Labels.Patient); err != nil || len(tenants) != 1 {
		t.Fatalf("PatientTenants MetadataOnly: %v %v", tenants, err)
	}
	if b, err := meta.Blob(context.Background(), page[0].Digest); !errors.Is(err, ErrMetadataOnly) || b != nil {
		t.Fatalf("Blob MetadataOnly = %d bytes, %v; want ErrMetadataOnly", len(b), err)
	}
	meta.Close()
	// A plaintext catalog opened MetadataOnly gives no content either: the
	// option promises labels only, whatever the catalog's mode. Blob
	// returned the plaintext before 2026-12-06.
	meta, err = Open(plain, Options{ReadOnly: true, MetadataOnly: true, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open plaintext MetadataOnly: %v", err)
	}
	page, err = meta.Page("", 1)
	if err != nil || len(page) != 1 {
		t.Fatalf("Page plaintext MetadataOnly: %v %v", page, err)
	}
	if b, err := meta.Blob(context.Background(), page[0].Digest); !errors.Is(err, ErrMetadataOnly) || b != nil {
		t.Fatalf("Blob of a plaintext catalog MetadataOnly = %d bytes, %v; want ErrMetadataOnly", len(b), err)
	}
	meta.Close()
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"metadata only read-write", Options{MetadataOnly: true}},
		{"metadata only with keys", Options{MetadataOnly: true, ReadOnly: true, DataKeys: dk}},
		{"migrate without keys", Options{Migrate: true}},
		{"migrate read-only", Options{Migrate: true, ReadOnly: true, DataKeys: dk}},
		{"empty kek name", Options{DataKeys: newFakeKeys("")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := Open(filepath.Join(dir, "unused.db"), tc.opts); err == nil {
				s.Close()
				t.Fatal("Open accepted invalid options")
			}
		})
	}

	// The files are unchanged by the refusals.
	s = openKeyed(t, plain, Options{})
	if mode, _, _ := s.Encryption(); mode != EncryptionNone {
		t.Fatalf("plain store mode %q", mode)
	}
	checkBlobs(t, s, f)
	s.Close()
	s = openKeyed(t, encrypted, Options{DataKeys: dk})
	checkBlobs(t, s, f)
}

// An empty plaintext catalog takes the mode of the options that open it
// read-write; a schema-1 catalog (written before encryption existed) opens
// as plaintext.
func TestModeOfNewAndOldCatalogs(t *testing.T) {
	dir := t.TempDir()
	dk := newFakeKeys(testKEK)
	empty := filepath.Join(dir, "empty.db")
	openKeyed(t, empty, Options{}).Close()
	s := openKeyed(t, empty, Options{DataKeys: dk})
	if mode, kek, _ := s.Encryption(); mode != EncryptionEnvelope || kek != testKEK {
		t.Fatalf("empty catalog opened with keys: %q %q", mode, kek)
	}
	s.Close()
	if _, err := Open(empty, Options{}); !errors.Is(err, ErrEncrypted) {
		t.Fatalf("never downgraded silently: %v", err)
	}

	old := filepath.Join(dir, "schema1.db")
	f := seedFixture(t, 3)
	s = openKeyed(t, old, Options{})
	mustImport(t, s, f.dir)
	s.Close()
	editDB(t, old, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Delete(metaEncryptionKey); err != nil {
			return err
		}
		return meta.Put(metaSchemaKey, binary.BigEndian.AppendUint32(nil, 1))
	})
	s = openKeyed(t, old, Options{})
	if mode, _, err := s.Encryption(); mode != EncryptionNone || err != nil {
		t.Fatalf("schema 1: %q %v", mode, err)
	}
	checkBlobs(t, s, f)
	mustImport(t, s, f.dir) // still writable, stays schema 1
	s.Close()
	if _, err := Open(old, Options{DataKeys: dk}); !errors.Is(err, ErrPlaintext) {
		t.Fatalf("schema 1 with keys: %v", err)
	}
	editDB(t, old, func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(metaSchemaKey); binary.BigEndian.Uint32(v) != 1 {
			t.Errorf("schema upgraded without reencrypt: %x", v)
		}
		return nil
	})
	// Migration upgrades it.
	s = openKeyed(t, old, Options{DataKeys: dk, Migrate: true})
	if _, err := s.Reencrypt(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	checkBlobs(t, s, f)
	s.Close()
	editDB(t, old, func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(metaSchemaKey); binary.BigEndian.Uint32(v) != SchemaVersion {
			t.Errorf("schema after reencrypt: %x", v)
		}
		return nil
	})
}

func TestReencryptPlaintextCatalog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	f := seedFixture(t, 60)
	s := openKeyed(t, path, Options{})
	mustImport(t, s, f.dir)
	// A second import round leaves superseded pages in the file.
	f.writeFile(f.entries[0].File, []byte(strings.Replace(string(f.readFile(f.entries[0].File)), "seed", "seed2", 1)))
	mustImport(t, s, f.dir)
	s.Close()
	if !fileHolds(t, path, phiMarker) {
		t.Fatal("test premise: the plaintext catalog holds the marker")
	}

	dk := newFakeKeys(testKEK)
	s = openKeyed(t, path, Options{DataKeys: dk, Migrate: true})
	r, _ := s.Get(f.entries[3].URI)
	if _, err := s.Blob(context.Background(), r.Digest); !errors.Is(err, ErrPlaintext) {
		t.Fatalf("Blob before migration: %v", err)
	}
	if _, err := s.Import(context.Background(), f.dir, nil); !errors.Is(err, ErrPlaintext) {
		t.Fatalf("Import before migration: %v", err)
	}
	var last, total int
	st, err := s.Reencrypt(context.Background(), func(d, tot int) { last, total = d, tot })
	if err != nil {
		t.Fatal(err)
	}
	if st.Blobs != 61 || st.Converted != 61 || st.Rewrapped != 0 || st.Unchanged != 0 || !st.Compacted || last != 61 || total != 61 {
		t.Fatalf("stats %+v, progress %d/%d", st, last, total)
	}
	// The same Store serves the converted blobs, and imports encrypt.
	checkBlobs(t, s, f)
	mustImport(t, s, f.dir)
	s.Close()
	checkDB(t, path)
	if fileHolds(t, path, phiMarker) {
		t.Fatal("plaintext content remains in the catalog file after reencrypt")
	}
	if _, err := Open(path, Options{}); !errors.Is(err, ErrEncrypted) {
		t.Fatalf("open without keys: %v", err)
	}
	s = openKeyed(t, path, Options{DataKeys: dk, ReadOnly: true})
	checkBlobs(t, s, f)
	for _, v := range rawBlobs(t, s) {
		if _, reason := parseEnvelope(v); reason != "" {
			t.Fatal(reason)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("scratch files left behind: %d entries", len(entries))
	}
}

func TestReencryptRewrap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	f := seedFixture(t, 20)
	base := newFakeKeys(testKEK)

	// Without Rewrapper: verify only.
	s := openKeyed(t, path, Options{DataKeys: base})
	mustImport(t, s, f.dir)
	st, err := s.Reencrypt(context.Background(), nil)
	if err != nil || st.Unchanged != 20 || st.Rewrapped != 0 || st.Converted != 0 {
		t.Fatalf("Reencrypt without Rewrapper = %+v, %v", st, err)
	}
	before := rawBlobs(t, s)
	s.Close()

	base.rotate()
	dk := fakeRewrapKeys{base}
	s = openKeyed(t, path, Options{DataKeys: dk})
	st, err = s.Reencrypt(context.Background(), nil)
	if err != nil || st.Rewrapped != 20 || st.Unchanged != 0 {
		t.Fatalf("Reencrypt = %+v, %v", st, err)
	}
	after := rawBlobs(t, s)
	for k, old := range before {
		o, _ := parseEnvelope(old)
		n, reason := parseEnvelope(after[k])
		if reason != "" {
			t.Fatal(reason)
		}
		if !bytes.HasPrefix(o.wrapped, []byte("fake:v1:")) || !bytes.HasPrefix(n.wrapped, []byte("fake:v2:")) {
			t.Fatalf("wrapped %q -> %q", o.wrapped[:8], n.wrapped[:8])
		}
		if !bytes.Equal(o.nonce, n.nonce) || !bytes.Equal(o.ciphertext, n.ciphertext) {
			t.Fatal("rewrap changed the ciphertext")
		}
	}
	checkBlobs(t, s, f)
	// Everything is on the newest version now.
	st, err = s.Reencrypt(context.Background(), nil)
	if err != nil || st.Rewrapped != 0 || st.Unchanged != 20 {
		t.Fatalf("second Reencrypt = %+v, %v", st, err)
	}
	s.Close()
	checkDB(t, path)
	if fileHolds(t, path, "fake:v1:") {
		t.Fatal("keys wrapped under the old KEK version remain in the file")
	}
}

// Reencrypt verifies every blob first and reports every corrupt one; nothing
// is written.
func TestReencryptReportsEveryCorruptBlob(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	f := seedFixture(t, 10)
	s := openKeyed(t, path, Options{})
	mustImport(t, s, f.dir)
	bad := []string{}
	for _, i := range []int{2, 7} {
		r, _ := s.Get(f.entries[i].URI)
		bad = append(bad, r.Digest)
	}
	s.Close()
	editDB(t, path, func(tx *bolt.Tx) error {
		for _, d := range bad {
			if err := tx.Bucket(bucketBlobs).Put(mustDigestKey(t, d), []byte("tampered")); err != nil {
				return err
			}
		}
		return nil
	})
	dk := newFakeKeys(testKEK)
	s = openKeyed(t, path, Options{DataKeys: dk, Migrate: true})
	before := rawBlobs(t, s)
	_, err := s.Reencrypt(context.Background(), nil)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Reencrypt: %v", err)
	}
	for _, d := range bad {
		if !strings.Contains(err.Error(), d) {
			t.Errorf("error does not name %s: %v", d, err)
		}
	}
	if mode, _, _ := s.Encryption(); mode != EncryptionNone {
		t.Fatalf("mode %q after a failed reencrypt", mode)
	}
	after := rawBlobs(t, s)
	for k, v := range before {
		if !bytes.Equal(after[k], v) {
			t.Fatal("a blob was rewritten by a failed reencrypt")
		}
	}
}

// A provider failure during Reencrypt writes nothing; the catalog stays
// plaintext and a later run succeeds.
func TestReencryptProviderFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	f := seedFixture(t, 30)
	s := openKeyed(t, path, Options{})
	mustImport(t, s, f.dir)
	s.Close()
	dk := newFakeKeys(testKEK)
	dk.failNewAfter.Store(10)
	s = openKeyed(t, path, Options{DataKeys: dk, Migrate: true})
	if _, err := s.Reencrypt(context.Background(), nil); !errors.Is(err, ErrDataKey) || !errors.Is(err, errFakeUnavailable) {
		t.Fatalf("Reencrypt: %v", err)
	}
	if mode, _, _ := s.Encryption(); mode != EncryptionNone {
		t.Fatalf("mode %q", mode)
	}
	dk.failNewAfter.Store(0)
	if st, err := s.Reencrypt(context.Background(), nil); err != nil || st.Converted != 30 {
		t.Fatalf("retry: %+v %v", st, err)
	}
	checkBlobs(t, s, f)
}

// Reads continue, without errors, while Reencrypt rewraps, commits and swaps
// in the compacted file.
func TestReencryptConcurrentReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	f := seedFixture(t, 20)
	base := newFakeKeys(testKEK)
	s := openKeyed(t, path, Options{DataKeys: fakeRewrapKeys{base}})
	mustImport(t, s, f.dir)
	base.rotate()
	etags := make([]string, len(f.entries))
	for i, e := range f.entries {
		r, _ := s.Get(e.URI)
		etags[i] = r.Digest
	}
	stop := make(chan struct{})
	errs := make(chan error, 4)
	reads := make([]int, 4)
	for w := range 4 {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if _, err := s.Blob(context.Background(), etags[i%len(etags)]); err != nil {
					errs <- err
					return
				}
				reads[w]++
			}
		}()
	}
	st, err := s.Reencrypt(context.Background(), nil)
	close(stop)
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Blob: %v", err)
		}
	}
	if err != nil || st.Rewrapped != 20 || !st.Compacted {
		t.Fatalf("Reencrypt = %+v, %v", st, err)
	}
	checkBlobs(t, s, f)
}
