package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
)

// TestEarlierRendererIsThePreviousVersions: rendererBefore20261206 renders
// every golden record as custos did before probe-export3 (384f6a1). The
// files in testdata/golden/before-20261206 were written by
// TestFormatsGolden -update run with the code of 0dfeb9b (the records
// auditlogused and backup added to its goldenRecords), but list.fhir.json,
// testdata/golden's file as 27b3d0f had it (that record rendered the same
// from 0dfeb9b to 27b3d0f; h-review42 added the URI of no patient of the
// record to its event); a record missing there rendered then as it does
// in testdata/golden. The FHIR files of the records missing there until
// h-auditfhir (deny, error, integrity, multi, other, read, retire,
// templates) are testdata/golden's as dedf758 had them: h-auditfhir added
// the patient reference and the user's name to the current rendering.
func TestEarlierRendererIsThePreviousVersions(t *testing.T) {
	for name, r := range goldenRecords() {
		r, err := audit.Decode(audit.Encode(r))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []Format{FormatFHIR, FormatOCSF} {
			b, err := f.renderAs(r, rendererBefore20261206)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			for _, line := range bytes.SplitAfter(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
				got = append(got, indent(t, bytes.TrimSuffix(line, []byte("\n")))...)
			}
			file := name + "." + string(f) + ".json"
			want, err := os.ReadFile(filepath.Join("testdata", "golden", "before-20261206", file))
			if os.IsNotExist(err) {
				want, err = os.ReadFile(filepath.Join("testdata", "golden", file))
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: the earlier renderer differs from 0dfeb9b's:\n%s", file, got)
			}
		}
	}
}

// TestVerifyEarlierVersionsBundle: a bundle whose auditevent.ndjson and
// ocsf.ndjson were rendered by the custos before 2026-12-06 verifies: its
// records.jsonl is the same and its human files are that version's
// rendering of those records, not a change after export. It failed the
// derived check ('the file was changed after export, or was rendered by a
// custos version that renders it differently'): every bundle exported by
// 0dfeb9b that holds an auditor's access (any export after the first) or a
// record of no MCP request failed 'custos audit verify --bundle' with the
// new build. An edit of such a line is still reported.
func TestVerifyEarlierVersionsBundle(t *testing.T) {
	l := openRealLog(t, 30)
	ctx := context.Background()
	for i, action := range []string{"audit/report", "backup", "policy/load"} {
		e := testRecord(uint64(31+i), "").Entry
		e.Action, e.URIs, e.Reason = action, nil, "by=ops"
		if _, err := l.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// Records 34..39, whose rendering changed on 2026-12-05 (section 13's
	// table): custos's own acts (a policy load, an integrity failure, a
	// retirement of a URI recorded as "invalid"), an aggregate refusal, a
	// read of a patient id that is not a keyed hash, and odd text.
	custos := audit.Principal{Sub: "custos", Roles: []string{}}
	for i, edit := range []func(e *audit.Entry){
		func(e *audit.Entry) {
			e.Action, e.URIs, e.Reason, e.Principal = "policy/load", nil, "candidate=sha256:00", custos
		},
		func(e *audit.Entry) {
			e.Action, e.URIs, e.Outcome, e.Reason, e.Principal = "audit/integrity", nil, audit.OutcomeError, "kind=hash_mismatch,seq=4,problems=1,size=9", custos
		},
		func(e *audit.Entry) {
			e.Action, e.URIs, e.Patients, e.Outcome, e.Principal = "auth/reject", nil, nil, audit.OutcomeDeny, audit.Principal{}
			e.Reason = "http_401,no_token,aggregate,count=5,window=2026-11-21T08:59:00Z/2026-11-21T09:00:00Z"
		},
		func(e *audit.Entry) {
			e.Action, e.URIs, e.Reason, e.Principal = "catalog/retire", []string{"invalid"}, "retired", custos
		},
		func(e *audit.Entry) { e.Patients = []string{"12345"} },
		func(e *audit.Entry) { // text FHIR's string rules and CSV's formula rules touch
			e.Reason = "  two\tspaces \x01ctl ;=HYPERLINK(x)  "
			e.Principal = audit.Principal{Sub: "dr\tjones ", Roles: []string{"=clinician", "nurse;@x"}, ClientID: " claude  desktop"}
		},
	} {
		e := testRecord(uint64(34+i), "").Entry
		e.Outcome, e.Digests = audit.OutcomeAllow, nil
		edit(&e)
		if _, err := l.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// Record 40, whose rendering changed with h-review45: a list of two
	// patients whose URIs lie in compartments naming neither.
	stray := queryURIRecords()[2].Entry
	if _, err := l.Append(ctx, stray); err != nil {
		t.Fatal(err)
	}
	// Record 41, whose CSV rendering changed with h-audit12: format
	// characters (a right-to-left override) in a client id and a reason.
	bidi := testRecord(41, "").Entry
	bidi.Principal.ClientID, bidi.Reason = "claude\u202edesktop", "by=\u2066ops\u2069"
	if _, err := l.Append(ctx, bidi); err != nil {
		t.Fatal(err)
	}
	// Record 42, whose CSV rendering changed with h-review48: control
	// characters and a line separator in a client id and a reason.
	ctl := testRecord(42, "").Entry
	ctl.Principal.ClientID, ctl.Reason = "claude\u2028desktop", "by=\x1b[2J\u009b31m\u0085ops"
	if _, err := l.Append(ctx, ctl); err != nil {
		t.Fatal(err)
	}
	k := newTestKey(t, testOrigin, 1)
	vkeys := []byte(k.vkey)
	// write exports records 11..42 and rewrites the human files
	// as the earlier version rd rendered them, with edit applied to each
	// rendering of a record.
	write := func(t *testing.T, rd renderer, edit func(seq uint64, f Format, b []byte) []byte) string {
		dir := filepath.Join(t.TempDir(), "bundle")
		ck := checkpoints(t, k, l, 10, 42)
		if _, err := Write(ctx, dir, l, WriteOptions{From: 11, To: 42, Checkpoints: ck, Formats: Formats}); err != nil {
			t.Fatal(err)
		}
		recs := strings.SplitAfter(strings.TrimSuffix(string(mustRead(t, filepath.Join(dir, FileRecords))), "\n"), "\n")
		differs := false // some file of the earlier version is not the current rendering
		for _, f := range Formats {
			out, err := f.header()
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range recs {
				r, err := audit.Decode([]byte(strings.TrimSuffix(line, "\n")))
				if err != nil {
					t.Fatal(err)
				}
				b, err := f.renderAs(r, rd)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, edit(r.Seq, f, b)...)
			}
			if !bytes.Equal(out, mustRead(t, filepath.Join(dir, f.FileName()))) {
				differs = true
			}
			if err := os.WriteFile(filepath.Join(dir, f.FileName()), out, 0o600); err != nil {
				t.Fatal(err)
			}
			editJSON(t, filepath.Join(dir, FileManifest), func(m *Manifest) { m.Files[f.FileName()] = fmt.Sprintf("sha256:%x", sha256.Sum256(out)) })
		}
		if !differs {
			t.Fatal("every file of the earlier rendering is the current one")
		}
		return dir
	}
	for _, rd := range earlierBuildRenderers() {
		t.Run("as exported by "+earlierBuilds[rd], func(t *testing.T) {
			tr, err := Verify(write(t, rd, func(_ uint64, _ Format, b []byte) []byte { return b }), vkeys)
			if err != nil || !tr.OK {
				t.Fatalf("an earlier version's bundle does not verify: %v\n%s", err, tr.Text())
			}
			if !strings.Contains(tr.Text(), "an earlier custos version's") {
				t.Errorf("the transcript does not say some renderings are an earlier version's:\n%s", tr.Text())
			}
		})
	}
	for _, rd := range earlierBuildRenderers() {
		t.Run("edited, "+earlierBuilds[rd], func(t *testing.T) {
			tr, err := Verify(write(t, rd, func(seq uint64, f Format, b []byte) []byte {
				if seq == 32 {
					return bytes.Replace(b, []byte(`by=ops`), []byte(`by=eve`), 1)
				}
				return b
			}), vkeys)
			for _, f := range Formats {
				if err == nil || tr.OK || !strings.Contains(tr.Text(), "seq 32: derived: "+f.FileName()) {
					t.Fatalf("an edit of an earlier version's %s line is not reported:\n%s", f.FileName(), tr.Text())
				}
			}
		})
	}
}

// earlierBuilds names the main commit whose own build wrote each earlier
// renderer's files in testdata/golden/renderers: that build's header and
// Format.render of every record of records.tsv (name, tab, canonical
// record), dumped by a test added to a git worktree of the commit.
var earlierBuilds = map[renderer]string{
	renderer486663c:        "dedf758",
	rendererBf44145:        "c36f872",
	renderer311e1f4:        "e4efd0a",
	renderer0a0ff79:        "264c3fa",
	renderer384f6a1:        "27b3d0f",
	rendererBefore20261206: "3a19923",
	rendererF35d06f:        "f35d06f",
	rendererAd50907:        "ad50907",
	renderer24e9851:        "24e9851",
	rendererC3d1398:        "c3d1398",
	rendererF2704f7:        "f2704f7",
	renderer471441e:        "471441e",
	rendererA5f7443:        "1c9bd06",
}

// firstDiffering names, for a build of earlierBuilds, the file (records.tsv's
// layout) of the records added to records.tsv for it: the first whose
// rendering differs from the next version's, dumped by that build only.
var firstDiffering = map[string]string{
	// A list of several patients with URIs in compartments naming none
	// of them.
	"264c3fa": "strays.tsv",
	// Format characters (bidi controls, zero-width characters) in the
	// CSV's cells, kept as stored.
	"e4efd0a": "bidi.tsv",
	// Control characters (ESC, C1's CSI and NEL, a vertical tab) and
	// the line and paragraph separators in the CSV's cells, kept as
	// stored.
	"c36f872": "controls.tsv",
}

// namedRecord is a record of testdata/golden/renderers/records.tsv.
type namedRecord struct {
	name string
	r    audit.Record
}

// rendererRecords returns testdata/golden/renderers and the records of its
// records.tsv (name, tab, canonical record, a line each).
func rendererRecords(t *testing.T) (string, []namedRecord) {
	return namedRecords(t, "records.tsv")
}

// namedRecords returns testdata/golden/renderers and the records of its
// file tsv (records.tsv's layout).
func namedRecords(t *testing.T, tsv string) (string, []namedRecord) {
	dir := filepath.Join("testdata", "golden", "renderers")
	var recs []namedRecord
	for _, line := range strings.Split(strings.TrimSuffix(string(mustRead(t, filepath.Join(dir, tsv))), "\n"), "\n") {
		name, rec, _ := strings.Cut(line, "\t")
		r, err := audit.Decode([]byte(rec))
		if err != nil {
			t.Fatalf("%s %s: %v", tsv, name, err)
		}
		recs = append(recs, namedRecord{name, r})
	}
	return dir, recs
}

// earlierBuildRenderers returns the renderers of earlierBuilds, newest
// first: the versions whose bundles must verify, whatever earlierRenderers
// holds.
func earlierBuildRenderers() []renderer {
	rds := slices.Collect(maps.Keys(earlierBuilds))
	slices.Sort(rds)
	slices.Reverse(rds)
	return rds
}

// TestEarlierRenderersAreThoseBuilds: each earlier renderer renders every
// record of testdata/golden/renderers/records.tsv byte for byte as the
// build it stands for did, in every format, header included; and every
// renderer differs from the next newer one in at least one record (a
// renderer that renders nothing differently is not a version).
func TestEarlierRenderersAreThoseBuilds(t *testing.T) {
	dir, recs := rendererRecords(t)
	if len(earlierBuilds) != len(earlierRenderers) {
		t.Fatalf("earlierRenderers has %d versions, earlierBuilds %d", len(earlierRenderers), len(earlierBuilds))
	}
	for i, rd := range earlierRenderers {
		commit, ok := earlierBuilds[rd]
		if !ok {
			t.Fatalf("earlier renderer %d has no build in earlierBuilds", rd)
		}
		if i > 0 && earlierRenderers[i-1] <= rd {
			t.Errorf("earlierRenderers is not newest first at %s", commit)
		}
		for _, f := range Formats {
			head, err := f.header()
			if err != nil {
				t.Fatal(err)
			}
			if want := mustRead(t, filepath.Join(dir, commit, "header."+string(f))); !bytes.Equal(head, want) {
				t.Errorf("%s: the %s header differs from that build's:\n%s", commit, f, head)
			}
		}
		newer := rendererCurrent
		if i > 0 {
			newer = earlierRenderers[i-1]
		}
		differs := false
		recs := recs
		if tsv, ok := firstDiffering[commit]; ok {
			_, more := namedRecords(t, tsv)
			recs = append(slices.Clip(recs), more...)
		}
		for _, nr := range recs {
			name, r := nr.name, nr.r
			for _, f := range Formats {
				got, err := f.renderAs(r, rd)
				if err != nil {
					t.Fatal(err)
				}
				file := filepath.Join(dir, commit, name+"."+string(f))
				if want := mustRead(t, file); !bytes.Equal(got, want) {
					t.Errorf("%s: renderer %d differs from the build's rendering:\n got %s\nwant %s", file, rd, got, want)
				}
				if b, _ := f.renderAs(r, newer); !bytes.Equal(got, b) {
					differs = true
				}
			}
		}
		if !differs {
			t.Errorf("%s renders every record as the next newer version does", commit)
		}
	}
}

// TestBuildsBetweenVersionsAreRecognised: the build of 13710ad (FHIR text
// made to fit FHIR's rules, CSV as before) has no renderer of their own:
// each line it wrote is one renderer's, and the derived check tries them
// per record and file; f2704f7's (CSV list elements defused) is one since
// rendererF2704f7 and is checked here too. Their files in
// testdata/golden/renderers were written by their own builds, f2704f7's
// for between.tsv's record as well: a CSV row holding both a cell whose
// start only f2704f7 defused (a fullwidth equals sign) and a formula after
// a ';' that only later versions defuse. That row was no renderer's before
// rendererF2704f7: a bundle of f2704f7 holding it failed the derived check.
func TestBuildsBetweenVersionsAreRecognised(t *testing.T) {
	dir, recs := rendererRecords(t)
	_, between := namedRecords(t, "between.tsv")
	for _, commit := range []string{"13710ad", "f2704f7"} {
		if commit == "f2704f7" {
			recs = append(recs, between...)
		}
		for _, nr := range recs {
			name, r := nr.name, nr.r
			for _, f := range Formats {
				want := mustRead(t, filepath.Join(dir, commit, name+"."+string(f)))
				if !slices.ContainsFunc(slices.Concat(earlierRenderers, []renderer{rendererCurrent}), func(rd renderer) bool {
					b, err := f.renderAs(r, rd)
					return err == nil && bytes.Equal(b, want)
				}) {
					t.Errorf("%s: %s %s is no renderer's:\n%s", commit, name, f, want)
				}
			}
		}
	}
}
