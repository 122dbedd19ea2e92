package audit

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// TestDamagedSegmentFile: an audit.db that bbolt cannot open because it is
// damaged is refused by Open, unchanged, as ErrCorrupt (kind
// segment_damaged, with bbolt's sentinel for a meta page at fault), and
// reported by VerifyFile as a problem, not an error. Before, a truncated
// file killed the process (SIGBUS in bbolt.Open), random bytes or bad meta
// pages were an error ("invalid database": no verdict), and an empty file
// was made a new log by Open.
func TestDamagedSegmentFile(t *testing.T) {
	l, good := mustOpen(t, Options{})
	appendN(t, l, 5) // each committed, fsynced: the file is whole
	orig, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	ps := os.Getpagesize()
	flip := func(b []byte, offs ...int) []byte {
		b = bytes.Clone(b)
		for _, o := range offs {
			b[o] ^= 0x01
		}
		return b
	}
	random := make([]byte, 64<<10)
	rand.Read(random)
	for _, tc := range []struct {
		name  string
		bytes []byte
		cause error // the bbolt sentinel the error wraps, if any
		got   string
	}{
		{"empty", nil, berrors.ErrInvalid, "an empty file"},
		{"shorter than a meta page", orig[:50], berrors.ErrInvalid, "page 0: invalid database; page 1: invalid database (50 bytes)"},
		{"truncated after meta page 0", orig[:100], nil, "100 bytes (truncated)"},
		{"truncated after the meta pages", orig[:2*ps], nil, "(truncated)"},
		{"truncated mid-page", orig[:3*ps+17], nil, "(truncated)"},
		{"random bytes", random, berrors.ErrInvalid, "page 0: invalid database"},
		{"both meta pages flipped", flip(orig, 16+24, ps+16+24), berrors.ErrChecksum, "page 0: checksum error; page 1: checksum error"},
		{"both versions changed", flip(orig, 16+4, ps+16+4), berrors.ErrVersionMismatch, "page 0: version mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.db")
			if err := os.WriteFile(path, tc.bytes, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path, Options{Node: "node-test"})
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Kind != KindSegmentDamaged {
				t.Fatalf("Open = %v, want a segment_damaged ErrCorrupt", err)
			}
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Errorf("Open = %v, want it to wrap %v", err, tc.cause)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, tc.bytes) {
				t.Errorf("Open changed the file: %d bytes, was %d", len(after), len(tc.bytes))
			}
			var got []Problem
			sum, err := VerifyFile(context.Background(), path, func(p Problem) { got = append(got, p) })
			if err != nil {
				t.Fatalf("VerifyFile = %v, want the damage reported as a problem", err)
			}
			if len(got) != 1 || got[0].Kind != KindSegmentDamaged || sum.Problems != 1 {
				t.Fatalf("VerifyFile problems = %+v (summary %d), want one segment_damaged", got, sum.Problems)
			}
			if p := got[0]; !bytes.Contains([]byte(p.Got), []byte(tc.got)) || !bytes.Contains([]byte(p.Detail), []byte(path)) {
				t.Errorf("problem = %+v, want got to say %q and the detail to name %s", p, tc.got, path)
			}
		})
	}

	// One meta page flipped: bbolt opens the other (its crash recovery),
	// so the file is not damaged as far as opening goes.
	t.Run("one meta page flipped", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "audit.db")
		if err := os.WriteFile(path, flip(orig, 16+24), 0o600); err != nil {
			t.Fatal(err)
		}
		ps, _ := collect(t, path)
		for _, p := range ps {
			if p.Kind == KindSegmentDamaged {
				t.Errorf("one invalid meta page reported as %s", p)
			}
		}
	})

	// A file that cannot be read is no evidence either way: an error.
	t.Run("a directory in its place", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "audit.db")
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		var got []Problem
		if _, err := VerifyFile(context.Background(), path, func(p Problem) { got = append(got, p) }); err == nil || len(got) != 0 {
			t.Errorf("VerifyFile = %v with problems %v, want an error and no problem", err, got)
		}
	})
}

// TestBoltFileOfAnotherPageSize: checkBoltFile finds meta page 1 where
// bbolt does (db.go: at page 0's page size, or probing 1 KiB, 2 KiB, ...
// when page 0 is invalid), so that a file written with pages of another
// size than this machine's is judged as bbolt opens it: whole, with
// either meta page torn (a crash during a commit), and truncated below
// its newest meta page's pages. It looked for page 1 at this machine's
// page size (at least 4 KiB) only: a file of 1, 8, 16 or 64 KiB pages
// whose page 0 was torn was refused although bbolt opens it, and one of
// 1 KiB pages cut short of its newest meta page's pages passed (meta
// page 1 unseen) and faulted in bbolt.
func TestBoltFileOfAnotherPageSize(t *testing.T) {
	for _, ps := range []int{1024, 4096, 8192, 16384, 65536} {
		dir := t.TempDir()
		orig := filepath.Join(dir, "orig.db")
		db, err := bolt.Open(orig, 0o600, &bolt.Options{PageSize: ps})
		if err != nil {
			t.Fatal(err)
		}
		// Four transactions after bbolt's two initial ones: the newest
		// meta page is page 1 (txid 5), and each moved the high-water
		// mark (pgid).
		for i := range 4 {
			if err := db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte("b"))
				if err != nil {
					return err
				}
				return b.Put([]byte{byte(i)}, bytes.Repeat([]byte{byte(i)}, 3*ps))
			}); err != nil {
				t.Fatal(err)
			}
		}
		var pgid int64 // the newest meta page's high-water mark
		db.View(func(tx *bolt.Tx) error { pgid = tx.Size() / int64(ps); return nil })
		db.Close()
		whole, err := os.ReadFile(orig)
		if err != nil {
			t.Fatal(err)
		}
		torn := func(page int) []byte {
			b := bytes.Clone(whole)
			b[page*ps+16+24] ^= 1 // the root bucket's page id: the checksum no longer matches
			return b
		}
		for _, c := range []struct {
			name    string
			bytes   []byte
			damaged bool
		}{
			{"whole", whole, false},
			{"page 0 torn", torn(0), false},
			{"page 1 torn (the newest)", torn(1), false},
			{"truncated", whole[:(pgid-1)*int64(ps)], true},
			{"page 0 torn, truncated", torn(0)[:(pgid-1)*int64(ps)], true},
		} {
			t.Run(fmt.Sprintf("%d/%s", ps, c.name), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "seg.db")
				if err := os.WriteFile(path, c.bytes, 0o600); err != nil {
					t.Fatal(err)
				}
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				err = checkBoltFile(f, int64(len(c.bytes)), path)
				if !c.damaged {
					if err != nil {
						t.Fatalf("checkBoltFile = %v, want nil", err)
					}
					db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
					if err != nil {
						t.Fatalf("bbolt does not open it either: %v", err)
					}
					db.Close()
					return
				}
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.Kind != KindSegmentDamaged {
					t.Fatalf("checkBoltFile = %v, want segment_damaged", err)
				}
			})
		}
	}
}

// TestKilledFirstStartSaysWhatToDo: a kill during a new log's first start
// can leave audit.db as bbolt had begun to create it: empty (the file made,
// nothing written), only its first meta page (part of bbolt's first
// write), or zeros (the file extended, its pages not on disk). Open
// refuses it, as it must refuse a log emptied by someone, and its error
// names the file and both ways out: move it aside and start again if no
// record was ever written, otherwise restore from a backup. A damaged log
// past its first start is told only to restore. Before, the error said
// only that the file was damaged, truncated or replaced, and the
// operator's guide had no word on it.
func TestKilledFirstStartSaysWhatToDo(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	db, err := bolt.Open(fresh, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	initial, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	l, written := mustOpen(t, Options{})
	appendN(t, l, 3)
	used, err := os.ReadFile(written)
	if err != nil {
		t.Fatal(err)
	}
	ps := os.Getpagesize()
	for _, c := range []struct {
		name       string
		bytes      []byte
		firstStart bool
	}{
		{"empty", nil, true},
		{"first meta page only", initial[:ps], true},
		{"zeros", make([]byte, 4*ps), true},
		{"a written log truncated", used[:3*ps], false},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.db")
			if err := os.WriteFile(path, c.bytes, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path, Options{Node: "node-test"})
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "restore the file from a backup") {
				t.Fatalf("Open = %v, want an error naming %s and saying to restore it", err, path)
			}
			if got := strings.Contains(err.Error(), "move the file aside and start again"); got != c.firstStart {
				t.Errorf("Open = %v: says to start again: %v, want %v", err, got, c.firstStart)
			}
			if c.firstStart {
				if err := os.Rename(path, path+".killed"); err != nil {
					t.Fatal(err)
				}
				mustOpenPath(t, path, Options{})
			}
		})
	}
}

// TestEveryDamagedSegmentIsNamed: when several segment files are damaged,
// VerifyFile reports a segment_damaged problem for each, and Open's error
// names each file, so that an auditor restoring them from a backup has
// the whole list at once. Before, both stopped at the first damaged file
// they opened (the live one, or the lowest sealed number) and named only
// it.
func TestEveryDamagedSegmentIsNamed(t *testing.T) {
	path := writeSegmented(t, 3, 3, 3, 2)
	sealed := SealedDir(path)
	damaged := []string{filepath.Join(sealed, SegmentFile(1)), filepath.Join(sealed, SegmentFile(3)), path}
	for _, f := range damaged {
		if err := os.Chmod(f, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o600); err != nil { // emptied
			t.Fatal(err)
		}
	}
	var got []Problem
	sum, err := VerifyFile(context.Background(), path, func(p Problem) { got = append(got, p) })
	if err != nil {
		t.Fatalf("VerifyFile = %v, want the damage reported as problems", err)
	}
	if sum.Problems != len(damaged) || len(got) != len(damaged) {
		t.Fatalf("VerifyFile reported %d problems (summary %d): %v, want one for each of %v", len(got), sum.Problems, got, damaged)
	}
	for i, f := range damaged {
		if got[i].Kind != KindSegmentDamaged || !strings.Contains(got[i].Detail, f) {
			t.Errorf("problem %d = %s, want segment_damaged naming %s", i, got[i], f)
		}
	}
	_, err = Open(path, Options{Node: "n"})
	var ce *CorruptError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Kind != KindSegmentDamaged {
		t.Fatalf("Open = %v, want a segment_damaged ErrCorrupt", err)
	}
	for _, f := range damaged {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("Open = %v, want it to name %s", err, f)
		}
	}
	if _, err := ExportFile(context.Background(), path, io.Discard, FormatJSONL, Filter{}); err == nil || !strings.Contains(err.Error(), damaged[1]) {
		t.Errorf("ExportFile = %v, want it to name %s", err, damaged[1])
	}
}

// TestDamagedSealedLogSaysOnlyRestore: a log with a sealed segment had
// records, so no damaged file of it is what a kill during the log's first
// start leaves, whatever it looks like (empty, zeros): Open's error and
// VerifyFile's problems say to keep it as evidence and restore it from a
// backup, never to move it aside and start again. Before, an emptied
// sealed segment (or the live one beside sealed ones) got the first-start
// advice, alone or among several damaged files: followed, it moved the
// evidence aside and started a log that does not follow the sealed ones.
// And a writable damaged sealed segment (readOnlySealed) was named alone,
// not with the other damaged files.
func TestDamagedSealedLogSaysOnlyRestore(t *testing.T) {
	for _, c := range []struct {
		name    string
		damaged []int // sealed segment numbers; 0: the live file
	}{
		{"one sealed segment emptied", []int{2}},
		{"the live segment emptied beside sealed ones", []int{0}},
		{"a sealed and the live segment emptied", []int{1, 0}},
		{"two sealed segments emptied", []int{1, 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeSegmented(t, 3, 3, 3, 2)
			for _, no := range c.damaged {
				f := path
				if no > 0 {
					f = filepath.Join(SealedDir(path), SegmentFile(uint64(no)))
				}
				if err := os.Chmod(f, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Open(path, Options{Node: "n"})
			if err == nil || !strings.Contains(err.Error(), "restore the file from a backup") || strings.Contains(err.Error(), "move the file aside") {
				t.Errorf("Open = %v, want only the advice to restore from a backup", err)
			}
			for _, no := range c.damaged {
				if f := filepath.Join(SealedDir(path), SegmentFile(uint64(no))); no > 0 && (err == nil || !strings.Contains(err.Error(), f)) {
					t.Errorf("Open = %v, want it to name %s", err, f)
				}
			}
			var got []Problem
			if _, err := VerifyFile(context.Background(), path, func(p Problem) { got = append(got, p) }); err != nil {
				t.Fatalf("VerifyFile = %v", err)
			}
			if len(got) != len(c.damaged) {
				t.Fatalf("VerifyFile reported %v, want %d problems", got, len(c.damaged))
			}
			for _, p := range got {
				if !strings.Contains(p.Detail, "restore the file from a backup") || strings.Contains(p.Detail, "move the file aside") {
					t.Errorf("problem %s, want only the advice to restore from a backup", p)
				}
			}
		})
	}
}
