package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Tree is the local Merkle tree of the audit log, as *audit.Log provides it
// (leaf i = canonical bytes of record seq i+1).
//
// TreeHead returns the current size and root from one consistent snapshot.
// TreeHash returns the root of the tree's first size leaves (size <= head).
// ProveTree returns the RFC 6962 consistency proof from oldSize to newSize
// (1 <= oldSize <= newSize <= head). All must be safe for concurrent use.
type Tree interface {
	TreeHead(ctx context.Context) (int64, tlog.Hash, error)
	TreeHash(size int64) (tlog.Hash, error)
	ProveTree(oldSize, newSize int64) (tlog.TreeProof, error)
}

// FindFork returns the first pair of entries (in order) with the same size
// and different roots, or nil. Order does not matter otherwise: entries
// may come from several anchors. Signatures are not checked (Verified is
// false); CheckAgainst checks them.
func FindFork(entries []Entry) *ForkError {
	first := make(map[int64]int, len(entries))
	for i, e := range entries {
		j, ok := first[e.Size]
		if !ok {
			first[e.Size] = i
			continue
		}
		if a := entries[j]; a.Root != e.Root {
			return &ForkError{Size: e.Size, A: entrySide(a), B: entrySide(e)}
		}
	}
	return nil
}

func entrySide(e Entry) Side {
	return Side{Source: e.Location(), Root: e.Root, Note: e.Note, Time: e.Time}
}

// CheckMonotonic returns a *RegressionError (ErrRolledBack) if the sizes of
// entries, read from one anchor file in order, ever decrease, except where
// a rollback acknowledgement supersedes earlier entries (Current).
func CheckMonotonic(entries []Entry) error {
	_, err := Current(entries)
	return err
}

// Load reads every anchor (All), applies each one's rollback
// acknowledgements and checks it is monotonic (Current), and returns
// all their current entries, sorted by size (stable), for CheckAgainst. Any error
// (torn, corrupt, regression, missing directory) is returned with no
// entries: startup must fail closed.
func Load(anchors ...*Anchor) ([]Entry, error) {
	var all []Entry
	for _, a := range anchors {
		es, err := a.All()
		if err != nil {
			return nil, err
		}
		es, err = Current(es)
		if err != nil {
			return nil, err
		}
		all = append(all, es...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Size < all[j].Size })
	return all, nil
}

// CheckAgainst checks the local tree against anchored entries (from one or
// several anchors, see Load) and returns nil only if the tree extends every
// anchored checkpoint:
//
//  1. no two entries disagree on the root for one size (*ForkError, whose
//     notes' signatures are then checked and marked Verified);
//  2. the entry with the largest size opens with verifiers and its body
//     matches its size and root (ErrBadSignature, and ErrUnknownKey when
//     it carries no signature by a key in verifiers / ErrBadCheckpoint);
//  3. the local size is at least that size (*RolledBackError);
//  4. for every anchored size, the local TreeHash equals the anchored root
//     (*ForkError with the local tree as side B: a rewritten history even
//     if it regrew past the anchored size);
//  5. the local tree proves (ProveTree, tlog.CheckTree) that its head
//     extends the largest anchored checkpoint (*InconsistentError).
//
// Every entry carrying a rollback acknowledgement (see Current) must also
// verify: its signed note opens with verifiers and is the one of its line,
// and the local tree of its From records has its FromRoot (ErrBadRollback,
// ErrBadSignature, *ForkError).
//
// No entries: nothing was anchored yet, and nil is returned; whether an
// empty anchor is acceptable for a non-empty log (first start after the
// upgrade) is the caller's decision. Cost: one signature check plus one
// TreeHash per distinct anchored size.
func CheckAgainst(ctx context.Context, tree Tree, entries []Entry, verifiers note.Verifiers) error {
	if len(entries) == 0 {
		return nil
	}
	if f := FindFork(entries); f != nil {
		f.A.Verified = verified(f.A.Note, verifiers)
		f.B.Verified = verified(f.B.Note, verifiers)
		return f
	}
	latest := entries[0]
	for _, e := range entries[1:] {
		if e.Size > latest.Size {
			latest = e
		}
	}
	c, _, err := Open(latest.Note, verifiers)
	if err != nil {
		return fmt.Errorf("%s: %w", latest.Location(), err)
	}
	if c.Size != latest.Size || c.Root != latest.Root {
		return fmt.Errorf("%w: %s: entry size/root differ from its signed note", ErrBadCheckpoint, latest.Location())
	}

	size, root, err := tree.TreeHead(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint: local tree head: %w", err)
	}
	if size < latest.Size {
		return &RolledBackError{LocalSize: size, LocalRoot: root, Anchored: latest}
	}
	for _, e := range entries {
		if e.Rollback != nil {
			if err := checkRollback(tree, e, verifiers); err != nil {
				return err
			}
		}
	}

	checked := make(map[int64]bool, len(entries))
	for _, e := range entries {
		if checked[e.Size] {
			continue
		}
		checked[e.Size] = true
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tree.TreeHash(e.Size)
		if err != nil {
			return fmt.Errorf("checkpoint: local tree hash at size %d: %w", e.Size, err)
		}
		if e.Size == size && h != root {
			return &InconsistentError{OldSize: size, OldRoot: h, NewSize: size, NewRoot: root,
				Err: errors.New("TreeHash(head) differs from TreeHead's root")}
		}
		if h != e.Root {
			a := entrySide(e)
			a.Verified = verified(e.Note, verifiers)
			return &ForkError{Size: e.Size, A: a, B: Side{Source: "local audit tree", Root: h}}
		}
	}

	if latest.Size > 0 && size > latest.Size {
		p, err := tree.ProveTree(latest.Size, size)
		if err == nil {
			err = tlog.CheckTree(p, size, root, latest.Size, latest.Root)
		}
		if err != nil {
			return &InconsistentError{OldSize: latest.Size, OldRoot: latest.Root, NewSize: size, NewRoot: root, Err: err}
		}
	}
	return nil
}

func verified(signed []byte, verifiers note.Verifiers) bool {
	if signed == nil {
		return false
	}
	_, _, err := Open(signed, verifiers)
	return err == nil
}
