package server

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/custos-mcp/custos/policy"
	custosrego "github.com/custos-mcp/custos/rego"
)

// A request is decided by the engine in force when it was admitted: a
// reload while it runs does not change the policy that decides it, and the
// next request gets the new engine (Snapshotter).
func TestPolicyIsPinnedPerRequest(t *testing.T) {
	ctx := context.Background()
	// The policy without its Rego tests (they would run on every load).
	dir := t.TempDir()
	src, err := fs.ReadFile(custosrego.FS, "custos/authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authz.rego"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := policy.New(ctx, policy.DirSource{Dir: dir, AllowNoTests: true}, policy.ReloaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: Config{Policy: r}, snapshot: snapshotOf(r)}
	first := s.withDecider(ctx)
	before := s.decider(first)
	if before != Decider(r.Current()) {
		t.Fatalf("pinned %T, want the reloader's current engine", before)
	}
	// A new revision: one more (harmless) policy file.
	if err := os.WriteFile(filepath.Join(dir, "zz_extra.rego"), []byte("package custos.extra\n\nx := 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Current().Revision() == before.Revision() {
		t.Fatal("the reload did not change the revision: the test would prove little")
	}
	if s.decider(first) != before || s.policyRevision(first, "") != before.Revision() {
		t.Error("a request admitted before the reload changed engine")
	}
	if got := s.decider(s.withDecider(ctx)); got != Decider(r.Current()) {
		t.Error("a request admitted after the reload is not decided by the new engine")
	}

	// A plain engine decides every request itself.
	eng := r.Current()
	s = &Server{cfg: Config{Policy: eng}, snapshot: snapshotOf(eng)}
	if s.decider(s.withDecider(ctx)) != Decider(eng) {
		t.Error("an engine is not its own snapshot")
	}
}
