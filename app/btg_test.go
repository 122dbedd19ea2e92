package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/policy/btg"
)

// TestServeRefusesGrantsWithoutATenant: a grants.db holding a grant that
// names no tenant (an older custos, an edited file) and is still in force
// makes serve warn once at start-up with the count (no id, no patient),
// and the first sync refuses the grant in the audit log (btg/refuse,
// refused=no_tenant, outcome deny): such a grant covered the patient id in
// every tenant.
func TestServeRefusesGrantsWithoutATenant(t *testing.T) {
	now := time.Now().UTC()
	g := btg.Grant{ID: "00000000-0000-4000-8000-0000000000d1", Sub: "dr-old", Patient: "p-legacy-1", Reason: "unconscious patient in ED",
		By: "op", Created: now.Add(-time.Minute), Expires: now.Add(time.Hour)}
	refusals, logs := serveWithGrants(t, g)
	if len(refusals) != 1 || !strings.HasPrefix(refusals[0], "deny grant="+g.ID+" ") || !strings.Contains(refusals[0], "refused=no_tenant") {
		t.Errorf("btg/refuse records %q, want one refusing %s with refused=no_tenant", refusals, g.ID)
	}
	warning := "break-the-glass grants without a tenant apply nowhere and are refused; grant again with 'custos btg grant --tenant'"
	if strings.Count(logs, warning) != 1 || !strings.Contains(logs, "grants=1") || strings.Contains(logs, "p-legacy-1") {
		t.Errorf("start-up log does not warn once with the count (or names the patient):\n%s", logs)
	}
}

// TestServeRefusesGrantsWithABadTenant: a grant in force whose tenant is
// not empty but no tenant name (an edited grants.db: a space, a control
// character, over 63 bytes, upper case) matches no URI and is refused by
// the first sync like one without a tenant (btg/refuse, refused=bad_tenant,
// outcome deny), its tenant Go-quoted in the record. Before, only an empty
// tenant was refused: such a grant stayed "in force", covering nothing,
// and was quoted into its records as if it were one.
func TestServeRefusesGrantsWithABadTenant(t *testing.T) {
	now := time.Now().UTC()
	var gs []btg.Grant
	for i, tenant := range []string{"general hospital", "gh\x1b[2J", strings.Repeat("a", 64), "General-Hospital", "-gh"} {
		gs = append(gs, btg.Grant{ID: fmt.Sprintf("00000000-0000-4000-8000-0000000000e%d", i), Sub: "dr-x", Patient: "p-1", Tenant: tenant,
			Reason: "unconscious patient in ED", By: "op", Created: now.Add(-time.Minute), Expires: now.Add(time.Hour)})
	}
	refusals, _ := serveWithGrants(t, gs...)
	if len(refusals) != len(gs) {
		t.Fatalf("btg/refuse records %q, want one per grant with a bad tenant (%d)", refusals, len(gs))
	}
	for _, g := range gs {
		want := "deny grant=" + g.ID + " grantee=dr-x tenant=" + strconv.Quote(g.Tenant) + " "
		if !slices.ContainsFunc(refusals, func(r string) bool { return strings.HasPrefix(r, want) && strings.Contains(r, "refused=bad_tenant") }) {
			t.Errorf("no btg/refuse record %q… refused=bad_tenant in %q", want, refusals)
		}
	}
}

// serveWithGrants writes gs into a fresh data directory's grants.db,
// opens the server on it (its start-up syncs the grants) and closes it.
// It returns the outcome and reason of each btg/refuse record and the
// operational log.
func serveWithGrants(t *testing.T, gs ...btg.Grant) (refusals []string, logs string) {
	t.Helper()
	f := newFixture(t)
	audittest.VerifyOnCleanup(t, filepath.Join(f.data, app.AuditFile))
	db, err := bolt.Open(filepath.Join(f.data, app.GrantsFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("grants"))
		if err != nil {
			return err
		}
		for _, g := range gs {
			raw, _ := json.Marshal(g)
			if err := b.Put([]byte(g.ID), raw); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}

	var buf bytes.Buffer
	a, err := app.Open(context.Background(), app.Options{
		DataDir: f.data, Dev: true, Node: "test", Version: "test", Logger: slog.New(slog.NewTextHandler(&buf, nil)),
		Checkpoints: app.CheckpointOptions{Every: 1, Interval: 20 * time.Millisecond},
		HTTP:        &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: f.tokens(t)},
	})
	if err != nil {
		t.Fatal(err)
	}
	head, _ := a.AuditLog().Head()
	if head > 0 {
		err = a.AuditLog().Records(context.Background(), 1, head, func(_ uint64, c []byte) error {
			r, err := audit.Decode(c)
			if err == nil && r.Action == btg.KindRefuse {
				refusals = append(refusals, r.Outcome+" "+r.Reason)
			}
			return err
		})
	}
	if cerr := a.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	return refusals, buf.String()
}
