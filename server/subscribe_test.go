package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
)

// entry returns the seed manifest entry of the first resource of type typ
// of the first patient id covers, with no sensitivity label.
func (lf *liveFixture) entry(id server.Identity, typ string) store.ManifestEntry {
	lf.t.Helper()
	mf, err := os.Open(filepath.Join(lf.seedDir, store.ManifestName))
	if err != nil {
		lf.t.Fatal(err)
	}
	defer mf.Close()
	sc := bufio.NewScanner(mf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e store.ManifestEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			lf.t.Fatal(err)
		}
		if e.Labels.Type == typ && e.Labels.Patient == id.Principal.Patients[0] && len(e.Labels.Sensitivity) == 0 && len(e.Labels.Consent) == 0 {
			return e
		}
	}
	lf.t.Fatalf("no %s resource for the first patient of %s", typ, id.Principal.Sub)
	return store.ManifestEntry{}
}

// reimport imports entries (files taken from the seed directory unless a
// new content is given in files) with store.ImportStaged while the server
// serves, then makes the Live catalog notice the new file now (custos serve
// polls every second). It returns when every notification has been sent.
func (lf *liveFixture) reimport(entries []store.ManifestEntry, files map[string][]byte) store.Change {
	lf.t.Helper()
	dir := lf.t.TempDir()
	var lines []string
	for _, e := range entries {
		data, ok := files[e.URI]
		if !ok {
			var err error
			if data, err = os.ReadFile(filepath.Join(lf.seedDir, filepath.FromSlash(e.File))); err != nil {
				lf.t.Fatal(err)
			}
		}
		p := filepath.Join(dir, filepath.FromSlash(e.File))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			lf.t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			lf.t.Fatal(err)
		}
		b, err := json.Marshal(e)
		if err != nil {
			lf.t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	if err := os.WriteFile(filepath.Join(dir, store.ManifestName), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		lf.t.Fatal(err)
	}
	if _, err := store.ImportStaged(context.Background(), lf.catPath, dir, store.Options{}, nil); err != nil {
		lf.t.Fatalf("import while serving: %v", err)
	}
	ch, swapped, err := lf.live.Reload()
	if err != nil || !swapped {
		lf.t.Fatalf("Reload = %v, %v", swapped, err)
	}
	return ch
}

// newContent is the seed file of e with one more field: another etag.
func (lf *liveFixture) newContent(e store.ManifestEntry, n int) []byte {
	lf.t.Helper()
	data, err := os.ReadFile(filepath.Join(lf.seedDir, filepath.FromSlash(e.File)))
	if err != nil {
		lf.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		lf.t.Fatal(err)
	}
	m["meta"] = map[string]any{"versionId": n}
	out, err := json.Marshal(m)
	if err != nil {
		lf.t.Fatal(err)
	}
	return out
}

// watcher is a client session with the notifications it received.
type watcher struct {
	cs      *mcp.ClientSession
	updated chan *mcp.ResourceUpdatedNotificationParams
	listed  chan struct{}
}

// connectAs serves lf as id over in-memory transports with the given
// protocol revision ("" is the SDK's newest).
func (lf *liveFixture) connectAs(id server.Identity, version string) *watcher {
	lf.t.Helper()
	w := &watcher{updated: make(chan *mcp.ResourceUpdatedNotificationParams, 16), listed: make(chan struct{}, 16)}
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		lf.srv.ServeStdio(ctx, st, id)
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler:     func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { w.updated <- r.Params },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { w.listed <- struct{}{} },
	})
	cs, err := c.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		lf.t.Fatal(err)
	}
	w.cs = cs
	lf.t.Cleanup(func() { cs.Close(); cancel(); <-done })
	return w
}

// sync makes a round trip: every notification sent to w before it has
// been handled when it returns (the client handles messages in order).
func (w *watcher) sync(t *testing.T) {
	t.Helper()
	if _, err := w.cs.ListResourceTemplates(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

func (w *watcher) none(t *testing.T, who string) {
	t.Helper()
	w.sync(t)
	select {
	case p := <-w.updated:
		t.Fatalf("%s received resources/updated for %s; want nothing", who, p.URI)
	default:
	}
}

func (w *watcher) got(t *testing.T, who, uri string) *mcp.ResourceUpdatedNotificationParams {
	t.Helper()
	w.sync(t)
	// Under 2026-07-28 the notification travels on the listen stream, not
	// on the connection sync used, so a round trip does not order them:
	// wait for it, boundedly.
	select {
	case p := <-w.updated:
		if p.URI != uri {
			t.Fatalf("%s: resources/updated for %s, want %s", who, p.URI, uri)
		}
		return p
	case <-time.After(10 * time.Second):
		t.Fatalf("%s received no resources/updated for %s within 10 s", who, uri)
	}
	return nil
}

// actions are the audit records of action (in order), from index from.
func (lf *liveFixture) actions(from int, action string) []audit.Record {
	var out []audit.Record
	for _, r := range lf.records()[from:] {
		if r.Action == action {
			out = append(out, r)
		}
	}
	return out
}

func TestSubscriptionsLegacy(t *testing.T) {
	lf := newLiveFixture(t)
	hiv, plain := lf.identity("clinician-hiv"), lf.identity("clinician")
	a := lf.connectAs(hiv, "2025-11-25")
	b := lf.connectAs(plain, "2025-11-25")
	out := lf.connectAs(lf.identity("outsider"), "2025-11-25")
	e := lf.entry(plain, "encounter")
	uri := e.URI

	// Capabilities advertise subscriptions and list changes.
	caps := a.cs.InitializeResult().Capabilities
	if caps.Resources == nil || !caps.Resources.Subscribe || !caps.Resources.ListChanged {
		t.Fatalf("resources capability = %+v, want subscribe and listChanged", caps.Resources)
	}

	start := len(lf.records())
	for _, w := range []*watcher{a, b} {
		if err := w.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe: %v", err)
		}
	}
	subs := lf.actions(start, server.ActionSubscribe)
	if len(subs) != 2 || subs[0].Outcome != audit.OutcomeAllow || subs[1].Outcome != audit.OutcomeAllow ||
		subs[0].URIs[0] != lf.audited(uri) || subs[0].Principal.Sub != hiv.Principal.Sub || subs[1].Principal.Sub != plain.Principal.Sub {
		t.Fatalf("subscribe records: %+v", subs)
	}
	if n := lf.srv.Subscriptions(); n != 2 {
		t.Fatalf("Subscriptions() = %d, want 2", n)
	}

	// Denied and missing look like read's not found; the audit knows.
	u, _ := store.ParseURI(uri)
	u.ID = "00000000-0000-4000-8000-000000000000"
	missing := u.String()
	_, errRead := out.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	errDenied := out.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri})
	errMissing := a.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: missing})
	var r, d, m *jsonrpc.Error
	if !errors.As(errRead, &r) || !errors.As(errDenied, &d) || !errors.As(errMissing, &m) {
		t.Fatalf("want JSON-RPC errors, got %v / %v / %v", errRead, errDenied, errMissing)
	}
	if d.Code != server.CodeResourceNotFound || d.Code != r.Code || d.Message != r.Message || string(d.Data) != string(r.Data) || m.Code != d.Code || m.Message != d.Message {
		t.Fatalf("denied subscribe %+v, missing subscribe %+v, denied read %+v: must answer alike", d, m, r)
	}
	denied := lf.actions(start, server.ActionSubscribe)[2:]
	if len(denied) != 2 || denied[0].Outcome != audit.OutcomeDeny || denied[0].Reason == "not_found" || denied[1].Reason != "not_found" {
		t.Fatalf("denied subscribe records: %+v", denied)
	}
	if err := out.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "fhir://x"}); rpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Fatalf("subscribe to a malformed uri: %v", err)
	}
	if n := lf.srv.Subscriptions(); n != 2 {
		t.Fatalf("Subscriptions() = %d after refusals, want 2", n)
	}

	// A new version of the resource (and a new resource) while serving:
	// both subscribers are told, each after an audited decision; every
	// session hears that the list changed.
	added := lf.entry(plain, "condition")
	addedURI := strings.Replace(added.URI, added.URI[strings.LastIndex(added.URI, "/")+1:], "11111111-1111-4111-8111-111111111111", 1)
	added.URI = addedURI
	start = len(lf.records())
	ch := lf.reimport([]store.ManifestEntry{e, added}, map[string][]byte{uri: lf.newContent(e, 2)})
	if !slices.Equal(ch.Updated, []string{uri}) || !slices.Equal(ch.Added, []string{addedURI}) {
		t.Fatalf("change = %+v", ch)
	}
	a.got(t, "clinician-hiv", uri)
	b.got(t, "clinician", uri)
	out.none(t, "outsider")
	for _, w := range []*watcher{a, b, out} {
		select {
		case <-w.listed:
		default:
			// list_changed is debounced by the SDK (10 ms): wait for it.
			<-w.listed
		}
	}
	notes := lf.actions(start, server.ActionNotify)
	if len(notes) != 2 || notes[0].Outcome != audit.OutcomeAllow || notes[1].Outcome != audit.OutcomeAllow || notes[0].URIs[0] != lf.audited(uri) || len(notes[0].Digests) != 1 {
		t.Fatalf("notify records: %+v", notes)
	}

	// The resource becomes HIV-sensitive: the plain clinician may no longer
	// read it, so it is told nothing and loses the subscription.
	e.Labels.Sensitivity = []string{"hiv"}
	start = len(lf.records())
	lf.reimport([]store.ManifestEntry{e}, map[string][]byte{uri: lf.newContent(e, 3)})
	a.got(t, "clinician-hiv", uri)
	b.none(t, "clinician")
	notes = lf.actions(start, server.ActionNotify)
	if len(notes) != 2 {
		t.Fatalf("notify records: %+v", notes)
	}
	byWho := map[string]audit.Record{}
	for _, n := range notes {
		byWho[n.Principal.Sub] = n
	}
	if byWho[hiv.Principal.Sub].Outcome != audit.OutcomeAllow || byWho[plain.Principal.Sub].Outcome != audit.OutcomeDeny {
		t.Fatalf("notify records: %+v", notes)
	}
	if n := lf.srv.Subscriptions(); n != 1 {
		t.Fatalf("Subscriptions() = %d after the plain clinician lost access, want 1", n)
	}
	// Dropped for good: even when it may read again, it is not told.
	e.Labels.Sensitivity = nil
	lf.reimport([]store.ManifestEntry{e}, map[string][]byte{uri: lf.newContent(e, 4)})
	a.got(t, "clinician-hiv", uri)
	b.none(t, "clinician")

	// Unsubscribe is audited and ends notifications.
	start = len(lf.records())
	if err := a.cs.Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	unsubs := lf.actions(start, server.ActionUnsubscribe)
	if len(unsubs) != 1 || unsubs[0].Outcome != audit.OutcomeAllow || unsubs[0].Reason != "unsubscribed" || unsubs[0].URIs[0] != lf.audited(uri) {
		t.Fatalf("unsubscribe records: %+v", unsubs)
	}
	if n := lf.srv.Subscriptions(); n != 0 {
		t.Fatalf("Subscriptions() = %d after unsubscribe, want 0", n)
	}
	start = len(lf.records())
	lf.reimport([]store.ManifestEntry{e}, map[string][]byte{uri: lf.newContent(e, 5)})
	a.none(t, "clinician-hiv")
	if n := lf.actions(start, server.ActionNotify); len(n) != 0 {
		t.Fatalf("notify records without subscribers: %+v", n)
	}
}

// Under 2026-07-28 the SDK client subscribes with subscriptions/listen; the
// notification carries the listen request's id in _meta.
func TestSubscriptionsListen(t *testing.T) {
	lf := newLiveFixture(t)
	plain := lf.identity("clinician")
	a := lf.connectAs(lf.identity("clinician-hiv"), "2026-07-28")
	b := lf.connectAs(plain, "2026-07-28")
	e := lf.entry(plain, "encounter")
	uri := e.URI

	// The SDK client's Subscribe sends the listen and returns; the stream
	// stays open until Unsubscribe cancels it.
	for _, w := range []*watcher{a, b} {
		if err := w.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	lf.waitSubscriptions(2) // the listens are registered asynchronously
	// A denied listen fails like a denied read, and is audited. (The SDK
	// client does not report a listen's error: ask over JSON-RPC directly.)
	start := len(lf.records())
	if err := lf.rawListen(lf.identity("outsider"), uri); rpcCode(err) != server.NotFoundCode(server.ProtocolStateless) {
		t.Fatalf("denied listen: %v", err)
	}
	if subs := lf.actions(start, server.ActionSubscribe); len(subs) != 1 || subs[0].Outcome != audit.OutcomeDeny || subs[0].Principal.Sub != "demo-outsider" {
		t.Fatalf("denied listen records: %+v", subs)
	}
	if n := lf.srv.Subscriptions(); n != 2 {
		t.Fatalf("Subscriptions() = %d after a denied listen, want 2", n)
	}

	e.Labels.Sensitivity = []string{"hiv"}
	start = len(lf.records())
	lf.reimport([]store.ManifestEntry{e}, map[string][]byte{uri: lf.newContent(e, 2)})
	p := a.got(t, "clinician-hiv", uri)
	if _, ok := p.Meta[mcp.MetaKeySubscriptionID]; !ok {
		t.Fatalf("notification _meta = %v, want %s", p.Meta, mcp.MetaKeySubscriptionID)
	}
	b.none(t, "clinician")
	notes := lf.actions(start, server.ActionNotify)
	if len(notes) != 2 {
		t.Fatalf("notify records: %+v", notes)
	}
	if n := lf.srv.Subscriptions(); n != 1 {
		t.Fatalf("Subscriptions() = %d, want 1", n)
	}
	// Ending the listen streams (Unsubscribe cancels them) drops the rest.
	a.cs.Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: uri})
	b.cs.Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: uri})
	lf.waitSubscriptions(0) // the server unwinds the listens after the client's cancellation
}

// rawListen sends one 2026-07-28 subscriptions/listen for uri as id over
// JSON-RPC and returns the error it is answered with (nil if the listen
// was accepted).
func (lf *liveFixture) rawListen(id server.Identity, uri string) error {
	lf.t.Helper()
	return lf.rawListenMany(id, []string{uri})
}

// rawListenMany is rawListen naming several URIs.
func (lf *liveFixture) rawListenMany(id server.Identity, uris []string) error {
	lf.t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		lf.srv.ServeStdio(ctx, st, id)
	}()
	defer func() { cancel(); <-done }()
	conn, err := ct.Connect(ctx)
	if err != nil {
		lf.t.Fatal(err)
	}
	defer conn.Close()
	params, err := json.Marshal(map[string]any{
		"_meta":         map[string]any{mcp.MetaKeyProtocolVersion: "2026-07-28", mcp.MetaKeyClientCapabilities: map[string]any{}},
		"notifications": map[string]any{"resourceSubscriptions": uris},
	})
	if err != nil {
		lf.t.Fatal(err)
	}
	rid, _ := jsonrpc.MakeID(float64(1))
	if err := conn.Write(ctx, &jsonrpc.Request{ID: rid, Method: "subscriptions/listen", Params: params}); err != nil {
		lf.t.Fatal(err)
	}
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			lf.t.Fatal(err)
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			return m.Error
		case *jsonrpc.Request:
			if m.Method == "notifications/subscriptions/acknowledged" {
				return nil
			}
		}
	}
}

// waitSubscriptions waits until the server holds n subscriptions. The
// bound only keeps a broken build from hanging the test run.
func (lf *liveFixture) waitSubscriptions(n int) {
	lf.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); lf.srv.Subscriptions() != n; {
		if time.Now().After(deadline) {
			lf.t.Fatalf("Subscriptions() = %d, want %d", lf.srv.Subscriptions(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A session that closes takes its subscriptions with it.
func TestSubscriptionsDroppedWhenSessionCloses(t *testing.T) {
	lf := newLiveFixture(t)
	id := lf.identity("clinician")
	w := lf.connectAs(id, "2025-11-25")
	uri := lf.entry(id, "encounter").URI
	if err := w.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if n := lf.srv.Subscriptions(); n != 1 {
		t.Fatalf("Subscriptions() = %d, want 1", n)
	}
	w.cs.Close()
	lf.waitSubscriptions(0)
	start := len(lf.records())
	e := lf.entry(id, "encounter")
	lf.reimport([]store.ManifestEntry{e}, map[string][]byte{uri: lf.newContent(e, 2)})
	if n := lf.actions(start, server.ActionNotify); len(n) != 0 {
		t.Fatalf("notify records for a closed session: %+v", n)
	}
}

// A catalog file replaced by one without a subscribed URI (a restore from
// an older copy): the subscriber is told nothing about it, the decision is
// audited as not_found, the subscription ends, and every session hears
// that the list changed.
func TestSubscriptionToRemovedResource(t *testing.T) {
	lf := newLiveFixture(t)
	id := lf.identity("clinician")
	w := lf.connectAs(id, "2025-11-25")
	before, err := os.ReadFile(lf.catPath)
	if err != nil {
		t.Fatal(err)
	}
	extra := lf.entry(id, "condition")
	extra.URI = extra.URI[:strings.LastIndex(extra.URI, "/")+1] + "22222222-2222-4222-8222-222222222222"
	lf.reimport([]store.ManifestEntry{extra}, nil)
	<-w.listed
	if err := w.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: extra.URI}); err != nil {
		t.Fatal(err)
	}

	// Put the older catalog back (a new file, renamed over the served one).
	tmp := lf.catPath + ".restore"
	if err := os.WriteFile(tmp, before, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, lf.catPath); err != nil {
		t.Fatal(err)
	}
	start := len(lf.records())
	ch, swapped, err := lf.live.Reload()
	if err != nil || !swapped || !slices.Equal(ch.Removed, []string{extra.URI}) {
		t.Fatalf("Reload = %+v, %v, %v", ch, swapped, err)
	}
	w.none(t, "clinician")
	<-w.listed
	notes := lf.actions(start, server.ActionNotify)
	if len(notes) != 1 || notes[0].Outcome != audit.OutcomeDeny || notes[0].Reason != "not_found" {
		t.Fatalf("notify records: %+v", notes)
	}
	if n := lf.srv.Subscriptions(); n != 0 {
		t.Fatalf("Subscriptions() = %d, want 0", n)
	}
}

// One subscriptions/listen cannot make the server decide and record a URI
// more than once, nor name more than the bound (found by review: 3,000
// copies of one URI made 3,000 durable records).
func TestListenIsBounded(t *testing.T) {
	lf := newLiveFixture(t)
	clin := lf.identity("clinician")
	var allowed []string
	page, err := lf.live.Page("", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range page {
		if slices.Contains(clin.Principal.Patients, r.Labels.Patient) && len(r.Labels.Sensitivity) == 0 && len(r.Labels.Consent) == 0 {
			allowed = append(allowed, r.URI)
		}
	}
	if len(allowed) < 4 {
		t.Fatalf("fixture: %d resources the clinician may read", len(allowed))
	}
	start := len(lf.records())
	same := make([]string, 3000)
	for i := range same {
		same[i] = allowed[0]
	}
	if err := lf.rawListenMany(clin, same); err != nil {
		t.Fatalf("listen naming one URI 3,000 times: %v", err)
	}
	if subs := lf.actions(start, server.ActionSubscribe); len(subs) != 1 {
		t.Fatalf("%d subscribe records for one URI named 3,000 times, want 1", len(subs))
	}
	defer server.SetMaxListenURIs(3)()
	start = len(lf.records())
	err = lf.rawListenMany(clin, allowed[:4])
	if err == nil || rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "at most 3") {
		t.Fatalf("listen naming 4 URIs with a bound of 3: %v", err)
	}
	if subs := lf.actions(start, server.ActionSubscribe); len(subs) != 3 {
		t.Fatalf("%d subscribe records before the bound, want 3", len(subs))
	}
}

// An unsubscribe of a URI the session does not hold names no patient in
// the audit log (any well-formed URI could be named).
func TestUnsubscribeOfANonSubscriptionNamesNoPatient(t *testing.T) {
	lf := newLiveFixture(t)
	cs := lf.connectAs(lf.identity("clinician"), "2025-11-25")
	start := len(lf.records())
	if err := cs.cs.Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: lf.entry(lf.identity("clinician"), "encounter").URI}); err != nil {
		t.Fatal(err)
	}
	recs := lf.actions(start, server.ActionUnsubscribe)
	if len(recs) != 1 || recs[0].Outcome != audit.OutcomeDeny || recs[0].Reason != "not_subscribed" || len(recs[0].Patients) != 0 || len(recs[0].URIs) != 0 {
		t.Fatalf("unsubscribe records %+v", recs)
	}
}

// notifyReasons is the outcome:reason of every notify record from start,
// sorted.
func (lf *liveFixture) notifyReasons(start int) []string {
	var reasons []string
	for _, r := range lf.actions(start, server.ActionNotify) {
		reasons = append(reasons, r.Outcome+":"+r.Reason)
	}
	slices.Sort(reasons)
	return reasons
}

// A subscriber whose access token has expired is not notified (its claims,
// care team included, are no longer current): the refusal is audited and
// the subscription dropped, while a subscriber with a valid credential is
// told (found by review: notifications outlived the token).
func TestNoNotificationAfterTheTokenExpired(t *testing.T) {
	lf := newLiveFixture(t)
	plain := lf.identity("clinician")
	expiring := server.WithExpiry(plain, time.Now().Add(300*time.Millisecond))
	a := lf.connectAs(expiring, "2025-11-25")
	b := lf.connectAs(plain, "2025-11-25")
	e := lf.entry(plain, "encounter")
	for _, w := range []*watcher{a, b} {
		if err := w.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: e.URI}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(400 * time.Millisecond)
	start := len(lf.records())
	lf.reimport([]store.ManifestEntry{e}, map[string][]byte{e.URI: lf.newContent(e, 2)})
	b.got(t, "clinician", e.URI)
	a.none(t, "clinician with an expired token")
	reasons := lf.notifyReasons(start)
	if len(reasons) != 2 || reasons[0] != "allow:clinician_care_team" || reasons[1] != "deny:token_expired" {
		t.Fatalf("notify records %v", reasons)
	}
	if n := lf.srv.Subscriptions(); n != 1 {
		t.Fatalf("Subscriptions() = %d, want 1 (the expired one dropped)", n)
	}
}

// A subscriber whose dev token was revoked (its entry removed from the
// token file, which the server reloads) is not notified, as one whose token
// expired is not: the refusal is audited (token_revoked) and the
// subscription dropped, while a subscriber whose token stays is told.
// Before the token file was reloaded (2026-12-07) nothing could revoke a
// dev token short of a restart.
func TestNoNotificationAfterTheTokenWasRevoked(t *testing.T) {
	lf := newLiveFixture(t)
	principal, err := os.ReadFile(filepath.Join(lf.seedDir, "principals", "clinician.json"))
	if err != nil {
		t.Fatal(err)
	}
	kept, revoked := strings.Repeat("k", 43), strings.Repeat("r", 43)
	entry := func(tok string) string {
		return `{"token_sha256":"` + server.HashToken(tok) + `","principal":` + string(principal) + `}`
	}
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, []byte(`{"tokens":[`+entry(kept)+`,`+entry(revoked)+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := server.LoadTokenFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ws []*watcher
	for _, tok := range []string{kept, revoked} {
		id, err := server.DevTokenIdentity(toks, tok)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, lf.connectAs(id, "2025-11-25"))
	}
	e := lf.entry(lf.identity("clinician"), "encounter")
	for _, w := range ws {
		if err := w.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: e.URI}); err != nil {
			t.Fatal(err)
		}
	}
	next := path + ".new"
	if err := os.WriteFile(next, []byte(`{"tokens":[`+entry(kept)+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, path); err != nil {
		t.Fatal(err)
	}
	if err := toks.Reload(); err != nil {
		t.Fatal(err)
	}
	start := len(lf.records())
	lf.reimport([]store.ManifestEntry{e}, map[string][]byte{e.URI: lf.newContent(e, 2)})
	ws[0].got(t, "clinician", e.URI)
	ws[1].none(t, "clinician with a revoked token")
	reasons := lf.notifyReasons(start)
	if len(reasons) != 2 || reasons[0] != "allow:clinician_care_team" || reasons[1] != "deny:token_revoked" {
		t.Fatalf("notify records %v", reasons)
	}
	if n := lf.srv.Subscriptions(); n != 1 {
		t.Fatalf("Subscriptions() = %d, want 1 (the revoked one dropped)", n)
	}
}

// A resource retired by a FHIR import (a Bulk deleted entry) leaves the
// served catalog when the new file is swapped in, and the server writes
// one catalog/retire record for it, naming its URI (patient segment
// pseudonymized) and never a source id, before any subscriber hears of it.
// It runs under -race (tools/racetests): the server writes the retire
// records from goroutines of its own.
//
//custos:race
func TestRetiredResourceIsAudited(t *testing.T) {
	lf := newLiveFixture(t)
	ctx := context.Background()
	n, err := store.NewNamer("general-hospital", []byte("0123456789abcdef0123456789abcdef"), "test:id-key@1")
	if err != nil {
		t.Fatal(err)
	}
	const srcPatient, srcObs = "MRN-CANARY-4711", "obs-CANARY-1"
	patient := store.Entry{Type: "Patient", ID: srcPatient, Body: []byte(`{"resourceType":"Patient","id":"MRN-CANARY-4711"}`)}
	obs := store.Entry{Type: "Observation", ID: srcObs, Patient: srcPatient, Body: []byte(`{"resourceType":"Observation","id":"obs-CANARY-1"}`)}
	stream := func(es ...store.Entry) func(func(store.Entry, error) bool) {
		return func(yield func(store.Entry, error) bool) {
			for _, e := range es {
				if !yield(e, nil) {
					return
				}
			}
		}
	}
	if _, err := store.ImportEntriesStaged(ctx, lf.catPath, stream(patient, obs), store.EntryOptions{Namer: n}, store.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, swapped, err := lf.live.Reload(); err != nil || !swapped {
		t.Fatalf("Reload: %v %v", swapped, err)
	}
	start := len(lf.records())
	if _, err := store.ImportEntriesStaged(ctx, lf.catPath, stream(store.Entry{Type: "Observation", ID: srcObs, Deleted: true}), store.EntryOptions{Namer: n}, store.Options{}); err != nil {
		t.Fatal(err)
	}
	uri := n.Link("Observation", srcObs, srcPatient)
	ch, swapped, err := lf.live.Reload()
	if err != nil || !swapped || !slices.Equal(ch.Removed, []string{uri}) {
		t.Fatalf("Reload = %+v, %v, %v", ch, swapped, err)
	}
	recs := lf.actions(start, server.ActionRetire)
	if len(recs) != 1 {
		t.Fatalf("retire records: %+v", recs)
	}
	r := recs[0]
	// The record names the patient by the keyed hash of the source
	// Patient id, in its patients and in the URI's patient segment alike
	// (the URI's segment is a keyed id of it, which the catalog resolves
	// through the compartment's Patient).
	hashed := lf.pseudonym(srcPatient)
	if r.Outcome != audit.OutcomeAllow || r.Reason != server.ReasonRetired || r.Principal.Sub != "custos" ||
		len(r.URIs) != 1 || r.URIs[0] != lf.auditedAs(uri, srcPatient) || !slices.Equal(r.Patients, []string{hashed}) ||
		!strings.Contains(r.URIs[0], hashed) {
		t.Fatalf("retire record %+v, want patient %s in patients and URI", r, hashed)
	}
	// A read of the retired URI and of a URI that never existed in the same
	// compartment (both not found) name the patient the same way.
	cs := lf.connect(lf.identity("clinician"))
	never := n.Link("Observation", "obs-never-imported", srcPatient)
	for _, u := range []string{uri, never} {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: u}); err == nil {
			t.Fatalf("read of %s succeeded", u)
		}
	}
	reads := lf.actions(start, audit.ActionResourcesRead)
	if len(reads) != 2 {
		t.Fatalf("read records: %+v", reads)
	}
	for _, rd := range reads {
		if rd.Reason != server.ReasonNotFound || !slices.Equal(rd.Patients, []string{hashed}) || len(rd.URIs) != 1 || !strings.Contains(rd.URIs[0], hashed) {
			t.Errorf("not-found read record names the patient otherwise: %+v, want %s", rd, hashed)
		}
	}
	raw, err := os.ReadFile(lf.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "CANARY") {
		t.Fatal("the audit log holds a source id")
	}
}
