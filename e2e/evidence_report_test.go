package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/compliance/report"
	"github.com/custos-mcp/custos/policy/btg"
)

// hostileText is outside text built to act in a browser that took it for
// markup: each form sets document.title to "pwned-<tag>" when it runs (a
// closing tag and a script, an image error handler, an SVG load handler, a
// javascript: address, a comment end, line and paragraph separators that
// end a JavaScript string). noSpace is the form without spaces, double
// quotes or separators, for a break-the-glass grantee.
func hostileText(tag string) (full, noSpace string) {
	run := "document.title='pwned-" + tag + "'"
	noSpace = "<img/src=x/onerror=" + run + "><svg/onload=" + run + ">"
	full = `</td></table></script><script>` + run + `</script><img src=x onerror="` + run + `"> ` +
		`<a href="javascript:` + run + `">x</a> --> ]]> ` + noSpace + "\u2028\u2029"
	return full, noSpace
}

// TestEvidenceReportUnderHostileRecords: every text of the audit records
// that comes from outside custos (a token's subject and client, the
// operator's grant and revocation reasons, the reviewer and the review
// note, the grantee) is built to run script. 'custos compliance report'
// writes the package; then
//
//   - every per-user, per-patient, denial and summary figure of report.json
//     is recounted from the bundle's records.jsonl by this test's own rules,
//     and agrees;
//   - headless Chromium renders report.html, and a copy of it without its
//     Content-Security-Policy (so that an injected script would run): the
//     title stays the report's, the DOM holds no element the records'
//     text tried to make, and the page makes no request. A copy with one
//     hostile text left unescaped is caught by the same checks;
//   - a period asked with --since at one record's instant (in another
//     offset) and --until at a later record's instant holds exactly the
//     records in [since, until), in the bundle, report.json and the page.
func TestEvidenceReportUnderHostileRecords(t *testing.T) {
	chromium := chromiumPath(t)
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	userText, _ := hostileText("user")
	clientText, _ := hostileText("client")
	_, granteeText := hostileText("grantee")
	reasonText, _ := hostileText("reason")
	noteText, _ := hostileText("note")
	reviewerText, _ := hostileText("reviewer")
	revokeText, _ := hostileText("revoke")
	revokerText, _ := hostileText("revoker")

	principal := func(name string, edit func(map[string]any)) string {
		raw, err := os.ReadFile(d.principal("clinician"))
		if err != nil {
			t.Fatal(err)
		}
		var p map[string]any
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		edit(p)
		b, _ := json.Marshal(p)
		path := filepath.Join(t.TempDir(), name+".json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return newToken(t, path, tokens)
	}
	hostileClin := principal("hostile", func(p map[string]any) { p["sub"], p["client_id"] = userText, clientText })
	hostileER := principal("hostile-er", func(p map[string]any) {
		p["sub"], p["client_id"], p["patients"], p["purpose_of_use"] = granteeText, clientText, []string{}, "ETREAT"
	})
	outsider := newToken(t, d.principal("outsider"), tokens)

	patient, uris := plainPatientURIs(t, d, 3)
	s := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--checkpoint-interval", "50ms")
	ctx := context.Background()
	read := func(tok string, n int) int { return failedReads(t, s.url, tok, uris[:n]) }
	cs := connect(t, s.url, hostileClin)
	if _, err := cs.ListResources(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	read(hostileClin, 3)
	if f := read(outsider, 2); f != 2 {
		t.Fatalf("outsider: %d of 2 reads refused", f)
	}
	if read(hostileER, 1) != 1 {
		t.Fatal("an emergency read without a grant was allowed")
	}
	out := mustCustos(t, "btg", "grant", "--data-dir", d.data, "--sub", granteeText, "--patient", patient,
		"--reason", reasonText, "--ttl", "10m", "--json")
	var g struct{ ID string }
	if err := json.Unmarshal([]byte(out), &g); err != nil || g.ID == "" {
		t.Fatalf("grant: %v %s", err, out)
	}
	for deadline := time.Now().Add(10 * time.Second); read(hostileER, 2) != 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the grant did not take effect")
		}
	}
	time.Sleep(1500 * time.Millisecond) // one grant sync: the uses reach grants.db
	mustCustos(t, "btg", "review", "--data-dir", d.data, "--grant", g.ID, "--verdict", "appropriate",
		"--note", noteText, "--reviewer", reviewerText)
	// A use right after the sign-off, most likely before the server has
	// written the review to the log: the reviewer did not see it.
	if read(hostileER, 1) != 0 {
		t.Fatal("a read under the active grant failed")
	}
	time.Sleep(1500 * time.Millisecond) // the use reaches grants.db
	mustCustos(t, "btg", "revoke", "--data-dir", d.data, "--grant", g.ID, "--reason", revokeText, "--by", revokerText)
	time.Sleep(1500 * time.Millisecond) // the review and revocation events reach the log
	if err := s.stop(t); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.stderr)
	}

	pkg := filepath.Join(t.TempDir(), "package")
	if o, e, code := custos(t, nil, "compliance", "report", "--data-dir", d.data, "--dev", "--purpose", "HOPERAT", "--out", pkg); code != 0 {
		t.Fatalf("compliance report: exit %d\n%s%s", code, o, e)
	}
	rep, recs := readPackage(t, pkg)

	// The hostile texts reached the evidence, verbatim.
	raw, _ := os.ReadFile(filepath.Join(pkg, "report.json"))
	for _, h := range []string{userText, clientText, granteeText, reviewerText, revokerText} {
		b, _ := json.Marshal(h)
		if !strings.Contains(string(raw), strings.Trim(string(b), `"`)) {
			t.Errorf("report.json does not hold %q verbatim: the test did not put it in a record", h)
		}
	}
	if len(rep.BreakGlass.Grants) != 1 || rep.BreakGlass.Grants[0].Grantee != granteeText ||
		len(rep.BreakGlass.Grants[0].Reviews) != 1 || rep.BreakGlass.Grants[0].Reviews[0].Claimed != reviewerText ||
		rep.BreakGlass.Grants[0].Revoked == nil {
		t.Fatalf("break glass %+v", rep.BreakGlass.Grants)
	}
	recount(t, rep, recs)
	// The report and grants.db agree on whether the grant was reviewed.
	var file []btg.Grant
	if err := json.Unmarshal([]byte(mustCustos(t, "btg", "list", "--data-dir", d.data, "--json")), &file); err != nil || len(file) != 1 {
		t.Fatalf("btg list: %v %d grants", err, len(file))
	}
	if gr := rep.BreakGlass.Grants[0]; gr.Reviewed != file[0].Reviewed() {
		t.Errorf("the report says reviewed=%v (%d uses, reviews %+v), grants.db says %v (%d uses)",
			gr.Reviewed, len(gr.Uses), gr.Reviews, file[0].Reviewed(), len(file[0].Uses))
	}

	// The page in a browser.
	page := filepath.Join(pkg, "report.html")
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	wantTitle := regexp.MustCompile(`<title>[^<]*</title>`).FindString(string(html))
	if wantTitle == "" {
		t.Fatal("report.html has no title")
	}
	const csp = `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">`
	if !strings.Contains(string(html), csp) {
		t.Fatal("report.html lost its Content-Security-Policy")
	}
	dir := t.TempDir()
	noCSP := filepath.Join(dir, "report-without-csp.html")
	os.WriteFile(noCSP, []byte(strings.Replace(string(html), csp, "", 1)), 0o600)
	// The detector works: the same page with the user's hostile text left
	// unescaped in a table cell runs its script.
	canary := filepath.Join(dir, "canary.html")
	os.WriteFile(canary, []byte(strings.Replace(strings.Replace(string(html), csp, "", 1), "</main>", "<p>"+userText+"</p></main>", 1)), 0o600)
	proxy := newRequestRecorder(t)
	if ps := domProblems(runChromium(t, chromium, proxy, canary, "--virtual-time-budget=3000", "--dump-dom"), wantTitle); len(ps) == 0 {
		t.Fatal("a page with unescaped hostile text passed the checks: the detector is blind")
	}
	proxy = newRequestRecorder(t)
	for _, p := range []string{page, noCSP} {
		for _, problem := range domProblems(runChromium(t, chromium, proxy, p, "--virtual-time-budget=3000", "--dump-dom"), wantTitle) {
			t.Errorf("%s: %s", filepath.Base(p), problem)
		}
	}
	if req := proxy.pageRequests(); len(req) > 0 {
		t.Errorf("the pages made requests: %q", req)
	}

	// The period's bounds: --since at the first denial's instant, written
	// in +05:30, --until at the instant of the review record.
	var from, until audit.Record
	for _, r := range recs {
		if from.Seq == 0 && r.Outcome == audit.OutcomeDeny && r.Action == "resources/read" {
			from = r
		}
		if r.Action == "btg/review" {
			until = r
		}
	}
	if from.Seq == 0 || until.Seq <= from.Seq+1 {
		t.Fatalf("no denial before the review in %d records", len(recs))
	}
	ist := time.FixedZone("IST", 5*3600+1800)
	pkg2 := filepath.Join(t.TempDir(), "period")
	if o, e, code := custos(t, nil, "compliance", "report", "--data-dir", d.data, "--dev", "--purpose", "HOPERAT", "--out", pkg2,
		"--since", from.Time.In(ist).Format(time.RFC3339Nano), "--until", until.Time.Format(time.RFC3339Nano)); code != 0 {
		t.Fatalf("compliance report of a period: exit %d\n%s%s", code, o, e)
	}
	rep2, recs2 := readPackage(t, pkg2)
	var want []uint64
	for _, r := range recs {
		if !r.Time.Before(from.Time) && r.Time.Before(until.Time) {
			want = append(want, r.Seq)
		}
	}
	var got []uint64
	for _, r := range recs2 {
		got = append(got, r.Seq)
	}
	if !slices.Equal(got, want) || rep2.Bundle.Manifest.From != want[0] || rep2.Bundle.Manifest.To != want[len(want)-1] ||
		rep2.Period.First.Seq != want[0] || rep2.Period.Last.Seq != want[len(want)-1] || rep2.Summary.Records.Count != len(want) {
		t.Errorf("period [%s, %s): bundle %d..%d (%d records), report %d..%d; want records %v",
			from.Time, until.Time, rep2.Bundle.Manifest.From, rep2.Bundle.Manifest.To, len(got), rep2.Period.First.Seq, rep2.Period.Last.Seq, want)
	}
	if !rep2.Period.Since.Equal(from.Time) || !rep2.Period.Until.Equal(until.Time) {
		t.Errorf("period asked %s..%s, report.json says %s..%s", from.Time, until.Time, rep2.Period.Since, rep2.Period.Until)
	}
	recount(t, rep2, recs2)
	html2, _ := os.ReadFile(filepath.Join(pkg2, "report.html"))
	if !strings.Contains(string(html2), fmt.Sprintf("Audit records %d to %d, ", want[0], want[len(want)-1])) {
		t.Errorf("report.html does not name records %d to %d", want[0], want[len(want)-1])
	}
}

// plainPatientURIs returns a patient of the data set who is no edge case
// and has no sensitive resource, and up to n of its FHIR resources.
func plainPatientURIs(t *testing.T, d *dataset, n int) (patient string, uris []string) {
	t.Helper()
	special := []string{}
	for _, p := range d.summary.EdgeCases {
		special = append(special, p)
	}
	for _, l := range d.lines(t) {
		if strings.HasPrefix(l.URI, "fhir://") && !slices.Contains(special, l.Labels.Patient) && len(l.Labels.Sensitivity) == 0 &&
			(patient == "" || l.Labels.Patient == patient) && len(uris) < n {
			patient = l.Labels.Patient
			uris = append(uris, l.URI)
		}
	}
	return patient, uris
}

// failedReads reads each of uris in one session with token, and returns
// how many reads failed.
func failedReads(t *testing.T, url, token string, uris []string) (failed int) {
	t.Helper()
	cs := connect(t, url, token)
	defer cs.Close()
	for _, u := range uris {
		if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: u}); err != nil {
			failed++
		}
	}
	return failed
}

// readPackage reads a package's report.json and its bundle's records.
func readPackage(t *testing.T, pkg string) (*report.Report, []audit.Record) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(pkg, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep report.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	recs := bundleRecords(t, filepath.Join(pkg, "bundle", "records.jsonl"))
	if len(recs) == 0 || recs[0].Seq != rep.Bundle.Manifest.From || recs[len(recs)-1].Seq != rep.Bundle.Manifest.To {
		t.Fatalf("records.jsonl holds %d records, the manifest %d..%d", len(recs), rep.Bundle.Manifest.From, rep.Bundle.Manifest.To)
	}
	return &rep, recs
}

// domProblems are the signs, in a DOM Chromium dumped, that text of the
// records was taken for markup: a changed title, or an element or
// attribute the report never writes.
func domProblems(dom, wantTitle string) []string {
	var out []string
	if title := regexp.MustCompile(`<title>[^<]*</title>`).FindString(dom); title != wantTitle {
		out = append(out, fmt.Sprintf("the title is %q, want %q: a script ran", title, wantTitle))
	}
	for _, bad := range []string{"<script", "<img", "<a ", "<iframe", "<object", "<embed", "<link", "<base"} {
		if strings.Contains(dom, bad) {
			out = append(out, "the DOM holds an element "+bad+">")
		}
	}
	if m := regexp.MustCompile(`<[a-zA-Z][^>]*\s(on[a-z]+|href|src|xlink:href)=`).FindString(dom); m != "" {
		out = append(out, "the DOM holds an element with a handler or an address: "+m)
	}
	if strings.Contains(dom, "javascript:") && !strings.Contains(dom, "&lt;a href=\"javascript:") {
		out = append(out, "javascript: outside escaped text")
	}
	return out
}

// recount recomputes the per-user, per-patient, denial and summary figures
// of rep from the bundle's records by this test's own reading of the rules
// report.json states, and reports every difference.
func recount(t *testing.T, rep *report.Report, recs []audit.Record) {
	t.Helper()
	access := []string{"resources/list", "resources/read", "resources/templates/list", "complete", "subscribe", "unsubscribe", "notify"}
	type acc struct {
		seqs                  []uint64
		allow, deny, errs, bg int
		others, purposes      map[string]bool
		first, last           time.Time
	}
	users, patients := map[string]*acc{}, map[string]*acc{}
	get := func(m map[string]*acc, id string) *acc {
		if m[id] == nil {
			m[id] = &acc{others: map[string]bool{}, purposes: map[string]bool{}}
		}
		return m[id]
	}
	count := func(a *acc, r audit.Record, bg bool) {
		a.seqs = append(a.seqs, r.Seq)
		if a.first.IsZero() {
			a.first = r.Time
		}
		a.last = r.Time
		switch r.Outcome {
		case audit.OutcomeAllow:
			a.allow++
		case audit.OutcomeDeny:
			a.deny++
		case audit.OutcomeError:
			a.errs++
		}
		if bg {
			a.bg++
		}
		a.purposes[cmp.Or(r.PurposeOfUse, "(none)")] = true
	}
	var accesses, denials, bgs []uint64
	var denialRows []report.Event
	for _, r := range recs {
		if !slices.Contains(access, r.Action) {
			continue
		}
		accesses = append(accesses, r.Seq)
		bg := r.PurposeOfUse == "ETREAT" || strings.Contains(r.Reason, "break_glass") || strings.Contains(r.Reason, "btg")
		if bg {
			bgs = append(bgs, r.Seq)
		}
		if r.Outcome == audit.OutcomeDeny {
			denials = append(denials, r.Seq)
			denialRows = append(denialRows, report.Event{Seq: r.Seq, Action: r.Action, Outcome: r.Outcome, Reason: r.Reason,
				User: r.Principal.Sub, Client: r.Principal.ClientID, Purpose: r.PurposeOfUse, Patients: len(r.Patients)})
		}
		u := get(users, r.Principal.Sub)
		count(u, r, bg)
		for _, p := range r.Patients {
			// A patient is a lookup value in a tenant: the authority of
			// each URI with the lookup value as a path segment, "" when
			// no URI has it (report.json's rule for patients[]).
			var tenants []string
			for _, u := range r.URIs {
				_, rest, _ := strings.Cut(u, "://")
				tenant, path, _ := strings.Cut(rest, "/")
				if slices.Contains(strings.Split(path, "/"), p) && !slices.Contains(tenants, tenant) {
					tenants = append(tenants, tenant)
				}
			}
			if len(tenants) == 0 {
				tenants = []string{""}
			}
			for _, tenant := range tenants {
				key := tenant + "\x00" + p
				u.others[key] = true
				pa := get(patients, key)
				count(pa, r, bg)
				pa.others[r.Principal.Sub] = true
			}
		}
	}
	seqs := func(f report.Figure) []uint64 {
		var out []uint64
		f.Seqs.Each(func(q uint64) { out = append(out, q) })
		return out
	}
	for name, c := range map[string]struct {
		f    report.Figure
		want []uint64
	}{"accesses": {rep.Summary.Accesses, accesses}, "denials": {rep.Summary.Denials, denials}, "break_glass_accesses": {rep.Summary.BreakGlassAccesses, bgs}} {
		if got := seqs(c.f); !slices.Equal(got, c.want) || c.f.Count != len(c.want) {
			t.Errorf("summary.%s: %d %v; recounted %v", name, c.f.Count, got, c.want)
		}
	}
	// Patients are counted by (tenant, lookup value), one of no tenant
	// only when no tenant has its lookup value (report.json's rule for
	// summary.patients and users[].patients).
	countPatients := func(keys []string) int {
		n := 0
		for _, k := range keys {
			tenant, p, _ := strings.Cut(k, "\x00")
			if tenant != "" || !slices.ContainsFunc(keys, func(o string) bool { return o != k && strings.HasSuffix(o, "\x00"+p) }) {
				n++
			}
		}
		return n
	}
	keysOf := func(m map[string]bool) []string { return slices.Collect(maps.Keys(m)) }
	if rep.Summary.Users != len(users) || rep.Summary.Patients != countPatients(slices.Collect(maps.Keys(patients))) {
		t.Errorf("summary: %d users, %d patients; recounted %d, %d", rep.Summary.Users, rep.Summary.Patients, len(users), countPatients(slices.Collect(maps.Keys(patients))))
	}
	check := func(kind string, got []report.Subject, want map[string]*acc, others func(report.Subject) int, wantOthers func(map[string]bool) int, key func(report.Subject) string) {
		if len(got) != len(want) {
			t.Errorf("%s: %d rows; recounted %d", kind, len(got), len(want))
		}
		for _, s := range got {
			w := want[key(s)]
			if w == nil {
				t.Errorf("%s %q: not in the records", kind, s.ID)
				continue
			}
			purposes := slices.Sorted(func(yield func(string) bool) {
				for p := range w.purposes {
					if !yield(p) {
						return
					}
				}
			})
			if !slices.Equal(seqs(s.Accesses), w.seqs) || s.Allowed != w.allow || s.Denied != w.deny || s.Errors != w.errs ||
				s.BreakGlass != w.bg || others(s) != wantOthers(w.others) || !slices.Equal(slices.Sorted(slices.Values(s.Purposes)), purposes) ||
				!s.First.Equal(w.first) || !s.Last.Equal(w.last) {
				t.Errorf("%s %q: %+v; recounted seqs %v allow %d deny %d error %d break-glass %d others %d purposes %v %s..%s",
					kind, s.ID, s, w.seqs, w.allow, w.deny, w.errs, w.bg, len(w.others), purposes, w.first, w.last)
			}
		}
	}
	check("user", rep.Users, users, func(s report.Subject) int { return s.Patients }, func(m map[string]bool) int { return countPatients(keysOf(m)) }, func(s report.Subject) string { return s.ID })
	check("patient", rep.Patients, patients, func(s report.Subject) int { return s.Users }, func(m map[string]bool) int { return len(m) }, func(s report.Subject) string { return s.Tenant + "\x00" + s.ID })
	if len(rep.Denials) != len(denialRows) {
		t.Errorf("denials[]: %d rows; recounted %d", len(rep.Denials), len(denialRows))
	}
	for i := range min(len(rep.Denials), len(denialRows)) {
		got, want := rep.Denials[i], denialRows[i]
		got.Time = time.Time{}
		if got != want {
			t.Errorf("denials[%d] = %+v; the record says %+v", i, got, want)
		}
	}
}
