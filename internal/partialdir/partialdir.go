// Package partialdir makes the hidden directory a command receives a copy
// of PHI into (a backup, an audit bundle) beside its destination OUT:
// .OUT.partial-*, locked by the receiving process until it removed it or
// renamed it into place. One a killed process (kill -9, power loss) left
// behind is unlocked, and the next command to the same OUT removes it.
// backup and audit/access share it, so their partial directories follow
// one convention.
package partialdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Grace is how old an unlocked partial directory must be before it counts
// as left behind: a new one is created before its lock is taken.
const Grace = time.Minute

// ErrTaken is New's error when another process took the new directory
// for one left behind (a skewed file system clock made it look old) and
// is removing it: retry.
var ErrTaken = errors.New("partialdir: the new partial directory was taken by another process for one left behind")

// Prefix is the name prefix of the partial directories of out.
func Prefix(out string) string { return "." + filepath.Base(out) + ".partial-" }

// New removes the partial directories of out left behind (RemoveStale),
// then makes a new one beside out (mode 0700) and locks it. release
// unlocks it (it does not remove it). On a file system without flock(2)
// it goes on unlocked: nobody can lock there either, so nobody removes it
// as left behind. removed lists the directories removed.
func New(out string) (dir string, release func(), removed []string, err error) {
	out = filepath.Clean(out)
	removed = RemoveStale(out, time.Now())
	dir, err = os.MkdirTemp(filepath.Dir(out), Prefix(out))
	if err != nil {
		return "", nil, removed, err
	}
	release, ok, err := Lock(dir)
	switch {
	case err != nil:
		release = func() {}
	case !ok:
		os.RemoveAll(dir)
		return "", nil, removed, ErrTaken
	}
	return dir, release, removed, nil
}

// RemoveStale removes the partial directories of out that no process
// holds (see Lock) and that are older than Grace, and returns their paths.
// It removes nothing it cannot lock.
func RemoveStale(out string, now time.Time) []string {
	parent := filepath.Dir(out)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), Prefix(out)) {
			continue
		}
		fi, err := e.Info()
		if err != nil || now.Sub(fi.ModTime()) < Grace {
			continue
		}
		p := filepath.Join(parent, e.Name())
		release, ok, err := Lock(p)
		if err != nil || !ok {
			continue // held by a running command (or not lockable here)
		}
		if os.RemoveAll(p) == nil {
			removed = append(removed, p)
		}
		release()
	}
	return removed
}
