package audit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/tlog"
)

// fuzzLogSize is the number of records in FuzzTamper's log.
const fuzzLogSize = 8

// Mutations applied by FuzzTamper, chosen by kind % 5.
const (
	mutByte     = iota // change one byte of record a at offset b (xor delta)
	mutDelete          // delete record a
	mutSwap            // swap records a and b
	mutInsert          // insert a copy of record a before record b (later keys shift up)
	mutTruncate        // delete records a..end
	mutKinds
)

// rootOf is the RFC 6962 root of the tree over leaves (the records' bytes),
// computed without the log: what an offline verifier holding a checkpoint
// recomputes from exported records.
func rootOf(t testing.TB, leaves [][]byte) tlog.Hash {
	t.Helper()
	var stored []tlog.Hash
	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	for n, leaf := range leaves {
		hs, err := tlog.StoredHashes(int64(n), leaf, r)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, hs...)
	}
	root, err := tlog.TreeHash(int64(len(leaves)), r)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// mutate applies one mutation to the records bucket only, as an attacker
// with write access to the file would, and describes it.
func mutate(t *testing.T, path string, kind uint8, a, b uint16, delta uint8) string {
	t.Helper()
	const k = fuzzLogSize
	sa, sb := uint64(a%k)+1, uint64(b%k)+1
	if delta == 0 {
		delta = 1
	}
	var desc string
	tamperTx(t, path, func(tx *bolt.Tx) error {
		r := tx.Bucket(bucketRecords)
		switch kind % mutKinds {
		case mutByte:
			v := get(r, sa)
			off := int(b) % len(v)
			v[off] ^= delta
			desc = fmt.Sprintf("byte %d of record %d ^= %#x", off, sa, delta)
			return r.Put(seqKey(sa), v)
		case mutDelete:
			desc = fmt.Sprintf("delete record %d", sa)
			return r.Delete(seqKey(sa))
		case mutSwap:
			if sa == sb {
				sb = sa%k + 1
			}
			va, vb := get(r, sa), get(r, sb)
			desc = fmt.Sprintf("swap records %d and %d", sa, sb)
			if err := r.Put(seqKey(sa), vb); err != nil {
				return err
			}
			return r.Put(seqKey(sb), va)
		case mutInsert:
			cp := get(r, sa)
			for s := uint64(k); s >= sb; s-- {
				if err := r.Put(seqKey(s+1), get(r, s)); err != nil {
					return err
				}
			}
			desc = fmt.Sprintf("insert a copy of record %d at %d", sa, sb)
			return r.Put(seqKey(sb), cp)
		default: // mutTruncate
			for s := sa; s <= k; s++ {
				if err := r.Delete(seqKey(s)); err != nil {
					return err
				}
			}
			desc = fmt.Sprintf("truncate records %d..%d", sa, k)
			return nil
		}
	})
	return desc
}

// rawRecords reads the records bucket in key order, as an export would.
func rawRecords(t *testing.T, path string) [][]byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out [][]byte
	err = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRecords).ForEach(func(_, v []byte) error {
			out = append(out, slices.Clone(v))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzTamper: any single-byte change, deletion, swap, insertion of a copied
// record or truncation of the tail, applied to the stored records of an
// 8-record log, is detected twice: by VerifyFile on the file, and by an
// offline check of the records (in stored order) against the tree head
// (size, root) taken before the mutation, as a checkpoint would hold it.
// Seeds (one per mutation kind and more) are in testdata/fuzz/FuzzTamper.
func FuzzTamper(f *testing.F) {
	base := filepath.Join(f.TempDir(), "audit.db")
	l, err := Open(base, Options{Node: "n", Now: stepClock(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC), time.Second)})
	if err != nil {
		f.Fatal(err)
	}
	appendN(f, l, fuzzLogSize)
	size0, root0, err := l.TreeHead(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	mustVerify(f, base) // every mutation starts from a log that verifies
	img, err := os.ReadFile(base)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, kind uint8, a, b uint16, delta uint8) {
		path := filepath.Join(t.TempDir(), "audit.db")
		if err := os.WriteFile(path, img, 0o600); err != nil {
			t.Fatal(err)
		}
		if leaves := rawRecords(t, path); int64(len(leaves)) != size0 || rootOf(t, leaves) != root0 {
			t.Fatal("the untouched log does not match its tree head")
		}
		desc := mutate(t, path, kind, a, b, delta)

		ps, _ := collect(t, path)
		if len(ps) == 0 {
			t.Fatalf("%s: not detected by VerifyFile", desc)
		}
		leaves := rawRecords(t, path)
		if int64(len(leaves)) == size0 && rootOf(t, leaves) == root0 {
			t.Fatalf("%s: records still match the tree head (%d, %x)", desc, size0, root0)
		}
	})
}

// TestFuzzTamperCorpus: the committed seeds cover every mutation kind.
func TestFuzzTamperCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzTamper")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint8]bool{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var kind uint8
		if _, err := fmt.Sscanf(string(b), "go test fuzz v1\nuint8(%d)", &kind); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		seen[kind%mutKinds] = true
	}
	for k := uint8(0); k < mutKinds; k++ {
		if !seen[k] {
			t.Errorf("no seed for mutation kind %d", k)
		}
	}
}
