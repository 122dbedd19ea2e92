package checkpoint

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// rollbackCase: anchor dir with checkpoints 10, 20, 30 of tree "a"; a
// restored tree of the first 15 records plus the restore's own record.
func rollbackCase(t *testing.T) (a *Anchor, restored *memTree, s *Signer, v note.Verifiers) {
	t.Helper()
	s, _, v = testSigner(t)
	old := newTree("a", 30)
	a = &Anchor{Dir: t.TempDir()}
	for _, size := range []int64{10, 20, 30} {
		e := signedEntry(t, s, old, size)
		if err := a.Append(context.Background(), e.Note, Checkpoint{Origin: testOrigin, Size: e.Size, Root: e.Root}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	restored = newTree("a", 15)
	restored.add([]byte("restore record"))
	return a, restored, s, v
}

// ack signs the acknowledgement of restored (From = its size - 1) behind
// old size 30 and returns its anchor entry.
func ack(t *testing.T, s *Signer, restored *memTree, from, behind int64) Entry {
	t.Helper()
	e := signedEntry(t, s, restored, from+1)
	fromRoot, _ := restored.TreeHash(from)
	r := Rollback{Origin: testOrigin, From: from, FromRoot: fromRoot, Behind: behind, To: from + 1, ToRoot: e.Root,
		Record: strings.Repeat("ab", 32)}
	n, err := SignRollback(r, s)
	if err != nil {
		t.Fatal(err)
	}
	r.Note = n
	e.Rollback, e.Time = &r, time.Now()
	return e
}

func TestAnAcknowledgedRollbackIsAcceptedOnlyWhenSigned(t *testing.T) {
	ctx := context.Background()
	a, restored, s, v := rollbackCase(t)
	es, err := Load(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckAgainst(ctx, restored, es, v); !errors.Is(err, ErrRolledBack) {
		t.Fatalf("unacknowledged: %v, want ErrRolledBack", err)
	}

	if err := a.AppendRollback(ctx, ack(t, s, restored, 15, 30)); err != nil {
		t.Fatal(err)
	}
	es, err = Load(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Size != 10 || es[1].Size != 16 || es[1].Rollback == nil {
		t.Fatalf("current entries %+v, want 10 and the acknowledgement at 16", es)
	}
	if err := CheckAgainst(ctx, restored, es, v); err != nil {
		t.Fatalf("acknowledged: %v", err)
	}
	// The log grows on; a new checkpoint after the acknowledgement.
	restored.grow("new", 30)
	e := signedEntry(t, s, restored, restored.size())
	if err := a.Append(ctx, e.Note, Checkpoint{Origin: testOrigin, Size: e.Size, Root: e.Root}, time.Now()); err != nil {
		t.Fatal(err)
	}
	es, err = Load(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckAgainst(ctx, restored, es, v); err != nil {
		t.Fatalf("after growing past the old size: %v", err)
	}
	// A checkpoint of the old history appended after the acknowledgement
	// is a regression.
	old := newTree("a", 30)
	oe := signedEntry(t, s, old, 30)
	if err := a.Append(ctx, oe.Note, Checkpoint{Origin: testOrigin, Size: 30, Root: oe.Root}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(a); !errors.Is(err, ErrRolledBack) {
		t.Fatalf("old history after the acknowledgement: %v", err)
	}
}

func TestABadAcknowledgementIsRefused(t *testing.T) {
	ctx := context.Background()
	t.Run("other key", func(t *testing.T) {
		a, restored, _, v := rollbackCase(t)
		other, _, err := NewSigner(ctx, testOrigin, newFakeKS(9))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.AppendRollback(ctx, ack(t, other, restored, 15, 30)); err != nil {
			t.Fatal(err)
		}
		es, err := Load(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckAgainst(ctx, restored, es, v); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("forged acknowledgement: %v", err)
		}
	})
	t.Run("behind too small", func(t *testing.T) {
		a, restored, s, _ := rollbackCase(t)
		if err := a.AppendRollback(ctx, ack(t, s, restored, 15, 25)); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(a); !errors.Is(err, ErrRolledBack) {
			t.Fatalf("acknowledgement that does not cover size 30: %v", err)
		}
	})
	t.Run("other history", func(t *testing.T) {
		a, _, s, v := rollbackCase(t)
		forked := newTree("b", 15)
		forked.add([]byte("restore record"))
		if err := a.AppendRollback(ctx, ack(t, s, forked, 15, 30)); err != nil {
			t.Fatal(err)
		}
		es, err := Load(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckAgainst(ctx, forked, es, v); !errors.Is(err, ErrFork) {
			t.Fatalf("restored log that is not a prefix of the anchored one: %v", err)
		}
	})
	t.Run("acknowledgement of another line", func(t *testing.T) {
		_, restored, s, _ := rollbackCase(t)
		e := ack(t, s, restored, 15, 30)
		restored.add([]byte("one more"))
		e2 := signedEntry(t, s, restored, 17)
		e2.Rollback = e.Rollback
		b, err := FormatLine(e2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseLine(b); !errors.Is(err, ErrBadRollback) {
			t.Fatalf("an acknowledgement on another checkpoint's line parsed: %v", err)
		}
		if err := (&Anchor{Dir: t.TempDir()}).AppendRollback(context.Background(), e2); !errors.Is(err, ErrBadRollback) {
			t.Fatalf("AppendRollback of a mismatched line: %v", err)
		}
	})
}

func TestRollbackBodyIsCanonical(t *testing.T) {
	_, restored, s, v := rollbackCase(t)
	e := ack(t, s, restored, 15, 30)
	r, err := OpenRollback(e.Rollback.Note, v)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Marshal()) != string(e.Rollback.Marshal()) || r.From != 15 || r.Behind != 30 || r.To != 16 {
		t.Fatalf("round trip %+v", r)
	}
	body := string(r.Marshal())
	for _, bad := range []string{
		strings.Replace(body, "from 15", "from 015", 1),
		strings.Replace(body, "to 16", "to 17", 1),
		strings.Replace(body, rollbackTitle, "rollback", 1),
		body + "extra\n",
	} {
		if _, err := ParseRollback([]byte(bad)); !errors.Is(err, ErrBadRollback) && !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("accepted %q: %v", bad, err)
		}
	}
	// A checkpoint note is not an acknowledgement, nor the reverse.
	if _, err := OpenRollback(e.Note, v); err == nil {
		t.Error("a checkpoint opened as an acknowledgement")
	}
	if _, _, err := Open(e.Rollback.Note, v); err == nil {
		t.Error("an acknowledgement opened as a checkpoint")
	}
}
