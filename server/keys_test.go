package server_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/secrets"
)

// switchKeys is a key source whose keys, ids and freshness a test changes
// while the server runs (what a Vault provider does on rotation and outage).
type switchKeys struct {
	mu    sync.Mutex
	keys  []secrets.Key
	ids   []string
	stale error
}

func (k *switchKeys) set(keys []secrets.Key, ids []string, stale error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys, k.ids, k.stale = keys, ids, stale
}

func (k *switchKeys) CursorKeys(context.Context) ([]secrets.Key, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stale != nil {
		return nil, k.stale
	}
	return append([]secrets.Key(nil), k.keys...), nil
}

func (k *switchKeys) Check() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stale
}

func (k *switchKeys) KeyIDs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.ids...)
}

func (k *switchKeys) Dev() bool { return false }

func (k *switchKeys) AuditKey(context.Context) (secrets.Key, error) {
	return secrets.Key{ID: "secret/custos/audit-hmac-key@1", Bytes: bytes.Repeat([]byte{9}, 32)}, nil
}

func key(b byte, id string) secrets.Key {
	return secrets.Key{ID: id, Bytes: bytes.Repeat([]byte{b}, 32)}
}

func TestCursorSurvivesKeyRotationAndRecordsNameKeyVersions(t *testing.T) {
	v1, v2 := key(1, "secret/custos/cursor-key@1"), key(2, "secret/custos/cursor-key@2")
	ks := &switchKeys{}
	ks.set([]secrets.Key{v1}, []string{"cursor=secret/custos/cursor-key@1"}, nil)
	f := newFixtureKeys(t, "", ks)
	cs := f.connect(f.identity("clinician"))
	ctx := context.Background()

	page1, err := cs.ListResources(ctx, nil)
	if err != nil || page1.NextCursor == "" {
		t.Fatalf("first page: %v (cursor %q)", err, page1.NextCursor)
	}
	// Rotation: the newest key seals, the previous one still opens.
	ks.set([]secrets.Key{v2, v1}, []string{"cursor=secret/custos/cursor-key@2"}, nil)
	page2, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: page1.NextCursor})
	if err != nil {
		t.Fatalf("cursor sealed before the rotation: %v", err)
	}
	// Once the old version is no longer held, its cursors are refused.
	ks.set([]secrets.Key{v2}, []string{"cursor=secret/custos/cursor-key@2"}, nil)
	if _, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: page1.NextCursor}); err == nil {
		t.Fatal("a cursor sealed with a key no longer held was accepted")
	}
	if page2.NextCursor != "" {
		if _, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: page2.NextCursor}); err != nil {
			t.Fatalf("cursor sealed with the new key: %v", err)
		}
	}
	recs := f.records()
	if len(recs) < 3 {
		t.Fatalf("%d records", len(recs))
	}
	if got := strings.Join(recs[0].Keys, " "); got != "audit-hmac=secret/custos/audit-hmac-key@1 cursor=secret/custos/cursor-key@1" {
		t.Errorf("first record keys = %q", got)
	}
	if got := strings.Join(recs[len(recs)-1].Keys, " "); got != "audit-hmac=secret/custos/audit-hmac-key@1 cursor=secret/custos/cursor-key@2" {
		t.Errorf("last record keys = %q", got)
	}
}

func TestStaleKeysRefuseEveryRequestAndAreAudited(t *testing.T) {
	ks := &switchKeys{}
	ks.set([]secrets.Key{key(1, "k@1")}, []string{"cursor=k@1"}, nil)
	f := newFixtureKeys(t, "", ks)
	cs := f.connect(f.identity("clinician"))
	ctx := context.Background()
	uri := f.readableURI(cs)

	stale := &secrets.StaleError{Age: 16 * time.Minute, Limit: 15 * time.Minute, Cause: "vault unreachable"}
	ks.set([]secrets.Key{key(1, "k@1")}, []string{"cursor=k@1"}, stale)
	before := len(f.records())
	calls := map[string]func() error{
		"resources/list": func() error { _, err := cs.ListResources(ctx, nil); return err },
		"resources/read": func() error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			return err
		},
		"resources/templates/list": func() error { _, err := cs.ListResourceTemplates(ctx, nil); return err },
	}
	for name, call := range calls {
		err := call()
		if err == nil || !strings.Contains(err.Error(), "keys unavailable") {
			t.Errorf("%s with stale keys: %v; want a keys unavailable refusal", name, err)
		}
	}
	recs := f.records()[before:]
	if len(recs) != len(calls) {
		t.Fatalf("%d records for %d refused requests", len(recs), len(calls))
	}
	for _, r := range recs {
		if r.Outcome != audit.OutcomeError || r.Reason != "keys_stale" || calls[r.Action] == nil {
			t.Errorf("record %d: %s %s %s; want error keys_stale", r.Seq, r.Action, r.Outcome, r.Reason)
		}
		if r.Action == "resources/read" && (len(r.URIs) != 1 || r.URIs[0] != f.audited(uri)) {
			t.Errorf("refused read record names %v, want %s", r.URIs, uri)
		}
	}

	// Fresh again: served without a restart.
	ks.set([]secrets.Key{key(1, "k@1")}, []string{"cursor=k@1"}, nil)
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if !errors.Is(stale, secrets.ErrUnavailable) {
		t.Fatal("StaleError must match ErrUnavailable")
	}
}

// readableURI lists as the session's principal and returns the first text
// resource it may read.
func (f *fixture) readableURI(cs *mcp.ClientSession) string {
	f.t.Helper()
	page, err := cs.ListResources(context.Background(), nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range page.Resources {
		if strings.HasPrefix(r.MIMEType, "text/") || strings.Contains(r.MIMEType, "json") {
			return r.URI
		}
	}
	f.t.Fatal("no readable text resource on the first page")
	return ""
}

// TestAuditRecordsHoldNoPatientIDs: after listing everything and reading a
// page of it, the audit file holds the keyed hashes of the patients
// concerned and not one raw patient id.
func TestAuditRecordsHoldNoPatientIDs(t *testing.T) {
	f := newFixture(t, "")
	cs := f.connect(f.identity("clinician"))
	ctx := context.Background()
	for _, uri := range listAll(t, cs)[:10] {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	f.log.Close()
	raw, err := os.ReadFile(f.logPath)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := f.keys.AuditKey(ctx)
	hashed := 0
	for _, r := range f.allURIs() {
		if r.Labels.Patient == "" {
			continue // tenant-level reference data
		}
		if bytes.Contains(raw, []byte(r.Labels.Patient)) {
			t.Fatalf("audit.db holds a raw patient id")
		}
		if bytes.Contains(raw, []byte(audit.Pseudonym(k.Bytes, r.Labels.Patient))) {
			hashed++
		}
	}
	if hashed == 0 {
		t.Fatal("no patient pseudonym in audit.db: the check above proves nothing")
	}
}
