package audit

import (
	"context"
	"testing"
)

// TestTreeHeadCoversOnlyDurableRecords: bbolt makes a commit's meta page
// visible to new read transactions (through the mmap) before its fdatasync
// returns, so TreeHead, read in a transaction, could count records whose
// commit was not yet durable, and the checkpointer signed and anchored that
// size: after a power loss in that window the log was shorter than its
// anchored checkpoint, and serve refused to start as if it had been rolled
// back (found by probe-auditor). TreeHead now stops at the head of the last
// commit that returned (Head), which only then moves: a tree head read
// while appends commit is never beyond the Head read after it.
func TestTreeHeadCoversOnlyDurableRecords(t *testing.T) {
	l, path := mustOpen(t, Options{})
	ctx := context.Background()
	stop := make(chan struct{})
	wait := appendUntil(t, l, 4, stop)
	beyond, reads := 0, 0
	for reads < 3000 {
		size, root, err := l.TreeHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		head, _ := l.Head()
		reads++
		if uint64(size) > head {
			beyond++
			continue
		}
		if size > 0 {
			want, err := l.TreeHash(size)
			if err != nil || want != root {
				t.Fatalf("TreeHead's root for size %d is not the tree hash of that size (%v)", size, err)
			}
		}
	}
	close(stop)
	wait()
	if beyond > 0 {
		t.Errorf("%d of %d tree heads counted records whose commit had not returned (size beyond Head read after it)", beyond, reads)
	}
	l.Close()
	mustVerify(t, path)
}
