package partialdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/custos-mcp/custos/internal/durable"
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

// GivenMode is the mode of out when it is an empty directory a command
// was given to write into (and that publishing the partial directory
// replaces): what Withdraw makes again, its permissions and its setgid,
// setuid and sticky bits (a group's shared directory is setgid, so that
// what is written in it is the group's). 0 when out does not exist (or is
// anything else).
func GivenMode(out string) os.FileMode {
	fi, err := os.Lstat(out)
	if err != nil || !fi.IsDir() {
		return 0
	}
	return fi.Mode()&remade | os.ModeDir
}

// remade are the bits of a given directory's mode Remake makes again.
const remade = os.ModePerm | os.ModeSetgid | os.ModeSetuid | os.ModeSticky

// Publish renames the complete partial directory partial to out
// (durable.PublishDir: fsynced, an empty out replaced, check called on out
// first when not nil). On failure nothing is left of it: a rename done
// whose parent's fsync failed is taken back (Withdraw), and the empty out
// given (GivenMode) is made again if it was removed; when that rename
// back fails, out is left whole and the error is a *NotTakenBackError.
// published is partial's FileInfo, as for Withdraw. The partial directory itself, when
// the rename did not happen, is the caller's to remove.
func Publish(partial, out string, published os.FileInfo, given os.FileMode, check func(string) error) error {
	err := publishDir(partial, out, check)
	if err == nil {
		return nil
	}
	if _, serr := os.Lstat(partial); errors.Is(serr, os.ErrNotExist) {
		if werr := Withdraw(out, partial, published, given); werr != nil {
			var left *NotTakenBackError
			if errors.As(werr, &left) {
				return &NotTakenBackError{Out: out, Err: fmt.Errorf("%w; and taking %s back failed: %v", err, out, left.Err)}
			}
			return fmt.Errorf("%w; and taking %s back failed: %v", err, out, werr)
		}
		return err
	}
	if rerr := Remake(out, given); rerr != nil {
		return fmt.Errorf("%w; and making the empty %s again failed: %v", err, out, rerr)
	}
	return err
}

// Withdraw takes back the directory a command published at out (renamed
// from the partial directory partial) when the command fails after it,
// e.g. printing its report: it renames out back to partial, one atomic
// step, so out never shows incomplete, and removes it; a crash in between
// leaves a partial directory that the next command removes. published is
// the partial directory's own FileInfo, taken before it was renamed: a
// directory at out that is no longer it is left alone (an error). given,
// from GivenMode, is the empty directory that was at out: it is made
// again with that mode. When the rename back fails, out is left whole
// and the error is a *NotTakenBackError. The lock on partial, if held, is
// the caller's to release.
func Withdraw(out, partial string, published os.FileInfo, given os.FileMode) error {
	fi, err := os.Lstat(out)
	if err != nil {
		return err
	}
	if !os.SameFile(fi, published) {
		return fmt.Errorf("partialdir: %s is no longer the directory this command wrote: left as it is", out)
	}
	if err := os.Rename(out, partial); err != nil {
		return &NotTakenBackError{Out: out, Err: err} // out holds it, whole
	}
	if err := removeAll(partial); err != nil {
		return err
	}
	return Remake(out, given)
}

// publishDir is durable.PublishDir; partialdir's own tests replace it to
// reach the branch where Publish renamed partial to out and could not take
// it back.
var publishDir = durable.PublishDir

// removeAll is os.RemoveAll; partialdir's own tests replace it to reach
// the branch where Withdraw renamed out back but could not remove it.
var removeAll = os.RemoveAll

// Remake makes out again, the empty directory of mode given (GivenMode)
// that publishing removed, unless given is 0 or out exists, and syncs its
// parent.
func Remake(out string, given os.FileMode) error {
	if given != 0 {
		if _, err := os.Lstat(out); errors.Is(err, os.ErrNotExist) {
			if err := os.Mkdir(out, given.Perm()); err != nil {
				return err
			}
			if err := os.Chmod(out, given&remade); err != nil { // past the umask
				return err
			}
		}
	}
	return durable.SyncDir(filepath.Dir(out))
}
