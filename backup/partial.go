package backup

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A backup is received into OUT's hidden sibling .OUT.partial-NNN, which
// holds copies of the catalog and the audit log (PHI). A receiving process
// holds an exclusive lock on that directory (lockDir) until it removed or
// renamed it; one killed (kill -9, power loss) leaves the directory
// without a lock, and the next backup to the same OUT removes it.

// partialPrefix is the name prefix of the partial directories of out.
func partialPrefix(out string) string { return "." + filepath.Base(out) + ".partial-" }

// partialGrace is how old an unlocked partial directory must be before it
// counts as left behind: a new one is created before its lock is taken.
const partialGrace = time.Minute

// removeStalePartials removes the partial directories of out that no
// process holds (see lockDir) and that are older than partialGrace, and
// returns their paths. It removes nothing it cannot lock.
func removeStalePartials(out string, now time.Time) []string {
	parent := filepath.Dir(out)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), partialPrefix(out)) {
			continue
		}
		fi, err := e.Info()
		if err != nil || now.Sub(fi.ModTime()) < partialGrace {
			continue
		}
		p := filepath.Join(parent, e.Name())
		release, ok, err := lockDir(p)
		if err != nil || !ok {
			continue // held by a running backup (or not lockable here)
		}
		if os.RemoveAll(p) == nil {
			removed = append(removed, p)
		}
		release()
	}
	return removed
}
