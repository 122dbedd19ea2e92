package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// subscriber is a go-sdk client over Streamable HTTP with the
// resources/updated notifications it received.
type subscriber struct {
	cs      *mcp.ClientSession
	updated chan *mcp.ResourceUpdatedNotificationParams
}

func subscribeClient(t *testing.T, ctx context.Context, url, token, version string) *subscriber {
	t.Helper()
	s := &subscriber{updated: make(chan *mcp.ResourceUpdatedNotificationParams, 8)}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-subscribe", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { s.updated <- r.Params },
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect (%s): %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	s.cs = cs
	return s
}

// wait returns the next notification, failing the test if none comes
// within a generous bound (the server polls for a new catalog every second).
func (s *subscriber) wait(t *testing.T, who string) *mcp.ResourceUpdatedNotificationParams {
	t.Helper()
	select {
	case p := <-s.updated:
		return p
	case <-time.After(45 * time.Second):
		t.Fatalf("%s: no notifications/resources/updated after the import", who)
	}
	return nil
}

// A client subscribes; `custos import` of a changed manifest while the
// server runs makes the server swap in the new catalog and notify the
// subscriber, after an audited decision.
func TestSubscribeNotifiedOnReimportWhileServing(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	clinTok := newToken(t, d.principal("clinician"), tokens)
	hivTok := newToken(t, d.principal("clinician-hiv"), tokens)
	outTok := newToken(t, d.principal("outsider"), tokens)
	url, stop, _ := httpServer(t, d, tokens)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The resource: the clinician's first patient's first encounter.
	var who struct {
		Patients []string `json:"patients"`
	}
	raw, err := os.ReadFile(d.principal("clinician"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &who); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	for _, m := range d.manifest(t) {
		labels := m["labels"].(map[string]any)
		if labels["type"] == "encounter" && labels["patient"] == who.Patients[0] && labels["sensitivity"] == nil {
			line = m
			break
		}
	}
	if line == nil {
		t.Fatal("no encounter of the clinician's first patient in the seed")
	}
	uri := line["uri"].(string)

	legacy := subscribeClient(t, ctx, url, clinTok, "2025-11-25")
	if caps := legacy.cs.InitializeResult().Capabilities; caps.Resources == nil || !caps.Resources.Subscribe || !caps.Resources.ListChanged {
		t.Fatalf("resources capability %+v: want subscribe and listChanged", caps.Resources)
	}
	if err := legacy.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe (2025-11-25): %v", err)
	}
	modern := subscribeClient(t, ctx, url, hivTok, "")
	if err := modern.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe (%s): %v", modern.cs.InitializeResult().ProtocolVersion, err)
	}
	outsider := subscribeClient(t, ctx, url, outTok, "2025-11-25")
	if e := rpcError(outsider.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})); e == nil || e.Code != -32002 {
		t.Fatalf("outsider subscribe: %v, want -32002", e)
	}

	// A new version of the encounter, imported while the server runs.
	file := line["file"].(string)
	reimport := func(version string, line map[string]any) {
		t.Helper()
		var fhir map[string]any
		if err := json.Unmarshal(d.seedFile(t, file), &fhir); err != nil {
			t.Fatal(err)
		}
		fhir["meta"] = map[string]any{"versionId": version}
		content, _ := json.Marshal(fhir)
		if out := d.reimport(t, nil, line, content); !strings.Contains(out, "0 created, 1 updated") {
			t.Fatalf("import while serving: %s", out)
		}
	}
	reimport("2", line)

	if p := legacy.wait(t, "clinician (2025-11-25)"); p.URI != uri {
		t.Fatalf("legacy notification for %s, want %s", p.URI, uri)
	}
	t.Logf("second subscriber negotiated %s", modern.cs.InitializeResult().ProtocolVersion)
	p := modern.wait(t, "clinician-hiv ("+modern.cs.InitializeResult().ProtocolVersion+")")
	if p.URI != uri {
		t.Fatalf("notification for %s, want %s", p.URI, uri)
	}
	if modern.cs.InitializeResult().ProtocolVersion >= "2026-07-28" {
		if _, ok := p.Meta[mcp.MetaKeySubscriptionID]; !ok {
			t.Fatalf("2026-07-28 notification without %s: %v", mcp.MetaKeySubscriptionID, p.Meta)
		}
	}
	// The new version is what a read now returns.
	res, err := legacy.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	if v := res.Contents[0].Meta["version"]; v != float64(2) {
		t.Fatalf("read after the import: version %v, want 2", v)
	}
	select {
	case p := <-outsider.updated:
		t.Fatalf("outsider was notified of %s", p.URI)
	default:
	}

	// Access removed: version 3 is labelled HIV-sensitive, which the
	// clinician without the HIV role may not read. Only clinician-hiv is
	// notified; the clinician gets nothing, and the audit log says why.
	hivLine := map[string]any{}
	for k, v := range line {
		hivLine[k] = v
	}
	labels := map[string]any{}
	for k, v := range line["labels"].(map[string]any) {
		labels[k] = v
	}
	labels["sensitivity"] = []string{"hiv"}
	hivLine["labels"] = labels
	reimport("3", hivLine)
	if p := modern.wait(t, "clinician-hiv after the HIV label"); p.URI != uri {
		t.Fatalf("notification for %s, want %s", p.URI, uri)
	}
	// The clinician's notification would have been decided in the same
	// round as clinician-hiv's, before it was sent: nothing may follow.
	select {
	case p := <-legacy.updated:
		t.Fatalf("clinician without the HIV role was notified of %s after losing access", p.URI)
	case <-time.After(2 * time.Second):
	}
	if _, err := legacy.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
		t.Fatal("the clinician can still read the HIV-labelled version")
	}
	legacy.cs.Close()
	modern.cs.Close()
	outsider.cs.Close()
	stop()

	var got []string
	for _, r := range d.records(t) {
		switch r.Action {
		case "subscribe", "notify":
			got = append(got, r.Action+":"+r.Outcome+":"+r.Principal.Sub)
		}
	}
	clin, hiv, outSub := subOf(t, d.principal("clinician")), subOf(t, d.principal("clinician-hiv")), subOf(t, d.principal("outsider"))
	want := []string{"subscribe:allow:" + clin, "subscribe:allow:" + hiv, "subscribe:deny:" + outSub,
		"notify:allow:" + clin, "notify:allow:" + hiv, // version 2
		"notify:allow:" + hiv, "notify:deny:" + clin} // version 3, HIV-labelled
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("subscription records\n got %v\nwant %v", got, want)
	}
}
