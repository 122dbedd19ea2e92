package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/custos-mcp/custos/internal/syncbuf"
)

// refTree is transparency-dev/merkle's reference RFC 6962 tree over leaves.
func refTree(leaves [][]byte) *testonly.Tree {
	tr := testonly.New(rfc6962.DefaultHasher)
	tr.AppendData(leaves...)
	return tr
}

func hashesToBytes(hs []tlog.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

func toHash(t testing.TB, b []byte) tlog.Hash {
	t.Helper()
	var h tlog.Hash
	if len(b) != tlog.HashSize {
		t.Fatalf("hash of %d bytes", len(b))
	}
	copy(h[:], b)
	return h
}

// readAll returns every record's canonical bytes through Records.
func readAll(t testing.TB, l *Log) [][]byte {
	t.Helper()
	seq, _ := l.Head()
	if seq == 0 {
		return nil
	}
	var out [][]byte
	err := l.Records(context.Background(), 1, seq, func(s uint64, c []byte) error {
		if s != uint64(len(out))+1 {
			return fmt.Errorf("Records gave seq %d after %d records", s, len(out))
		}
		out = append(out, slices.Clone(c))
		return nil
	})
	if err != nil {
		t.Fatalf("Records: %v", err)
	}
	return out
}

// tamperTx edits the bbolt file directly in one write transaction.
func tamperTx(t testing.TB, path string, fn func(tx *bolt.Tx) error) {
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

// stripTree turns a log into one written before the Merkle tree existed:
// no tlog bucket, no meta tree_size.
func stripTree(t testing.TB, path string) {
	tamperTx(t, path, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketTree); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Delete(metaTreeSize)
	})
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = syncbuf.Buffer

func TestLeafHashFormula(t *testing.T) {
	for _, data := range [][]byte{nil, []byte("{}"), Encode(goldenRecords[1].rec)} {
		want := sha256.Sum256(append([]byte{0x00}, data...))
		if got := LeafHash(data); got != tlog.Hash(want) {
			t.Errorf("LeafHash(%q) = %x, want SHA-256(0x00 || data) = %x", data, got, want)
		}
		if got := rfc6962.DefaultHasher.HashLeaf(data); !bytes.Equal(got, want[:]) {
			t.Errorf("rfc6962 HashLeaf disagrees: %x", got)
		}
	}
}

func TestTreeHeadEmpty(t *testing.T) {
	l, _ := mustOpen(t, Options{})
	size, root, err := l.TreeHead(context.Background())
	empty := sha256.Sum256(nil)
	if err != nil || size != 0 || root != tlog.Hash(empty) {
		t.Fatalf("TreeHead of an empty log = %d %x %v, want 0 %x", size, root, err, empty)
	}
	if p, err := l.ProveTree(0, 0); err != nil || len(p) != 0 {
		t.Fatalf("ProveTree(0, 0) = %v, %v", p, err)
	}
}

// TestTreeAgainstTransparencyDev: for every size 1..64 the tree head, the
// tree hash, every inclusion proof and every consistency proof agree with
// transparency-dev/merkle's RFC 6962 implementation and verify with both
// its proof package and tlog's checkers.
func TestTreeAgainstTransparencyDev(t *testing.T) {
	const max = 64
	ctx := context.Background()
	l, _ := mustOpen(t, Options{})
	ref := testonly.New(rfc6962.DefaultHasher)
	for n := 1; n <= max; n++ {
		r, err := l.Append(ctx, sampleEntry(n))
		if err != nil {
			t.Fatal(err)
		}
		var canon []byte
		if err := l.Records(ctx, r.Seq, r.Seq, func(_ uint64, c []byte) error { canon = slices.Clone(c); return nil }); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(canon, Encode(r)) {
			t.Fatalf("record %d: stored bytes are not Encode(returned record)", r.Seq)
		}
		ref.AppendData(canon)
		size, root, err := l.TreeHead(ctx)
		if err != nil || size != int64(n) || !bytes.Equal(root[:], ref.Hash()) {
			t.Fatalf("after %d appends TreeHead = %d %x %v, want %d %x", n, size, root, err, n, ref.Hash())
		}
	}
	h := rfc6962.DefaultHasher
	for n := int64(1); n <= max; n++ {
		root, err := l.TreeHash(n)
		if err != nil {
			t.Fatal(err)
		}
		if want := ref.HashAt(uint64(n)); !bytes.Equal(root[:], want) {
			t.Fatalf("TreeHash(%d) = %x, want %x", n, root, want)
		}
		for i := int64(0); i < n; i++ {
			p, err := l.ProveRecord(uint64(i+1), n)
			if err != nil {
				t.Fatalf("ProveRecord(%d, %d): %v", i+1, n, err)
			}
			leaf := ref.LeafHash(uint64(i))
			if err := proof.VerifyInclusion(h, uint64(i), uint64(n), leaf, hashesToBytes(p), root[:]); err != nil {
				t.Fatalf("inclusion %d in %d: transparency-dev: %v", i, n, err)
			}
			if err := tlog.CheckRecord(p, n, root, i, toHash(t, leaf)); err != nil {
				t.Fatalf("inclusion %d in %d: tlog: %v", i, n, err)
			}
			want, err := ref.InclusionProof(uint64(i), uint64(n))
			if err != nil || !slices.EqualFunc(hashesToBytes(p), want, bytes.Equal) {
				t.Fatalf("inclusion %d in %d: proof differs from the reference (%v)", i, n, err)
			}
		}
		for m := int64(0); m <= n; m++ {
			p, err := l.ProveTree(m, n)
			if err != nil {
				t.Fatalf("ProveTree(%d, %d): %v", m, n, err)
			}
			oldRoot := ref.HashAt(uint64(m))
			if err := proof.VerifyConsistency(h, uint64(m), uint64(n), hashesToBytes(p), oldRoot, root[:]); err != nil {
				t.Fatalf("consistency %d -> %d: transparency-dev: %v", m, n, err)
			}
			if m > 0 {
				if err := tlog.CheckTree(p, n, root, m, toHash(t, oldRoot)); err != nil {
					t.Fatalf("consistency %d -> %d: tlog: %v", m, n, err)
				}
			}
			want, err := ref.ConsistencyProof(uint64(m), uint64(n))
			if err != nil || !slices.EqualFunc(hashesToBytes(p), want, bytes.Equal) {
				t.Fatalf("consistency %d -> %d: proof differs from the reference (%v)", m, n, err)
			}
		}
	}
	// A proof does not verify against another root or another leaf.
	p, err := l.ProveRecord(5, max)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := l.TreeHash(max)
	if err := tlog.CheckRecord(p, max, root, 4, toHash(t, ref.LeafHash(5))); err == nil {
		t.Fatal("inclusion proof of record 5 accepted the leaf of record 6")
	}
	// *Log is a tlog.HashReader.
	var r tlog.HashReader = l
	if got, err := tlog.TreeHash(max, r); err != nil || got != root {
		t.Fatalf("tlog.TreeHash over *Log = %x, %v", got, err)
	}
	// Verify recomputes the same root.
	sum, err := l.Verify(ctx, func(p Problem) { t.Error(p) })
	if err != nil || sum.TreeSize != max || sum.TreeRoot != root {
		t.Fatalf("Verify summary = %+v, %v; want tree %d %x", sum, err, max, root)
	}
}

func TestTreeOutOfRange(t *testing.T) {
	l, _ := mustOpen(t, Options{})
	appendN(t, l, 5)
	ctx := context.Background()
	nop := func(uint64, []byte) error { return nil }
	cases := []struct {
		name string
		call func() error
	}{
		{"TreeHash(-1)", func() error { _, err := l.TreeHash(-1); return err }},
		{"TreeHash(6)", func() error { _, err := l.TreeHash(6); return err }},
		{"ProveRecord(0, 5)", func() error { _, err := l.ProveRecord(0, 5); return err }},
		{"ProveRecord(6, 5)", func() error { _, err := l.ProveRecord(6, 5); return err }},
		{"ProveRecord(3, 6)", func() error { _, err := l.ProveRecord(3, 6); return err }},
		{"ProveRecord(max, 5)", func() error { _, err := l.ProveRecord(^uint64(0), 5); return err }},
		{"ProveRecord(1, -1)", func() error { _, err := l.ProveRecord(1, -1); return err }},
		{"ProveTree(3, 2)", func() error { _, err := l.ProveTree(3, 2); return err }},
		{"ProveTree(-1, 2)", func() error { _, err := l.ProveTree(-1, 2); return err }},
		{"ProveTree(2, 6)", func() error { _, err := l.ProveTree(2, 6); return err }},
		{"ReadHashes(past)", func() error { _, err := l.ReadHashes([]int64{0, tlog.StoredHashCount(5)}); return err }},
		{"ReadHashes(-1)", func() error { _, err := l.ReadHashes([]int64{-1}); return err }},
		{"Records(0, 1)", func() error { return l.Records(ctx, 0, 1, nop) }},
		{"Records(3, 2)", func() error { return l.Records(ctx, 3, 2, nop) }},
		{"Records(1, 6)", func() error { return l.Records(ctx, 1, 6, nop) }},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("%s = %v, want ErrOutOfRange", c.name, err)
		}
	}
	// In range: the stored hashes of a 5-record tree.
	idx := make([]int64, tlog.StoredHashCount(5))
	for i := range idx {
		idx[i] = int64(i)
	}
	if hs, err := l.ReadHashes(idx); err != nil || len(hs) != len(idx) {
		t.Fatalf("ReadHashes(all) = %d hashes, %v", len(hs), err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"TreeHead":    func() error { _, _, err := l.TreeHead(ctx); return err }(),
		"ProveRecord": func() error { _, err := l.ProveRecord(1, 1); return err }(),
		"Records":     l.Records(ctx, 1, 1, nop),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// TestRecordsExactBytes: Records yields exactly the stored bytes, in order,
// across read-transaction chunks, and stops at fn's error.
func TestRecordsExactBytes(t *testing.T) {
	defer func(c uint64) { recordsChunk = c }(recordsChunk)
	recordsChunk = 50
	l, _ := mustOpen(t, Options{})
	n := int(2*recordsChunk + 3)
	appendConcurrently(t, l, n)
	var buf bytesBuffer
	if _, err := l.Export(context.Background(), &buf, FormatJSONL, Filter{}); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, l)
	want := buf.lines()
	if len(got) != n || !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("Records gave %d records, differing from the %d exported lines", len(got), len(want))
	}
	var sub []uint64
	if err := l.Records(context.Background(), recordsChunk-1, recordsChunk+1, func(s uint64, _ []byte) error { sub = append(sub, s); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sub, []uint64{recordsChunk - 1, recordsChunk, recordsChunk + 1}) {
		t.Fatalf("Records(%d..%d) gave %v", recordsChunk-1, recordsChunk+1, sub)
	}
	stop := errors.New("stop")
	calls := 0
	if err := l.Records(context.Background(), 1, uint64(n), func(uint64, []byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("Records with a failing fn = %v after %d calls, want stop after 1", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Records(ctx, 1, uint64(n), func(uint64, []byte) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Records with a canceled ctx = %v", err)
	}
}

// TestRecordsMissing: a record missing inside the range is corruption with
// its seq, not a short read.
func TestRecordsMissing(t *testing.T) {
	path := newTenRecordLog(t)
	tamper(t, path, func(r, h, m *bolt.Bucket) { del(t, r, 4) })
	l, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var ce *CorruptError
	err = l.Records(context.Background(), 1, 10, func(uint64, []byte) error { return nil })
	if !errors.As(err, &ce) || ce.Seq != 4 || ce.Kind != KindSeqGap {
		t.Fatalf("Records over a deleted record = %v, want seq_gap at 4", err)
	}
}

// fileSum is the SHA-256 of a file's contents.
func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestTreeMigrationV1Fixture: the committed v1 log has no Merkle tree. Opened
// read-only it verifies its chain and reports that the tree is not built;
// opened read-write it is upgraded in place (records untouched) and its tree
// is the RFC 6962 tree over the fixture's exported lines.
func TestTreeMigrationV1Fixture(t *testing.T) {
	before := fileSum(t, v1Fixture)
	path, lines := copyV1Fixture(t)
	ctx := context.Background()

	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ro.TreeHead(ctx); !errors.Is(err, ErrNoTree) {
		t.Fatalf("TreeHead of an unmigrated log = %v, want ErrNoTree", err)
	}
	if _, err := ro.ProveRecord(1, 1); !errors.Is(err, ErrNoTree) {
		t.Fatalf("ProveRecord of an unmigrated log = %v, want ErrNoTree", err)
	}
	sum, err := ro.Verify(ctx, func(p Problem) { t.Errorf("unmigrated v1 log: %s", p) })
	if err != nil || sum.Records != 5 || sum.HeadSeq != 5 || sum.TreeSize != 0 || sum.Problems != 0 {
		t.Fatalf("Verify of the unmigrated log = %+v, %v", sum, err)
	}
	if got := readAll(t, ro); !slices.EqualFunc(got, lines, bytes.Equal) {
		t.Fatal("Records of the v1 log differ from its export")
	}
	if _, err := ro.Append(ctx, sampleEntry(1)); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Append on a read-only log = %v, want ErrReadOnly", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if fileSum(t, path) != before {
		t.Fatal("a read-only Open modified the file")
	}

	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	l := mustOpenPath(t, path, Options{Node: "node-v2", Logger: logger})
	size, root, err := l.TreeHead(ctx)
	if want := refTree(lines).Hash(); err != nil || size != 5 || !bytes.Equal(root[:], want) {
		t.Fatalf("migrated TreeHead = %d %x %v, want 5 %x", size, root, err, want)
	}
	for _, msg := range []string{"migration started", "migration finished"} {
		if !strings.Contains(logs.String(), msg) {
			t.Errorf("operational log lacks %q:\n%s", msg, logs.String())
		}
	}
	// The records are untouched and the log keeps growing, tree included.
	if got := readAll(t, l); !slices.EqualFunc(got, lines, bytes.Equal) {
		t.Fatal("migration changed the v1 records")
	}
	appendN(t, l, 2)
	all := readAll(t, l)
	if size, root, err = l.TreeHead(ctx); err != nil || size != 7 || !bytes.Equal(root[:], refTree(all).Hash()) {
		t.Fatalf("TreeHead after appends = %d %x %v", size, root, err)
	}
	p, err := l.ProveTree(5, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckTree(p, 7, root, 5, toHash(t, refTree(lines).Hash())); err != nil {
		t.Fatalf("the migrated tree does not extend the v1 tree: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A second Open has nothing to migrate.
	logs = syncBuffer{}
	l = mustOpenPath(t, path, Options{Node: "node-v2", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if strings.Contains(logs.String(), "migration") {
		t.Fatalf("second Open migrated again:\n%s", logs.String())
	}
	if fileSum(t, v1Fixture) != before {
		t.Fatal("the committed fixture was modified")
	}
}

// TestTreeMigrationChunked: a log stripped of its tree (as written before
// the tree existed) is migrated in chunks, each logged, and resumes from a
// partially built tree; the result is the tree the appends had built.
func TestTreeMigrationChunked(t *testing.T) {
	defer func(c int64) { migrateChunk = c }(migrateChunk)
	migrateChunk = 4
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit.db")
	l, err := Open(path, Options{Node: "n"})
	if err != nil {
		t.Fatal(err)
	}
	appendConcurrently(t, l, 23)
	_, want, err := l.TreeHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	stripTree(t, path)
	var logs syncBuffer
	l, err = Open(path, Options{Node: "n", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if size, root, err := l.TreeHead(ctx); err != nil || size != 23 || root != want {
		t.Fatalf("TreeHead after migration = %d %x %v, want 23 %x", size, root, err, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "migration progress"); n != 5 { // 4, 8, ..., 20; then 23 finished
		t.Errorf("%d progress lines, want 5:\n%s", n, logs.String())
	}

	// Interrupted migration: the tree covers 9 records (as a crash after
	// the third chunk's commit would leave it). A read-only Open serves the
	// built prefix and verifies; a read-write Open resumes at 9.
	stripTree(t, path)
	tamperTx(t, path, func(tx *bolt.Tx) error {
		tree, err := tx.CreateBucket(bucketTree)
		if err != nil {
			return err
		}
		records := tx.Bucket(bucketRecords)
		for n := int64(0); n < 9; n++ {
			if err := putStoredHashes(tree, n, records.Get(seqKey(uint64(n)+1))); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaTreeSize, seqKey(9))
	})
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ro.TreeHead(ctx); !errors.Is(err, ErrNoTree) {
		t.Fatalf("TreeHead of a partly migrated log = %v, want ErrNoTree", err)
	}
	root9, err := ro.TreeHash(9)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := ro.Verify(ctx, func(p Problem) { t.Errorf("partly migrated: %s", p) })
	if err != nil || sum.TreeSize != 9 || sum.TreeRoot != root9 || sum.HeadSeq != 23 {
		t.Fatalf("Verify of a partly migrated log = %+v, %v", sum, err)
	}
	if _, err := ro.TreeHash(10); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("TreeHash past the built tree = %v", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	logs = syncBuffer{}
	l = mustOpenPath(t, path, Options{Node: "n", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if size, root, err := l.TreeHead(ctx); err != nil || size != 23 || root != want {
		t.Fatalf("TreeHead after resumed migration = %d %x %v, want 23 %x", size, root, err, want)
	}
	if !strings.Contains(logs.String(), "tree_size=9") {
		t.Errorf("migration did not resume at 9:\n%s", logs.String())
	}
}

// TestTreeMigrationRefusesConflicts: migration never overwrites a stored
// hash, and refuses a tree larger than the log.
func TestTreeMigrationRefusesConflicts(t *testing.T) {
	path := newTenRecordLog(t)
	stripTree(t, path)
	tamperTx(t, path, func(tx *bolt.Tx) error {
		tree, err := tx.CreateBucket(bucketTree)
		if err != nil {
			return err
		}
		if err := tree.Put(treeKey(tlog.StoredHashIndex(0, 2)), make([]byte, 32)); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaTreeSize, seqKey(0))
	})
	var ce *CorruptError
	if _, err := Open(path, Options{Node: "n"}); !errors.As(err, &ce) || ce.Kind != KindTreeMismatch || ce.Seq != 3 {
		t.Fatalf("Open over a conflicting stored hash = %v, want tree_mismatch at 3", err)
	}

	path = newTenRecordLog(t)
	tamperTx(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaTreeSize, seqKey(11)) })
	if _, err := Open(path, Options{Node: "n"}); !errors.As(err, &ce) || ce.Kind != KindTreeRootMismatch {
		t.Fatalf("Open with tree_size past the head = %v, want tree_root_mismatch", err)
	}
}

// TestVerifyTreeTamper: changes to the stored Merkle tree alone are found
// and blamed on the record whose append stored the hash.
func TestVerifyTreeTamper(t *testing.T) {
	putIdx := func(tx *bolt.Tx, i int64, v []byte) error { return tx.Bucket(bucketTree).Put(treeKey(i), v) }
	flip := func(tx *bolt.Tx, i int64) error {
		v := slices.Clone(tx.Bucket(bucketTree).Get(treeKey(i)))
		v[7] ^= 0x10
		return putIdx(tx, i, v)
	}
	cases := []struct {
		name   string
		tamper func(tx *bolt.Tx) error
		want   []string
	}{
		{"leaf hash of record 5", func(tx *bolt.Tx) error { return flip(tx, tlog.StoredHashIndex(0, 4)) },
			// record 6 stored the parent of leaves 4 and 5
			[]string{"tree_mismatch@5", "tree_mismatch@6"}},
		{"interior node over records 1..8", func(tx *bolt.Tx) error { return flip(tx, tlog.StoredHashIndex(3, 0)) },
			// the root of the 10-record tree is built on it
			[]string{"tree_mismatch@8", "tree_root_mismatch@10"}},
		{"node over records 9..10", func(tx *bolt.Tx) error { return flip(tx, tlog.StoredHashIndex(1, 4)) },
			[]string{"tree_mismatch@10", "tree_root_mismatch@10"}},
		{"deleted leaf hash", func(tx *bolt.Tx) error { return tx.Bucket(bucketTree).Delete(treeKey(tlog.StoredHashIndex(0, 6))) },
			[]string{"tree_mismatch@7"}},
		{"truncated hash", func(tx *bolt.Tx) error { return putIdx(tx, tlog.StoredHashIndex(0, 1), make([]byte, 31)) },
			[]string{"tree_mismatch@2"}}, // the parent over it cannot be checked
		{"stored hash past the tree", func(tx *bolt.Tx) error { return putIdx(tx, tlog.StoredHashCount(10), make([]byte, 32)) },
			[]string{"tree_mismatch@11"}},
		{"tree_size lowered", func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaTreeSize, seqKey(9)) },
			[]string{"tree_mismatch@10"}},
		{"tree_size raised", func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaTreeSize, seqKey(11)) },
			[]string{"tree_root_mismatch@11"}},
		{"tlog bucket deleted", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketTree) },
			[]string{"tree_root_mismatch@0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := newTenRecordLog(t)
			tamperTx(t, path, c.tamper)
			ps, _ := collect(t, path)
			if got := kinds(ps); !slices.Equal(got, c.want) {
				t.Errorf("problems = %v\nwant %v", got, c.want)
				for _, p := range ps {
					t.Log(p)
				}
			}
			for _, p := range ps {
				if p.Kind == KindTreeMismatch && strings.Contains(p.Detail, "is not") && (!isHash(p.Expected) || !isHash(p.Got) || p.Expected == p.Got) {
					t.Errorf("problem without evidence: %+v", p)
				}
			}
		})
	}
}

// TestConcurrentAppendTree: 64 writers under -race, with append functions
// failing inside batches now and then (an unencodable clock reading), so
// that bbolt reruns the other functions of the batch: every rerun must
// recompute the stored hashes from its own transaction. The final tree is
// the one recomputed from the records, and every record's inclusion proof
// checks against the final head.
func TestConcurrentAppendTree(t *testing.T) {
	const writers, per = 64, 8
	var calls atomic.Int64
	now := func() time.Time {
		if calls.Add(1)%9 == 0 {
			return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		return time.Now()
	}
	ctx := context.Background()
	l, _ := mustOpen(t, Options{Now: now})
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if _, err := l.Append(ctx, sampleEntry(w*per+i)); err != nil {
					failed.Add(1)
					continue
				}
				ok.Add(1)
			}
		}()
	}
	// Readers of the tree run concurrently with the appends.
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			size, root, err := l.TreeHead(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if size > 0 {
				p, err := l.ProveRecord(uint64(size), size)
				if err != nil {
					t.Error(err)
					return
				}
				leaf, err := l.ReadHashes([]int64{tlog.StoredHashIndex(0, size-1)})
				if err != nil {
					t.Error(err)
					return
				}
				if err := tlog.CheckRecord(p, size, root, size-1, leaf[0]); err != nil {
					t.Errorf("concurrent inclusion proof at size %d: %v", size, err)
					return
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	rwg.Wait()
	t.Logf("%d ok, %d failed, %d clock calls", ok.Load(), failed.Load(), calls.Load())
	if failed.Load() == 0 || calls.Load() <= ok.Load()+failed.Load() {
		t.Fatal("no append function failed or was rerun: the test exercised nothing")
	}
	size, root, err := l.TreeHead(ctx)
	if err != nil || size != ok.Load() {
		t.Fatalf("TreeHead = %d, %v; %d appends succeeded", size, err, ok.Load())
	}
	leaves := readAll(t, l)
	ref := refTree(leaves)
	if !bytes.Equal(root[:], ref.Hash()) {
		t.Fatalf("tree root %x, recomputed from the records %x", root, ref.Hash())
	}
	// Every stored hash is the one a sequential build would have stored.
	var seq []tlog.Hash
	for n, leaf := range leaves {
		hs, err := tlog.StoredHashes(int64(n), leaf, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(idx))
			for i, x := range idx {
				out[i] = seq[x]
			}
			return out, nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		seq = append(seq, hs...)
	}
	idx := make([]int64, len(seq))
	for i := range idx {
		idx[i] = int64(i)
	}
	stored, err := l.ReadHashes(idx)
	if err != nil || !slices.Equal(stored, seq) {
		t.Fatalf("stored hashes differ from a sequential rebuild (%v)", err)
	}
	for s := int64(1); s <= size; s++ {
		p, err := l.ProveRecord(uint64(s), size)
		if err != nil {
			t.Fatal(err)
		}
		if err := tlog.CheckRecord(p, size, root, s-1, LeafHash(leaves[s-1])); err != nil {
			t.Fatalf("record %d: %v", s, err)
		}
	}
}

// TestReadOnlyOpen: shared lock, no writes, Node optional, a missing file
// refused, a writer's lock respected.
func TestReadOnlyOpen(t *testing.T) {
	path := newTenRecordLog(t)
	before := fileSum(t, path)
	a, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(path, Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("second read-only Open: %v", err)
	}
	if _, err := Open(path, Options{Node: "n", Timeout: 100 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-write Open next to readers = %v, want ErrLocked", err)
	}
	sa, ra, err1 := a.TreeHead(context.Background())
	sb, rb, err2 := b.TreeHead(context.Background())
	if err1 != nil || err2 != nil || sa != 10 || sb != 10 || ra != rb {
		t.Fatalf("TreeHead = %d %v / %d %v", sa, err1, sb, err2)
	}
	if _, err := a.Append(context.Background(), sampleEntry(1)); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Append = %v, want ErrReadOnly", err)
	}
	if err := errors.Join(a.Close(), b.Close()); err != nil {
		t.Fatal(err)
	}
	if fileSum(t, path) != before {
		t.Fatal("read-only use modified the file")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.db"), Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only Open of a missing file succeeded")
	}
	mustOpenPath(t, path, Options{Node: "n"})
	if _, err := Open(path, Options{ReadOnly: true, Timeout: 100 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only Open next to a writer = %v, want ErrLocked", err)
	}
}

// TestFrontierRoot: the verifier's incremental root (frontier) equals the
// reference RFC 6962 root at every size 0..70.
func TestFrontierRoot(t *testing.T) {
	var f frontier
	var leaves [][]byte
	for n := 0; n <= 70; n++ {
		if got, want := f.root(), refTree(leaves).Hash(); !bytes.Equal(got[:], want) {
			t.Fatalf("size %d: frontier root %x, want %x", n, got, want)
		}
		leaf := []byte(fmt.Sprintf("leaf %d", n))
		leaves = append(leaves, leaf)
		f.push(LeafHash(leaf))
	}
}
