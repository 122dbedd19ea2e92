package app_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/internal/durable"
	"github.com/custos-mcp/custos/policy"
)

// rollbackKit signs bundles of the shipped default policy (rego/custos)
// with one key, each with its own sequence claim and revision.
type rollbackKit struct {
	t      *testing.T
	signer *policy.FileSigner
	pub    string // public key file
	dir    string
}

func newRollbackKit(t *testing.T) *rollbackKit {
	t.Helper()
	dir := t.TempDir()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	priv, pubFile := filepath.Join(dir, "k.pem"), filepath.Join(dir, "k.pub.pem")
	os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
	s, err := policy.NewFileSigner("team", priv)
	if err != nil {
		t.Fatal(err)
	}
	return &rollbackKit{t: t, signer: s, pub: pubFile, dir: dir}
}

// bundle returns the bytes and digest of a signed bundle with claim seq
// (none if 0) and manifest revision rev.
func (k *rollbackKit) bundle(seq uint64, rev string) ([]byte, string) {
	k.t.Helper()
	ctx := context.Background()
	b, err := policy.BuildBundle(ctx, filepath.Join("..", "rego", "custos"), rev)
	if err != nil {
		k.t.Fatal(err)
	}
	if seq != 0 {
		if err := policy.SetBundleSequence(b, seq); err != nil {
			k.t.Fatal(err)
		}
	}
	if err := policy.SignBundle(ctx, b, k.signer); err != nil {
		k.t.Fatal(err)
	}
	var buf bytes.Buffer
	digest, err := policy.WriteBundle(&buf, b)
	if err != nil {
		k.t.Fatal(err)
	}
	return buf.Bytes(), digest
}

func (k *rollbackKit) put(path string, data []byte) {
	k.t.Helper()
	if err := durable.WriteFile(path, data, 0o644); err != nil {
		k.t.Fatal(err)
	}
}

// policyRecords are the policy/load and policy/reject records of the log.
func policyRecords(t *testing.T, path string) []audit.Record {
	t.Helper()
	l := audittest.OpenPath(t, path, audit.Options{ReadOnly: true})
	defer l.Close()
	head, _ := l.Head()
	var out []audit.Record
	if err := l.Records(context.Background(), 1, head, func(_ uint64, c []byte) error {
		r, err := audit.Decode(c)
		if err == nil && strings.HasPrefix(r.Action, "policy/") && r.Action != "policy/impact" {
			r.Reason, r.PolicyRevision = strings.Clone(r.Reason), strings.Clone(r.PolicyRevision)
			out = append(out, r)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPolicyRollbackProtection drives the shipped assembly through a
// rollout, a hot reload to an older bundle, restarts with an older bundle
// (refused, then allowed by the operator) and a bundle without a claim.
// The high-water mark survives the restarts because it is read from the
// audit log.
func TestPolicyRollbackProtection(t *testing.T) {
	f := newFixture(t)
	auditPath := filepath.Join(f.data, app.AuditFile)
	audittest.VerifyOnCleanup(t, auditPath)
	k := newRollbackKit(t)
	path := filepath.Join(k.dir, "policy.tar.gz")
	b2, d2 := k.bundle(2, "r2")
	b1, d1 := k.bundle(1, "r1")
	b3, d3 := k.bundle(3, "r3")
	b3other, d3other := k.bundle(3, "r3-other")
	bNone, dNone := k.bundle(0, "unclaimed")
	ctx := context.Background()
	open := func(allow bool) (*app.App, error) {
		_, st := mcp.NewInMemoryTransports()
		return app.Open(ctx, app.Options{DataDir: f.data, Dev: true, Node: "test",
			Stdio:  &app.StdioOptions{PrincipalFile: filepath.Join(f.seed, "principals", "clinician.json"), Transport: st},
			Policy: app.PolicyOptions{Bundle: path, Keys: []app.PolicyKey{{ID: "team", File: k.pub}}, AllowRollback: allow}})
	}

	// Rollout: 2 serves, a hot reload to 1 or to another 3... is refused,
	// 3 loads.
	k.put(path, b2)
	a, err := open(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		data   []byte
		digest string
		want   string
	}{
		{b1, d1, "claims sequence 1, lower than the high-water mark: sequence 2, bundle " + d2},
		{bNone, dNone, "has no sequence claim"},
		{b3, d3, ""},
		{b3other, d3other, "claims sequence 3, equal to the high-water mark: sequence 3, bundle " + d3},
	} {
		k.put(path, c.data)
		ev, err := a.ReloadPolicy(ctx)
		if c.want == "" {
			if err != nil || ev.Kind != policy.EventLoaded || ev.Sequence != 3 {
				t.Fatalf("reload to 3: %+v, %v", ev, err)
			}
			continue
		}
		if !errors.Is(err, policy.ErrRollback) || !strings.Contains(err.Error(), c.want) || ev.Kind != policy.EventRejected {
			t.Fatalf("reload to %s: %+v, err = %v, want ErrRollback saying %q", c.digest, ev, err, c.want)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart with 1: refused, on record, nothing serves.
	k.put(path, b1)
	if a, err := open(false); !errors.Is(err, policy.ErrRollback) || !strings.Contains(err.Error(), "--policy-allow-rollback") {
		if a != nil {
			a.Close()
		}
		t.Fatalf("restart with 1: err = %v, want ErrRollback", err)
	}
	recs := policyRecords(t, auditPath)
	last := recs[len(recs)-1]
	// The evidence is read from the unscrubbed fields: the scrubbed text
	// after them may take a run of a digest's digits for a phone number.
	if last.Action != "policy/reject" || !strings.HasPrefix(last.Reason, "candidate="+d1+" candidate_revision=sha256:") ||
		!strings.Contains(last.Reason, " candidate_sequence=1 candidate_key=team rollback_claim=1 rollback_bundle="+d1+" high_water=3 high_water_bundle="+d3+" ") {
		t.Fatalf("startup refusal not on record: %+v", last)
	}

	// The operator's override: 1 serves, and the load says what it overrode.
	a, err = open(true)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	recs = policyRecords(t, auditPath)
	last = recs[len(recs)-1]
	if last.Action != "policy/load" || !strings.HasPrefix(last.Reason, "candidate="+d1+" sequence=1 key=team rollback_claim=1 rollback_bundle="+d1+" high_water=3 high_water_bundle="+d3+" ") ||
		!strings.Contains(last.Reason, "rollback_override") || !strings.Contains(last.PolicyRevision, d1) {
		t.Fatalf("override not on record: %+v", last)
	}
	// 1 is now the mark: it starts again without the override; a bundle
	// without a claim does not.
	a, err = open(false)
	if err != nil {
		t.Fatalf("restart with the mark's own bundle: %v", err)
	}
	a.Close()
	k.put(path, bNone)
	if a, err := open(false); !errors.Is(err, policy.ErrRollback) {
		if a != nil {
			a.Close()
		}
		t.Fatalf("restart without a claim: %v", err)
	}
	// Not even with the override: as the mark it would disarm the
	// protection.
	if a, err := open(true); !errors.Is(err, policy.ErrRollback) || !strings.Contains(err.Error(), "custos policy sign --sequence") {
		if a != nil {
			a.Close()
		}
		t.Fatalf("override without a claim: %v", err)
	}

	// Every load record of a bundle with a claim names it. The bundles
	// loaded are 2, 3 and 1 (overridden), in that order; a bundle may load
	// twice in a row (the watcher, polling every second, may see 3 on disk
	// before ReloadPolicy loads it again: a reload of the bundle that
	// serves is no rollback), which a loaded machine showed once.
	var loaded []string
	for _, r := range recs {
		if r.Action == "policy/load" {
			if !strings.Contains(r.Reason, " sequence=") {
				t.Errorf("load record %d without its sequence: %q", r.Seq, r.Reason)
			}
			name := r.PolicyRevision
			for d, n := range map[string]string{d1: "1", d2: "2", d3: "3", d3other: "3-other", dNone: "unclaimed"} {
				if strings.Contains(r.PolicyRevision, d) {
					name = n
				}
			}
			loaded = append(loaded, name)
		}
	}
	if got := slices.Compact(loaded); !slices.Equal(got, []string{"2", "3", "1"}) {
		t.Errorf("bundles loaded %v (records %v), want 2, 3, 1 (overridden)", got, loaded)
	}
}

// TestPolicyMigrationWithoutClaims: before any bundle with a claim has
// loaded, a bundle without one loads (with a warning), and so does any
// other; the first claim arms the protection.
func TestPolicyMigrationWithoutClaims(t *testing.T) {
	f := newFixture(t)
	audittest.VerifyOnCleanup(t, filepath.Join(f.data, app.AuditFile))
	k := newRollbackKit(t)
	path := filepath.Join(k.dir, "policy.tar.gz")
	ctx := context.Background()
	open := func() (*app.App, error) {
		_, st := mcp.NewInMemoryTransports()
		return app.Open(ctx, app.Options{DataDir: f.data, Dev: true, Node: "test",
			Stdio:  &app.StdioOptions{PrincipalFile: filepath.Join(f.seed, "principals", "clinician.json"), Transport: st},
			Policy: app.PolicyOptions{Bundle: path, Keys: []app.PolicyKey{{ID: "team", File: k.pub}}}})
	}
	for _, rev := range []string{"old-a", "old-b"} {
		data, _ := k.bundle(0, rev)
		k.put(path, data)
		a, err := open()
		if err != nil {
			t.Fatalf("unclaimed %s: %v", rev, err)
		}
		a.Close()
	}
	b5, _ := k.bundle(5, "five")
	k.put(path, b5)
	a, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	old, _ := k.bundle(0, "old-a")
	k.put(path, old)
	if _, err := a.ReloadPolicy(ctx); !errors.Is(err, policy.ErrRollback) {
		t.Fatalf("unclaimed after 5: %v", err)
	}
}

// TestPolicyMinSequence: a new audit log has no high-water mark, so without
// a floor its first start would serve any validly signed bundle. With
// policy.min_sequence, an older bundle is refused at that first start, the
// override does not lower the floor, the refusal is on record with the
// floor as its evidence, and a bundle at the floor serves.
func TestPolicyMinSequence(t *testing.T) {
	f := newFixture(t)
	auditPath := filepath.Join(f.data, app.AuditFile)
	audittest.VerifyOnCleanup(t, auditPath)
	k := newRollbackKit(t)
	path := filepath.Join(k.dir, "policy.tar.gz")
	ctx := context.Background()
	open := func(allow bool) (*app.App, error) {
		_, st := mcp.NewInMemoryTransports()
		return app.Open(ctx, app.Options{DataDir: f.data, Dev: true, Node: "test",
			Stdio: &app.StdioOptions{PrincipalFile: filepath.Join(f.seed, "principals", "clinician.json"), Transport: st},
			Policy: app.PolicyOptions{Bundle: path, Keys: []app.PolicyKey{{ID: "team", File: k.pub}},
				AllowRollback: allow, MinSequence: 2026120501}})
	}
	old, dOld := k.bundle(2026110101, "november")
	none, _ := k.bundle(0, "unclaimed")
	for _, c := range []struct {
		data  []byte
		allow bool
		want  string
	}{
		{old, false, "claims sequence 2026110101, below 2026120501, the lowest this server accepts (policy.min_sequence)"},
		{old, true, "below 2026120501"},
		{none, false, "has no sequence claim"},
	} {
		k.put(path, c.data)
		a, err := open(c.allow)
		if !errors.Is(err, policy.ErrRollback) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "no override lowers") {
			if a != nil {
				a.Close()
			}
			t.Fatalf("first start (override %v): err = %v, want ErrRollback saying %q", c.allow, err, c.want)
		}
	}
	recs := policyRecords(t, auditPath)
	if len(recs) != 3 {
		t.Fatalf("%d policy records, want 3 refusals: %+v", len(recs), recs)
	}
	if r := recs[0]; r.Action != "policy/reject" || !strings.HasPrefix(r.Reason, "candidate="+dOld+" candidate_revision=sha256:") ||
		!strings.Contains(r.Reason, " candidate_sequence=2026110101 candidate_key=team rollback_claim=2026110101 rollback_bundle="+dOld+" min_sequence=2026120501 ") {
		t.Fatalf("floor refusal not on record: %+v", r)
	}

	cur, dCur := k.bundle(2026120501, "december")
	k.put(path, cur)
	a, err := open(false)
	if err != nil {
		t.Fatalf("a bundle at the floor: %v", err)
	}
	defer a.Close()
	if ev, err := a.ReloadPolicy(ctx); err != nil || ev.Sequence != 2026120501 || ev.BundleDigest != dCur {
		t.Fatalf("reload of the same bundle: %+v, %v", ev, err)
	}
}
