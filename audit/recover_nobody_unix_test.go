//go:build unix

package audit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/internal/asnobody"
)

// TestCompletionKilledAfterReadOnly: Open completes a seal a kill left
// behind its commit point (recoverSeal), and makes the sealed file
// read-only (mode 0400) while it is still at the live path, before it
// links it in the sealed directory and renames the next segment over it.
// A second kill there left a 0400 sealed file at the live path, which the
// next Open opened read-write to read its seal: as root that works, but
// 'custos serve' runs as its own account, and got "audit: open: ...:
// permission denied" at every start, however often restarted. The
// completion reads the file read-only now. Run as nobody (the machines
// that run the tests run them as root, who may write a 0400 file).
func TestCompletionKilledAfterReadOnly(t *testing.T) {
	if asnobody.Run(t, "TestCompletionKilledAfterReadOnly") {
		return
	}
	for _, step := range []int{4, 5} { // sealed at the live path; linked too
		t.Run(fmt.Sprint("step", step), func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "audit.db")
			l, recs := sealedOnceThenThree(t, path)
			sealCrash = killAt(step)
			_, err := l.Roll(ctx)
			sealCrash = nil
			if err == nil {
				t.Fatal("Roll survived its kill")
			}
			l.Close()
			// The completion, killed once it made the file read-only.
			sealCrash = killAt(completeReadOnly)
			_, err = Open(path, Options{Node: "n"})
			sealCrash = nil
			if err == nil {
				t.Fatal("the completion survived its kill")
			}
			if !strings.HasSuffix(err.Error(), ": killed") {
				t.Fatalf("the completion failed before its kill: %v", err)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o400 {
				t.Fatalf("the live path after the killed completion: %v, %v; want the sealed file, 0400", fi, err)
			}
			l2 := mustOpenPath(t, path, Options{})
			if seq, hash := l2.Head(); seq != 7 || hash != recs[2].Hash {
				t.Fatalf("head after recovery = %d %s, want 7 %s", seq, hash, recs[2].Hash)
			}
			checkSealedTrimmed(t, filepath.Join(SealedDir(path), SegmentFile(2)))
			if r, err := l2.Append(ctx, sampleEntry(8)); err != nil || r.Seq != 8 {
				t.Fatalf("append after recovery = %d, %v", r.Seq, err)
			}
			if err := l2.Close(); err != nil {
				t.Fatal(err)
			}
			if sum := mustVerify(t, path); sum.Records != 8 {
				t.Errorf("verify after recovery: %d records, want 8", sum.Records)
			}
		})
	}
}
