package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
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
	f := newFixture(t)
	audittest.VerifyOnCleanup(t, filepath.Join(f.data, app.AuditFile))
	now := time.Now().UTC()
	g := btg.Grant{ID: "00000000-0000-4000-8000-0000000000d1", Sub: "dr-old", Patient: "p-legacy-1", Reason: "unconscious patient in ED",
		By: "op", Created: now.Add(-time.Minute), Expires: now.Add(time.Hour)}
	db, err := bolt.Open(filepath.Join(f.data, app.GrantsFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(g)
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("grants"))
		if err != nil {
			return err
		}
		return b.Put([]byte(g.ID), raw)
	})
	if cerr := db.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}

	var logs bytes.Buffer
	a, err := app.Open(context.Background(), app.Options{
		DataDir: f.data, Dev: true, Node: "test", Version: "test", Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Checkpoints: app.CheckpointOptions{Every: 1, Interval: 20 * time.Millisecond},
		HTTP:        &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: f.tokens(t)},
	})
	if err != nil {
		t.Fatal(err)
	}
	head, _ := a.AuditLog().Head()
	var refusals []string
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
	if len(refusals) != 1 || !strings.HasPrefix(refusals[0], "deny grant="+g.ID+" ") || !strings.Contains(refusals[0], "refused=no_tenant") {
		t.Errorf("btg/refuse records %q, want one refusing %s with refused=no_tenant", refusals, g.ID)
	}
	warning := "break-the-glass grants without a tenant apply nowhere and are refused; grant again with 'custos btg grant --tenant'"
	if strings.Count(logs.String(), warning) != 1 || !strings.Contains(logs.String(), "grants=1") || strings.Contains(logs.String(), "p-legacy-1") {
		t.Errorf("start-up log does not warn once with the count (or names the patient):\n%s", logs.String())
	}
}
