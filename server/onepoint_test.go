package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/custos-mcp/custos/internal/syncbuf"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/ops"
	"github.com/custos-mcp/custos/store"
)

// One decision point, seen from the caller: every request that names a
// resource (a read, whole or one page; a subscription, resources/subscribe
// or subscriptions/listen; an unsubscription; a completion whose context
// names a patient) answers a resource the caller may not see exactly as it
// answers one that does not exist, for every persona, every protocol
// revision the server serves and both transports: the same status, headers
// and bytes over HTTP, the same line over stdio, the same operational log
// lines and the same metrics. The audit log alone keeps the truth.

// onePointRevisions are the protocol revisions compared: the two with
// sessions before batches were dropped and the two the server is built
// for.
var onePointRevisions = []string{"2025-03-26", "2025-06-18", rev2025, rev2026}

// onePointPersonas are the seed's principals.
var onePointPersonas = []string{"clinician", "clinician-hiv", "billing", "researcher", "auditor", "outsider"}

// hiddenPair is what a persona may not see and what does not exist, named
// alike (same family, tenant, lengths).
type hiddenPair struct {
	hidden, missing    string // a note the persona may not read; a note that does not exist
	hPatient, mPatient string // a patient of whom the persona may list nothing; a patient with no resource
	tenant             string
}

// hiddenFor finds persona's hidden pair over f's catalog. A research
// persona names patients by their aliases (completion context), and may
// read catalog URIs it holds from elsewhere, so its hidden note is a
// catalog URI whose alias it is not shown.
func hiddenFor(t *testing.T, f *fixture, persona string) hiddenPair {
	t.Helper()
	id := f.identity(persona)
	listed := listAll(t, f.connect(id))
	if persona == "researcher" {
		real := f.realIDs()
		for i, a := range listed {
			listed[i] = f.realURI(real, a)
		}
	}
	seen := map[string]bool{} // patients the persona may list something of
	for _, l := range listed {
		if u, err := store.ParseURI(l); err == nil {
			seen[u.Patient] = true
		}
	}
	var p hiddenPair
	for _, r := range f.allURIs() {
		u, _ := store.ParseURI(r.URI)
		// Of the persona's own tenant if it has any (the outsider's has
		// none: another tenant's then).
		if u.Scheme != store.SchemeNote || slices.Contains(listed, r.URI) || (u.Tenant != id.Principal.Tenant && id.Principal.Tenant == "general-hospital") {
			continue
		}
		if p.hidden == "" {
			p.hidden, p.tenant = r.URI, u.Tenant
			u.ID = "00000000-0000-4000-8000-000000000000"
			p.missing = u.String()
		}
		if !seen[u.Patient] && p.hPatient == "" {
			p.hPatient, p.mPatient = u.Patient, "00000000-0000-4000-8000-00000000ffff"
		}
	}
	if p.hidden == "" || p.hPatient == "" {
		t.Fatalf("%s may read every note or list something of every patient: the fixture should hide some", persona)
	}
	if _, err := f.catalog.Get(p.missing); err == nil {
		t.Fatalf("%s exists", p.missing)
	}
	if persona == "researcher" {
		k, err := f.keys.AuditKey(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		p.hPatient = server.ResearchAlias(k.Bytes, p.tenant, p.hPatient)
		p.mPatient = server.ResearchAlias(k.Bytes, p.tenant, p.mPatient)
	}
	t.Logf("%s: hidden %s, missing %s, hidden patient %s", persona, p.hidden, p.missing, p.hPatient)
	return p
}

// onePointProbe is one request naming a resource: body(uri) is its
// JSON-RPC message with id 7 for revision rev (meta the 2026-07-28 _meta
// member, "" before), nil when the revision has no such request.
type onePointProbe struct {
	name string
	body func(rev string, p hiddenPair, hidden bool) string
}

var onePointProbes = []onePointProbe{
	{"read", func(rev string, p hiddenPair, hidden bool) string {
		return readBody(rev, p.pick(hidden))
	}},
	{"read page", func(rev string, p hiddenPair, hidden bool) string {
		return readBody(rev, p.pick(hidden)+"/pages/1")
	}},
	{"subscribe", func(rev string, p hiddenPair, hidden bool) string {
		if rev >= rev2026 {
			return `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["` + p.pick(hidden) + `"]},` + meta2026("}}")
		}
		return `{"jsonrpc":"2.0","id":7,"method":"resources/subscribe","params":{"uri":"` + p.pick(hidden) + `"}}`
	}},
	{"unsubscribe", func(rev string, p hiddenPair, hidden bool) string {
		if rev >= rev2026 {
			return "" // ended by cancelling the listen
		}
		return `{"jsonrpc":"2.0","id":7,"method":"resources/unsubscribe","params":{"uri":"` + p.pick(hidden) + `"}}`
	}},
	{"complete id", func(rev string, p hiddenPair, hidden bool) string {
		return completeBody(rev, "id", p, hidden)
	}},
	{"complete type", func(rev string, p hiddenPair, hidden bool) string {
		return completeBody(rev, "type", p, hidden)
	}},
	{"read batch", func(rev string, p hiddenPair, hidden bool) string {
		if rev != "2025-03-26" {
			return "" // batches are of 2025-03-26 only
		}
		return "[" + readBody(rev, p.pick(hidden)) + "]"
	}},
}

func (p hiddenPair) pick(hidden bool) string {
	if hidden {
		return p.hidden
	}
	return p.missing
}

func readBody(rev, uri string) string {
	if rev >= rev2026 {
		return `{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"` + uri + `",` + meta2026("}}")
	}
	return `{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"` + uri + `"}}`
}

func completeBody(rev, arg string, p hiddenPair, hidden bool) string {
	patient := p.mPatient
	if hidden {
		patient = p.hPatient
	}
	params := `"ref":{"type":"ref/resource","uri":"` + fhirTemplate + `"},"argument":{"name":"` + arg + `","value":""},` +
		`"context":{"arguments":{"tenant":"` + p.tenant + `","patient":"` + patient + `"}}`
	if rev >= rev2026 {
		return `{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{` + params + `,` + meta2026("}}")
	}
	return `{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{` + params + `}}`
}

// receiptRE matches an audit receipt, which names a record of its own for
// every answer.
var receiptRE = regexp.MustCompile(`"` + regexp.QuoteMeta(server.ReceiptKey) + `":"[^"]*"`)

// onePointObserver captures what an operator sees: the operational log
// (debug and up) and the request counters.
type onePointObserver struct {
	logs *syncbuf.Buffer
	reg  *prometheus.Registry
}

func newOnePointFixture(t *testing.T) (*fixture, *onePointObserver) {
	t.Helper()
	o := &onePointObserver{logs: &syncbuf.Buffer{}, reg: prometheus.NewRegistry()}
	m := ops.New(o.reg)
	f := newServerFixture(t, fixtureOptions{live: true, tune: func(c *server.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(o.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.Metrics = m
	}})
	return f, o
}

// observe runs do and returns the log lines it wrote (without their time
// and the ids of records and decisions, which every request has its own
// of) and the request counters that moved.
func (o *onePointObserver) observe(t *testing.T, do func()) (logs []map[string]any, counted map[string]float64) {
	t.Helper()
	before, n := o.counters(t), len(o.logs.String())
	do()
	for line := range strings.Lines(o.logs.String()[n:]) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		for _, k := range []string{"time", "seq", "decision", "list", "completion"} {
			delete(m, k)
		}
		logs = append(logs, m)
	}
	counted = map[string]float64{}
	for k, v := range o.counters(t) {
		if v != before[k] {
			counted[k] = v - before[k]
		}
	}
	return logs, counted
}

// counters are the values of custos_requests_total by label set.
func (o *onePointObserver) counters(t *testing.T) map[string]float64 {
	t.Helper()
	mfs, err := o.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "custos_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out[strings.Join(ls, ",")] = m.GetCounter().GetValue()
		}
	}
	return out
}

// onePointAnswer is what a caller gets: status and headers (HTTP only) and
// the body or line, with the URI and patient named turned into the missing
// ones and the receipt removed.
type onePointAnswer struct {
	status int
	header http.Header
	body   string
}

func normalize(raw string, p hiddenPair) string {
	raw = strings.ReplaceAll(raw, p.hidden, p.missing)
	raw = strings.ReplaceAll(raw, `"`+p.hPatient+`"`, `"`+p.mPatient+`"`)
	return receiptRE.ReplaceAllString(raw, `"`+server.ReceiptKey+`":"…"`)
}

// compareOnePoint sends probe for the hidden and the missing resource
// through send and fails t on any difference a caller or an operator
// could see.
func compareOnePoint(t *testing.T, f *fixture, o *onePointObserver, rev string, p hiddenPair, pr onePointProbe, send func(body string) onePointAnswer) {
	t.Helper()
	hb, mb := pr.body(rev, p, true), pr.body(rev, p, false)
	if hb == "" {
		return
	}
	var h, m onePointAnswer
	recs, _ := f.log.Head()
	hl, hc := o.observe(t, func() { h = send(hb) })
	hseq, _ := f.log.Head()
	ml, mc := o.observe(t, func() { m = send(mb) })
	mseq, _ := f.log.Head()
	hrecs, mrecs := hseq-recs, mseq-hseq
	h.body, m.body = normalize(h.body, p), normalize(m.body, p)
	if h.header != nil {
		h.header.Del("Date")
		m.header.Del("Date")
	}
	if h.status != m.status || !maps.EqualFunc(h.header, m.header, slices.Equal) || h.body != m.body {
		t.Errorf("%s: hidden and missing answered differently\nhidden:  %d %v %s\nmissing: %d %v %s", pr.name, h.status, h.header, h.body, m.status, m.header, m.body)
	}
	if !strings.Contains(m.body, `"error"`) && !strings.Contains(pr.name, "complete") && !strings.Contains(pr.name, "unsubscribe") {
		t.Errorf("%s of a missing resource answered %s: want an error", pr.name, m.body)
	}
	if fmt.Sprint(hl) != fmt.Sprint(ml) {
		t.Errorf("%s: the operational log tells hidden from missing\nhidden:  %v\nmissing: %v", pr.name, hl, ml)
	}
	if !maps.Equal(hc, mc) {
		t.Errorf("%s: the metrics tell hidden from missing: %v vs %v", pr.name, hc, mc)
	}
	if hrecs != mrecs {
		t.Errorf("%s: %d records for the hidden resource, %d for the missing one", pr.name, hrecs, mrecs)
	}
}

func TestHiddenAndMissingAnswerAlikeOverHTTP(t *testing.T) {
	f, o := newOnePointFixture(t)
	hs := f.serveHTTP(onePointPersonas...)
	client := &http.Client{Timeout: 20 * 1e9}
	for _, persona := range onePointPersonas {
		p := hiddenFor(t, f, persona)
		tok := hs.tokens[persona]
		for _, rev := range onePointRevisions {
			t.Run(persona+"/"+rev, func(t *testing.T) {
				hdr := map[string]string{"Mcp-Protocol-Version": rev}
				if rev < rev2026 {
					hdr["Mcp-Session-Id"] = revSession(t, hs.url, tok, rev)
				}
				for _, pr := range onePointProbes {
					compareOnePoint(t, f, o, rev, p, pr, func(body string) onePointAnswer {
						h := maps.Clone(hdr)
						if rev >= rev2026 {
							var m struct {
								Method string
								Params struct{ URI string }
							}
							if err := json.Unmarshal([]byte(body), &m); err != nil {
								t.Fatal(err)
							}
							h["Mcp-Method"] = m.Method
							if m.Method == "resources/read" {
								h["Mcp-Name"] = m.Params.URI
							}
						}
						st, header, raw := postWith(t, client, hs.url, tok, h, body)
						return onePointAnswer{st, header, string(raw)}
					})
				}
			})
		}
	}
}

func TestHiddenAndMissingAnswerAlikeOverStdio(t *testing.T) {
	f, o := newOnePointFixture(t)
	for _, persona := range onePointPersonas {
		p := hiddenFor(t, f, persona)
		for _, rev := range onePointRevisions {
			t.Run(persona+"/"+rev, func(t *testing.T) {
				s := startStdioAs(t, f, 0, f.identity(persona))
				if rev < rev2026 {
					s.send(strings.Replace(stdioInit2025, rev2025, rev, 1))
					if v, raw := s.next(); v.(map[string]any)["result"].(map[string]any)["protocolVersion"] != rev {
						t.Fatalf("initialize answered %s", raw)
					}
					s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				}
				for _, pr := range onePointProbes {
					compareOnePoint(t, f, o, rev, p, pr, func(body string) onePointAnswer {
						s.send(body)
						_, raw := s.next()
						return onePointAnswer{body: raw}
					})
				}
			})
		}
	}
}

// revSession opens a session of revision rev with raw requests and returns
// its id.
func revSession(t *testing.T, url, tok, rev string) string {
	t.Helper()
	_, hdr, msg := post(t, url, tok, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+rev+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := hdr.Get("Mcp-Session-Id")
	if res, _ := msg["result"].(map[string]any); sid == "" || res["protocolVersion"] != rev {
		t.Fatalf("initialize at %s: %v", rev, msg)
	}
	post(t, url, tok, map[string]string{"Mcp-Protocol-Version": rev, "Mcp-Session-Id": sid}, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return sid
}

// hiddenPatient has only notes no persona may read (very-restricted, HL7
// confidentiality V, and outside every care team) in
// TestHiddenResourcesChangeNoListOrCompletion.
const hiddenPatient = "5a7c3e21-9d4b-4c6e-8f02-00000000beef"

// importHiddenNotes imports, into the catalog at catPath, very-restricted
// notes of patient (one of an existing patient, sorted among its
// resources, and one of hiddenPatient).
func importHiddenNotes(t testing.TB, catPath, patient string) {
	t.Helper()
	dir := t.TempDir()
	var manifest strings.Builder
	for i, p := range []string{patient, hiddenPatient} {
		id := fmt.Sprintf("7e8d7c6b-5a49-4382-9170-%012d", i)
		uri := fmt.Sprintf("note://general-hospital/patients/%s/notes/%s", p, id)
		name := fmt.Sprintf("note-%d.md", i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte("# Note\n\nA very restricted note.\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal(store.ManifestEntry{
			URI: uri, Name: "note-" + id[:8], Title: "Note", MIMEType: store.MIMEMarkdown,
			Labels: store.Labels{Tenant: "general-hospital", Patient: p, Type: store.TypeNote, Sensitivity: []string{"very-restricted"}},
			File:   name,
		})
		manifest.Write(append(line, '\n'))
	}
	importManifest(t, catPath, dir, []byte(manifest.String()))
}

// cursorRE matches a list cursor: sealed with a fresh nonce, it differs
// from one answer to the next; its presence and length are what a caller
// sees.
var cursorRE = regexp.MustCompile(`"nextCursor":"([^"]*)"`)

// callerView is what a caller is shown: every list page and a few
// completions, as JSON, receipts removed and cursors reduced to their
// length.
func callerView(t *testing.T, f *fixture, persona, rev, patient string) string {
	t.Helper()
	cs := f.connectFor(t, f.identity(persona), rev)
	var b strings.Builder
	cursor := ""
	for {
		res, err := cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(res)
		b.Write(raw)
		b.WriteByte('\n')
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	if persona == "researcher" {
		k, err := f.keys.AuditKey(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		patient = server.ResearchAlias(k.Bytes, "general-hospital", patient)
	}
	for _, c := range []struct {
		tmpl, arg string
		args      map[string]string
	}{
		{fhirTemplate, "patient", map[string]string{"tenant": "general-hospital"}},
		{noteTemplate, "patient", map[string]string{"tenant": "general-hospital"}},
		{noteTemplate, "id", map[string]string{"tenant": "general-hospital", "patient": patient}},
		{fhirTemplate, "type", map[string]string{"tenant": "general-hospital", "patient": patient}},
		{noteTemplate, "tenant", nil},
	} {
		raw, _ := json.Marshal(complete(t, cs, c.tmpl, c.arg, "", c.args))
		b.Write(raw)
		b.WriteByte('\n')
	}
	out := receiptRE.ReplaceAllString(b.String(), `"`+server.ReceiptKey+`":"…"`)
	return cursorRE.ReplaceAllStringFunc(out, func(c string) string { return fmt.Sprintf(`"nextCursor":%d`, len(c)) })
}

// Resources a caller may not see change nothing it is shown: every list
// page (items, their _meta, whether a cursor follows and its length) and
// every completion are the same over a catalog with hidden notes, of a
// patient the caller sees and of a patient it does not, as over the
// catalog without them, for every persona and revision.
func TestHiddenResourcesChangeNoListOrCompletion(t *testing.T) {
	keys, err := secrets.NewDev() // one set for both: research aliases and entity tags are keyed
	if err != nil {
		t.Fatal(err)
	}
	plain := newServerFixture(t, fixtureOptions{live: true, keys: keys})
	var patient string // the first note's patient: the clinicians see some of its resources
	for _, r := range plain.allURIs() {
		if strings.HasPrefix(r.URI, "note://") {
			patient = r.Labels.Patient
			break
		}
	}
	hidden := newServerFixture(t, fixtureOptions{live: true, keys: keys, imports: func(t testing.TB, catPath string) { importHiddenNotes(t, catPath, patient) }})
	if a, b := len(plain.allURIs()), len(hidden.allURIs()); b != a+2 {
		t.Fatalf("%d resources with the hidden notes, %d without", b, a)
	}
	for _, persona := range onePointPersonas {
		for _, rev := range onePointRevisions {
			t.Run(persona+"/"+rev, func(t *testing.T) {
				want, got := callerView(t, plain, persona, rev, patient), callerView(t, hidden, persona, rev, patient)
				wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
				for i := range max(len(wl), len(gl)) {
					if w, g := at(wl, i), at(gl, i); w != g {
						t.Fatalf("hidden notes change what %s is shown, answer %d of %d\nwithout: %.2000s\nwith:    %.2000s", persona, i+1, len(wl), w, g)
					}
				}
			})
		}
	}
}

// at is ls[i], or "" past its end.
func at(ls []string, i int) string {
	if i < len(ls) {
		return ls[i]
	}
	return ""
}

// A subscription refused for a resource the caller may not read leaves
// nothing behind, exactly as one refused for a URI that names nothing:
// when an import then changes the hidden resource (a new version, then a
// label that lets the caller read it) and creates the missing one (which
// the caller may read), the session that was refused hears exactly what a
// session that never subscribed hears (list changes only, no
// resources/updated), at both revisions, and no notify record is written.
func TestRefusedSubscriptionLeavesNothingBehind(t *testing.T) {
	lf := newLiveFixture(t)
	id := lf.identity("clinician")
	base := lf.entry(id, "encounter")
	hidden := lf.entry(id, "encounter")
	hidden.URI = base.URI[:strings.LastIndex(base.URI, "/")+1] + "33333333-3333-4333-8333-333333333333"
	hidden.Labels.Sensitivity = []string{"very-restricted"} // not for this clinician (no sensitive:very-restricted role)
	missing := hidden
	missing.URI = base.URI[:strings.LastIndex(base.URI, "/")+1] + "44444444-4444-4444-8444-444444444444"
	missing.Labels.Sensitivity = nil
	files := func(n int) map[string][]byte {
		return map[string][]byte{hidden.URI: lf.newContent(base, n), missing.URI: lf.newContent(base, n)}
	}
	lf.reimport([]store.ManifestEntry{hidden}, files(1))

	refused := lf.connectAs(id, rev2025)
	control := lf.connectAs(id, rev2025)
	listen := lf.connectAs(id, rev2026)
	start := len(lf.records())
	for _, uri := range []string{hidden.URI, missing.URI} {
		if err := refused.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); rpcCode(err) != server.CodeResourceNotFound {
			t.Fatalf("subscribe %s: %v, want not found", uri, err)
		}
		if err := lf.rawListen(id, uri); rpcCode(err) != server.NotFoundCode(rev2026) {
			t.Fatalf("listen %s: %v, want not found", uri, err)
		}
		// The SDK client does not report a listen's error (rawListen
		// does): this one is refused alike and holds nothing.
		listen.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri})
	}
	if n := lf.srv.Subscriptions(); n != 0 {
		t.Fatalf("Subscriptions() = %d after refusals, want 0", n)
	}
	// The audit log keeps the truth.
	byURI := map[string][]string{}
	for _, r := range lf.actions(start, server.ActionSubscribe) {
		byURI[r.URIs[0]] = append(byURI[r.URIs[0]], r.Outcome+":"+r.Reason)
	}
	h, m := byURI[lf.audited(hidden.URI)], byURI[lf.audited(missing.URI)]
	if len(h) < 2 || len(m) < 2 || slices.Contains(h, "deny:"+server.ReasonNotFound) || slices.ContainsFunc(m, func(s string) bool { return s != "deny:"+server.ReasonNotFound }) {
		t.Fatalf("subscribe records: hidden %v, missing %v", h, m)
	}

	// A new version of the hidden resource, and the missing one created.
	lf.reimport([]store.ManifestEntry{hidden, missing}, files(2))
	// The hidden resource becomes readable, and both change again.
	hidden.Labels.Sensitivity = nil
	lf.reimport([]store.ManifestEntry{hidden, missing}, files(3))

	heard := func(w *watcher) (updated []string, listed int) {
		w.sync(t)
		for {
			select {
			case p := <-w.updated:
				updated = append(updated, p.URI)
			case <-w.listed:
				listed++
			case <-time.After(200 * time.Millisecond): // list_changed is debounced by the SDK (10 ms)
				return updated, listed
			}
		}
	}
	ru, rl := heard(refused)
	cu, cl := heard(control)
	lu, _ := heard(listen)
	if len(ru) != 0 || len(lu) != 0 || rl != cl || cl == 0 {
		t.Fatalf("refused session heard updates %v and %d list changes, the listen %v; a session that never subscribed heard %v and %d", ru, rl, lu, cu, cl)
	}
	if notes := lf.actions(start, server.ActionNotify); len(notes) != 0 {
		t.Fatalf("notify records after refused subscriptions: %+v", notes)
	}
}

// An import that changes which resources a caller may see changes its
// list, and the caller hears notifications/resources/list_changed whether
// the change added or removed a URI or only relabelled one: a resource it
// may not read that becomes readable is announced as one created, and one
// it could read that becomes hidden as one deleted. Only an add or a
// remove was announced, so a caller told of a new resource without
// list_changed knew it had existed, hidden, before (and one that vanished
// from its list without it, that it still exists).
func TestListChangedDoesNotTellHiddenFromMissing(t *testing.T) {
	lf := newLiveFixture(t)
	id := lf.identity("clinician")
	base := lf.entry(id, "encounter")
	hidden := base
	hidden.URI = base.URI[:strings.LastIndex(base.URI, "/")+1] + "55555555-5555-4555-8555-555555555555"
	hidden.Labels.Sensitivity = []string{"very-restricted"} // not for this clinician
	missing := base
	missing.URI = base.URI[:strings.LastIndex(base.URI, "/")+1] + "66666666-6666-4666-8666-666666666666"
	files := map[string][]byte{hidden.URI: lf.newContent(base, 1), missing.URI: lf.newContent(base, 1)}
	lf.reimport([]store.ManifestEntry{hidden}, files)

	w := lf.connectAs(id, rev2025)
	heard := func() bool {
		w.sync(t)
		select {
		case <-w.listed:
			for len(w.listed) > 0 {
				<-w.listed
			}
			return true
		case <-time.After(300 * time.Millisecond): // list_changed is debounced by the SDK (10 ms)
			return false
		}
	}
	readable := func(uri string) bool {
		_, err := w.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		return err == nil
	}
	if readable(hidden.URI) || readable(missing.URI) {
		t.Fatal("the clinician may read the hidden or the missing resource before the imports")
	}

	hidden.Labels.Sensitivity = nil // the hidden resource becomes readable
	lf.reimport([]store.ManifestEntry{hidden}, files)
	relabelled := heard()
	lf.reimport([]store.ManifestEntry{missing}, files) // the missing one is created
	created := heard()
	if !readable(hidden.URI) || !readable(missing.URI) {
		t.Fatal("the clinician may not read both after the imports")
	}
	if relabelled != created {
		t.Errorf("list_changed after a hidden resource became readable: %v; after a missing one was created: %v", relabelled, created)
	}
	hidden.Labels.Sensitivity = []string{"very-restricted"} // and hidden again: it leaves the list
	lf.reimport([]store.ManifestEntry{hidden}, files)
	if !heard() {
		t.Error("no list_changed after a readable resource became hidden: a deleted one is announced")
	}
}
