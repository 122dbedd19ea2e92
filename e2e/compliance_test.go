package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/compliance/report"
)

// chromiumPath is Debian's headless Chromium ('make browser-deps' installs
// it). A missing browser fails the test under CI=true and skips it
// otherwise.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const hint = "chromium not found: run 'make browser-deps' (apt-get install -y chromium)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: a missing dependency fails)", hint)
	}
	t.Skip(hint)
	return ""
}

// requestRecorder is an HTTP proxy on loopback that answers every request
// 502 and remembers its target: Chromium is pointed at it, so every request
// it makes (http, or CONNECT for https) is seen, and none leaves the
// machine.
type requestRecorder struct {
	ln   net.Listener
	mu   sync.Mutex
	seen []string
}

func newRequestRecorder(t *testing.T) *requestRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &requestRecorder{ln: ln}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Method+" "+req.Host)
		r.mu.Unlock()
		http.Error(w, "no outside requests", http.StatusBadGateway)
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

// chromiumServiceHosts are hosts Debian's Chromium itself calls in headless
// mode despite the flags that disable background networking (network time,
// component updates, account sign-in), whatever page it shows. Requests to
// them are the browser's, not the page's; every other request is the
// page's.
var chromiumServiceHosts = []string{"clients2.google.com", "update.googleapis.com", "accounts.google.com"}

// pageRequests are the requests that were not the browser's own.
func (r *requestRecorder) pageRequests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.seen {
		_, host, _ := strings.Cut(s, " ")
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !slices.Contains(chromiumServiceHosts, host) {
			out = append(out, s)
		}
	}
	return out
}

// runChromium runs headless Chromium on page with args added, every
// request sent to the recorder's proxy and every host name unresolvable,
// and returns its stdout.
func runChromium(t *testing.T, chromium string, proxy *requestRecorder, page string, args ...string) string {
	t.Helper()
	base := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--hide-scrollbars", "--user-data-dir=" + t.TempDir(),
		"--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,Translate,AutofillServerCommunication",
		"--disable-client-side-phishing-detection", "--disable-domain-reliability", "--no-pings", "--disable-breakpad",
		// Every request goes to the recorder (loopback included), and no
		// host name is ever resolved: nothing can leave the machine.
		"--proxy-server=http://" + proxy.ln.Addr().String(), "--proxy-bypass-list=<-loopback>",
		"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, append(append(base, args...), "file://"+page)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// TestComplianceReportInBrowser: after a server has served allowed,
// denied and break-the-glass reads, 'custos compliance report' writes the
// auditor's package; its bundle verifies offline, its figures recount from
// the bundle's records, and headless Chromium renders report.html with its
// charts without making a single request.
func TestComplianceReportInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	clin := newToken(t, d.principal("clinician"), tokens)
	outsider := newToken(t, d.principal("outsider"), tokens)
	er := filepath.Join(t.TempDir(), "er.json")
	b, _ := json.Marshal(map[string]any{"sub": "dr-er", "roles": []string{"clinician"}, "client_id": "ed-assistant",
		"tenant": "general-hospital", "patients": []string{}, "purpose_of_use": "ETREAT"})
	os.WriteFile(er, b, 0o600)
	erTok := newToken(t, er, tokens)

	patient, uris := plainPatientURIs(t, d, 3)
	s := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--checkpoint-interval", "50ms")
	ctx := context.Background()
	cs := connect(t, s.url, clin)
	if _, err := cs.ListResources(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	read := func(tok string, n int) int { return failedReads(t, s.url, tok, uris[:n]) }
	if f := read(outsider, 3); f != 3 {
		t.Fatalf("outsider: %d of 3 reads refused", f)
	}
	if read(erTok, 1) != 1 {
		t.Fatal("an emergency read without a grant was allowed")
	}
	out := mustCustos(t, "btg", "grant", "--data-dir", d.data, "--sub", "dr-er", "--patient", patient,
		"--reason", "unconscious patient in ED", "--ttl", "10m", "--json")
	var g struct{ ID string }
	if err := json.Unmarshal([]byte(out), &g); err != nil || g.ID == "" {
		t.Fatalf("grant: %v %s", err, out)
	}
	for deadline := time.Now().Add(10 * time.Second); read(erTok, 2) != 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the grant did not take effect")
		}
	}
	time.Sleep(1500 * time.Millisecond) // one grant sync: the uses reach grants.db
	mustCustos(t, "btg", "review", "--data-dir", d.data, "--grant", g.ID, "--verdict", "appropriate",
		"--note", "documented emergency", "--reviewer", "privacy-officer")
	time.Sleep(1500 * time.Millisecond) // the review event reaches the log
	if err := s.stop(t); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.stderr)
	}

	// The package.
	pkg := filepath.Join(t.TempDir(), "package")
	var sum struct {
		Verified           bool `json:"verified"`
		NothingDeleted     bool `json:"nothing_deleted"`
		Records, Denials   int
		BreakGlassAccesses int `json:"break_glass_accesses"`
		Grants             int
		Unreviewed         int `json:"unreviewed_grants"`
		Controls           struct {
			Checked    bool
			NotChecked int `json:"not_checked"`
		}
	}
	// What a report killed mid-way left beside --out (copies of records):
	// unlocked and older than a minute, the next report removes it.
	left := filepath.Join(filepath.Dir(pkg), ".package.partial-killed")
	if err := os.MkdirAll(filepath.Join(left, "bundle"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "bundle", "records.jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(left, old, old); err != nil {
		t.Fatal(err)
	}
	outJSON, errOut, code := custos(t, nil, "compliance", "report", "--data-dir", d.data, "--dev", "--purpose", "HOPERAT", "--out", pkg, "--json")
	if code != 0 {
		t.Fatalf("compliance report: exit %d\n%s%s", code, outJSON, errOut)
	}
	if entries, _ := os.ReadDir(filepath.Dir(pkg)); len(entries) != 1 || entries[0].Name() != "package" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("beside the package after the report: %q; want the package alone (a killed report's partial directory removed, none of this one's left)", names)
	}
	if err := json.Unmarshal([]byte(outJSON), &sum); err != nil {
		t.Fatalf("summary: %v\n%s", err, outJSON)
	}
	if !sum.Verified || !sum.NothingDeleted || sum.Denials < 4 || sum.BreakGlassAccesses < 3 || sum.Grants != 1 ||
		sum.Unreviewed != 0 || sum.Controls.Checked || sum.Controls.NotChecked == 0 {
		t.Fatalf("summary %+v", sum)
	}
	if !strings.Contains(errOut, "verifying the audit log") {
		t.Errorf("no progress on stderr: %q", errOut)
	}
	vkeys := filepath.Join(t.TempDir(), "custos.vkeys")
	mustCustos(t, "audit", "pubkey", "--data-dir", d.data, "--dev", "-o", vkeys)
	if tr := mustCustos(t, "audit", "verify", "--bundle", filepath.Join(pkg, "bundle"), "--pubkey", vkeys); !strings.Contains(tr, "VERIFIED") {
		t.Fatalf("the package's bundle does not verify:\n%s", tr)
	}

	// Figures recount from the bundle: every denial and every use of the
	// grant names a record of records.jsonl that is one.
	var rep report.Report
	raw, err := os.ReadFile(filepath.Join(pkg, "report.json"))
	if err != nil || json.Unmarshal(raw, &rep) != nil {
		t.Fatalf("report.json: %v", err)
	}
	recs := bundleRecords(t, filepath.Join(pkg, "bundle", "records.jsonl"))
	first := rep.Bundle.Manifest.From
	rep.Summary.Denials.Seqs.Each(func(q uint64) {
		if r := recs[q-first]; r.Seq != q || r.Outcome != audit.OutcomeDeny {
			t.Errorf("denial seq %d is record %d outcome %s", q, r.Seq, r.Outcome)
		}
	})
	if len(rep.BreakGlass.Grants) != 1 || rep.BreakGlass.Grants[0].ID != g.ID || len(rep.BreakGlass.Grants[0].Uses) < 2 ||
		len(rep.BreakGlass.Grants[0].Reviews) != 1 || rep.BreakGlass.GrantsFile == nil {
		t.Fatalf("break glass %+v", rep.BreakGlass)
	}
	rep.BreakGlass.Grants[0].UseSeqs.Each(func(q uint64) {
		if r := recs[q-first]; !strings.Contains(r.Reason, "grant="+g.ID) || r.PurposeOfUse != "ETREAT" {
			t.Errorf("use seq %d: purpose %s reason %q", q, r.PurposeOfUse, r.Reason)
		}
	})
	if bytes.Contains(raw, []byte(patient)) {
		t.Error("report.json holds a raw patient id")
	}
	html, _ := os.ReadFile(filepath.Join(pkg, "report.html"))
	if bytes.Contains(html, []byte(patient)) || bytes.Contains(html, []byte("http://")) || bytes.Contains(html, []byte("https://")) {
		t.Error("report.html holds a raw patient id or an outside address")
	}

	// The detector works: a page with outside images is seen fetching them.
	canary := filepath.Join(t.TempDir(), "canary.html")
	os.WriteFile(canary, []byte(`<html><body><img src="http://canary.custos.invalid/a.png"><img src="https://canary.custos.invalid/b.png"></body></html>`), 0o600)
	canaryProxy := newRequestRecorder(t)
	runChromium(t, chromium, canaryProxy, canary, "--virtual-time-budget=3000", "--dump-dom")
	if got := canaryProxy.pageRequests(); !slices.Contains(got, "GET canary.custos.invalid") || !slices.Contains(got, "CONNECT canary.custos.invalid:443") {
		t.Fatalf("the request recorder missed a page's outside requests: %q", got)
	}

	// The page in a real browser: rendered charts, no request at all.
	proxy := newRequestRecorder(t)
	page := filepath.Join(pkg, "report.html")
	dom := runChromium(t, chromium, proxy, page, "--virtual-time-budget=3000", "--dump-dom")
	for _, id := range []string{"chart-outcome", "chart-purpose", "chart-denials", "chart-breakglass", "chart-months"} {
		i := strings.Index(dom, `<figure id="`+id+`">`)
		if i < 0 {
			t.Errorf("the rendered DOM has no chart %s", id)
			continue
		}
		fig := dom[i : i+strings.Index(dom[i:], "</figure>")]
		if !regexp.MustCompile(`<rect [^>]*data-value="[1-9]`).MatchString(fig) {
			t.Errorf("chart %s has no bar with data", id)
		}
	}
	if !strings.Contains(dom, "default-src 'none'") {
		t.Error("the rendered page lost its Content-Security-Policy")
	}
	shot := filepath.Join(t.TempDir(), "report.png")
	runChromium(t, chromium, proxy, page, "--window-size=1100,2800", "--virtual-time-budget=3000", "--screenshot="+shot)
	if req := proxy.pageRequests(); len(req) > 0 {
		t.Errorf("the page made outside requests: %q", req)
	}
	if keep := os.Getenv("CUSTOS_KEEP_SCREENSHOT"); keep != "" {
		copyFile(t, shot, keep)
	}
	// The charts were painted: their colours cover a good area.
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	colours := map[string][3]uint32{"allowed": {0x2e, 0x7d, 0x32}, "denied": {0xc6, 0x28, 0x28}, "break-glass": {0xad, 0x14, 0x57}}
	counts := map[string]int{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			for name, c := range colours {
				if near(r>>8, c[0]) && near(g>>8, c[1]) && near(b>>8, c[2]) {
					counts[name]++
				}
			}
		}
	}
	for name := range colours {
		if counts[name] < 300 {
			t.Errorf("the screenshot shows %d pixels of the %s bars' colour; the charts did not render", counts[name], name)
		}
	}
}

func near(a, b uint32) bool { return a+6 >= b && b+6 >= a }

// bundleRecords decodes a bundle's records.jsonl.
func bundleRecords(t *testing.T, path string) []audit.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []audit.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		r, err := audit.Decode(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}
