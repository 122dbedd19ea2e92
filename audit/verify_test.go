package audit

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// newTenRecordLog writes a closed, verified log of 10 records, 1s apart.
func newTenRecordLog(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.db")
	l, err := Open(path, Options{Node: "n", Now: stepClock(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC), time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Verified now, before a caller tampers with it: a problem found later
	// is the caller's doing.
	mustVerify(t, path)
	return path
}

// tamper opens the bbolt file directly and edits it as an attacker would.
func tamper(t *testing.T, path string, fn func(records, hashes, meta *bolt.Bucket)) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		fn(tx.Bucket(bucketRecords), tx.Bucket(bucketHashes), tx.Bucket(bucketMeta))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func get(b *bolt.Bucket, seq uint64) []byte {
	return slices.Clone(b.Get(seqKey(seq)))
}

func put(t *testing.T, b *bolt.Bucket, seq uint64, v []byte) {
	t.Helper()
	if err := b.Put(seqKey(seq), v); err != nil {
		t.Fatal(err)
	}
}

func del(t *testing.T, b *bolt.Bucket, seq uint64) {
	t.Helper()
	if err := b.Delete(seqKey(seq)); err != nil {
		t.Fatal(err)
	}
}

func rawHash(t *testing.T, canon []byte) []byte {
	b, err := hex.DecodeString(HashRecord(canon))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kinds renders problems as sorted "kind@seq" strings.
func kinds(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s@%d", p.Kind, p.Seq))
	}
	slices.Sort(out)
	return out
}

func TestVerifyTamper(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, records, hashes, meta *bolt.Bucket)
		want   []string // exactly these problems, sorted
	}{
		{
			name: "flip one byte inside a string",
			tamper: func(t *testing.T, r, h, m *bolt.Bucket) {
				v := get(r, 5)
				i := len(`{"v":2,"seq":5,"event_id":"`)
				v[i] ^= 0x01 // still a valid record: only the hash catches it
				put(t, r, 5, v)
			},
			want: []string{"hash_mismatch@5", "tree_mismatch@5", "tree_root_mismatch@10"},
		},
		{
			// Only a writer of an older version could add a v1 record, and
			// an older custos refuses a log whose head is v2.
			name: "v1 record after v2 records",
			tamper: func(t *testing.T, r, h, m *bolt.Bucket) {
				rec, err := Decode(get(r, 5))
				if err != nil {
					t.Fatal(err)
				}
				rec.V, rec.Keys = FormatVersion1, nil
				canon := Encode(rec)
				put(t, r, 5, canon)
				put(t, h, 5, rawHash(t, canon))
			},
			want: []string{"chain_break@6", "tree_mismatch@5", "tree_root_mismatch@10", "version_regression@5"},
		},
		{
			name: "flip one structural byte",
			tamper: func(t *testing.T, r, h, m *bolt.Bucket) {
				v := get(r, 5)
				v[0] = '['
				put(t, r, 5, v)
			},
			want: []string{"hash_mismatch@5", "non_canonical@5", "tree_mismatch@5", "tree_root_mismatch@10"},
		},
		{
			name: "rewrite a record and its stored hash",
			tamper: func(t *testing.T, r, h, m *bolt.Bucket) {
				rec, err := Decode(get(r, 5))
				if err != nil {
					t.Fatal(err)
				}
				rec.Outcome = OutcomeDeny
				canon := Encode(rec)
				put(t, r, 5, canon)
				put(t, h, 5, rawHash(t, canon))
			},
			want: []string{"chain_break@6", "tree_mismatch@5", "tree_root_mismatch@10"},
		},
		{
			name: "delete a record and its hash",
			tamper: func(t *testing.T, r, h, m *bolt.Bucket) {
				del(t, r, 5)
				del(t, h, 5)
			},
			want: []string{"chain_break@6", "seq_gap@5", "tree_root_mismatch@10"},
		},
		{
			name: "delete only the record",
			tamper: func(t *testing.T, r, h, m *bolt.Bucket) {
				del(t, r, 5)
			},
			want: []string{"chain_break@6", "missing_record@5", "seq_gap@5", "tree_root_mismatch@10"},
		},
		{
			name: "delete the first record",
			tamper: func(t *testing.T, r, h, m *bolt.Bucket) {
				del(t, r, 1)
				del(t, h, 1)
			},
			want: []string{"chain_break@2", "seq_gap@1", "tree_root_mismatch@10"},
		},
		{
			name: "delete a stored hash",
			tamper: func(t *testing.T, r, h, m *bolt.Bucket) {
				del(t, h, 7)
			},
			want: []string{"missing_hash@7"},
		},
		{
			name: "swap two records",
			tamper: func(t *testing.T, r, h, m *bolt.Bucket) {
				a, b := get(r, 3), get(r, 4)
				put(t, r, 3, b)
				put(t, r, 4, a)
			},
			want: []string{
				"chain_break@3", "chain_break@4", "hash_mismatch@3", "hash_mismatch@4",
				"seq_mismatch@3", "seq_mismatch@4", "time_regression@4",
				"tree_mismatch@3", "tree_mismatch@4", "tree_root_mismatch@10",
			},
		},
		{
			name: "truncate the head",
			tamper: func(t *testing.T, r, h, m *bolt.Bucket) {
				del(t, r, 10)
				del(t, h, 10)
			},
			want: []string{"head_mismatch@10", "tree_root_mismatch@10"},
		},
		{
			name: "insert a record past the head",
			tamper: func(t *testing.T, r, h, m *bolt.Bucket) {
				rec, err := Decode(get(r, 10))
				if err != nil {
					t.Fatal(err)
				}
				rec.Seq, rec.PrevHash = 11, rec.Hash
				canon := Encode(rec)
				put(t, r, 11, canon)
				put(t, h, 11, rawHash(t, canon))
			},
			want: []string{"head_mismatch@10", "tree_mismatch@11"},
		},
		{
			name: "backdate a record",
			tamper: func(t *testing.T, r, h, m *bolt.Bucket) {
				rec, err := Decode(get(r, 6))
				if err != nil {
					t.Fatal(err)
				}
				rec.Time = rec.Time.Add(-time.Hour)
				canon := Encode(rec)
				put(t, r, 6, canon)
				put(t, h, 6, rawHash(t, canon))
			},
			want: []string{"chain_break@7", "time_regression@6", "tree_mismatch@6", "tree_root_mismatch@10"},
		},
		{
			name: "two tampered records",
			tamper: func(t *testing.T, r, h, m *bolt.Bucket) {
				for _, seq := range []uint64{2, 8} {
					v := get(r, seq)
					i := len(v) - len(`0"}`) // last hex digit of prev_hash
					if v[i] == '0' {
						v[i] = '1'
					} else {
						v[i] = '0'
					}
					put(t, r, seq, v)
				}
			},
			want: []string{
				"chain_break@2", "chain_break@8", "hash_mismatch@2", "hash_mismatch@8",
				"tree_mismatch@2", "tree_mismatch@8", "tree_root_mismatch@10",
			},
		},
		{
			name: "meta head hash changed",
			tamper: func(t *testing.T, r, h, m *bolt.Bucket) {
				if err := m.Put(metaHeadHash, make([]byte, 32)); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"head_mismatch@10"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := newTenRecordLog(t)
			tamper(t, path, func(r, h, m *bolt.Bucket) { c.tamper(t, r, h, m) })
			ps, _ := collect(t, path)
			if got := kinds(ps); !slices.Equal(got, c.want) {
				t.Errorf("problems = %v\nwant %v", got, c.want)
				for _, p := range ps {
					t.Log(p)
				}
			}
		})
	}
}

// TestVerifyEveryByte flips single bytes across a record (a sample of
// offsets) and checks that every flip is found and blamed on that record
// alone, apart from the tree root (seq 10: the tree size), which no longer
// matches the records.
func TestVerifyEveryByte(t *testing.T) {
	path := newTenRecordLog(t)
	var orig []byte
	tamper(t, path, func(r, h, m *bolt.Bucket) { orig = get(r, 4) })
	for i := 0; i < len(orig); i += 11 {
		tamper(t, path, func(r, h, m *bolt.Bucket) {
			v := slices.Clone(orig)
			v[i] ^= 0x20
			put(t, r, 4, v)
		})
		ps, _ := collect(t, path)
		if len(ps) == 0 {
			t.Fatalf("flip at offset %d not detected", i)
		}
		for _, p := range ps {
			if p.Seq != 4 && (p.Seq != 10 || p.Kind != KindTreeRootMismatch) {
				t.Fatalf("flip at offset %d of record 4 blamed on %s", i, p)
			}
		}
		for _, want := range []string{"hash_mismatch@4", "tree_mismatch@4", "tree_root_mismatch@10"} {
			if !slices.Contains(kinds(ps), want) {
				t.Fatalf("flip at offset %d: no %s: %v", i, want, kinds(ps))
			}
		}
	}
	tamper(t, path, func(r, h, m *bolt.Bucket) { put(t, r, 4, orig) })
	mustVerify(t, path)
}

func TestVerifyProblemEvidence(t *testing.T) {
	path := newTenRecordLog(t)
	var want string
	tamper(t, path, func(r, h, m *bolt.Bucket) {
		want = hex.EncodeToString(h.Get(seqKey(3)))
		v := get(r, 3)
		v[20] ^= 1
		put(t, r, 3, v)
	})
	ps, sum := collect(t, path)
	if len(ps) == 0 || ps[0].Kind != KindHashMismatch || ps[0].Expected != want || ps[0].Got == want || !isHash(ps[0].Got) {
		t.Fatalf("problems = %+v", ps)
	}
	if sum.Records != 10 || sum.HeadSeq != 10 || sum.Problems != len(ps) {
		t.Fatalf("summary = %+v", sum)
	}
}

func TestOpenRefusesCorruptHead(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, r, h, m *bolt.Bucket)
		kind   string
	}{
		{"flipped head byte", func(t *testing.T, r, h, m *bolt.Bucket) {
			v := get(r, 10)
			v[30] ^= 1
			put(t, r, 10, v)
		}, KindHashMismatch},
		{"truncated head", func(t *testing.T, r, h, m *bolt.Bucket) {
			del(t, r, 10)
			del(t, h, 10)
		}, KindHeadMismatch},
		{"non-canonical head", func(t *testing.T, r, h, m *bolt.Bucket) {
			put(t, r, 10, append(get(r, 10), ' '))
		}, KindNonCanonical},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := newTenRecordLog(t)
			tamper(t, path, func(r, h, m *bolt.Bucket) { c.tamper(t, r, h, m) })
			_, err := Open(path, Options{Node: "n"})
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
				t.Fatalf("Open = %v, want *CorruptError", err)
			}
			if ce.Seq != 10 || ce.Kind != c.kind {
				t.Fatalf("CorruptError = %+v, want seq 10 kind %s", ce, c.kind)
			}
		})
	}
}

func TestVerifyContextCanceled(t *testing.T) {
	path := newTenRecordLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := VerifyFile(ctx, path, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("VerifyFile = %v, want context.Canceled", err)
	}
}

// TestVerifyChunks crosses several read-transaction chunks.
func TestVerifyChunks(t *testing.T) {
	l, path := mustOpen(t, Options{})
	const n = 2*verifyChunk + 7
	appendConcurrently(t, l, n)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	sum := mustVerify(t, path)
	if sum.Records != n || sum.HeadSeq != n {
		t.Fatalf("summary = %+v, want %d records", sum, n)
	}
	// A tamper in the middle chunk is found and named.
	tamper(t, path, func(r, h, m *bolt.Bucket) {
		v := get(r, verifyChunk+1)
		v[40] ^= 1
		put(t, r, verifyChunk+1, v)
	})
	ps, _ := collect(t, path)
	want := []string{
		fmt.Sprintf("hash_mismatch@%d", verifyChunk+1),
		fmt.Sprintf("tree_mismatch@%d", verifyChunk+1),
		fmt.Sprintf("tree_root_mismatch@%d", n),
	}
	if got := kinds(ps); !slices.Equal(got, want) {
		t.Fatalf("problems = %v", got)
	}
	tamper(t, path, func(r, h, m *bolt.Bucket) {
		v := get(r, verifyChunk+1)
		v[40] ^= 1
		put(t, r, verifyChunk+1, v)
	})
}

// appendConcurrently appends sampleEntry(0..n-1) from 64 goroutines, so
// that records are group-committed in arbitrary order.
func appendConcurrently(tb testing.TB, l *Log, n int) {
	tb.Helper()
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 64 {
				if _, err := l.Append(context.Background(), sampleEntry(i)); err != nil {
					tb.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
