package app

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/store"
)

// Labels a Binary gains reach every live resource of its compartment that
// links or mentions it, including those of earlier imports that this one
// does not hold, and a mentioning resource's labels reach the Binary, to a
// fixed point, in the same all-or-nothing import (h-propagate; each of
// these was a documented known limit of docs/import.md before).

const (
	lnkSDV = `{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"SDV"}`
	// lnkBinHIV is p's Binary bx, now HIV-labelled.
	lnkBinHIV = `{"resourceType":"Binary","id":"bx","meta":{"security":[` + lnkHIV + `]},"securityContext":{"reference":"Patient/p"},"contentType":"text/plain","data":"aGk="}`
)

// lnkAnswer is a QuestionnaireResponse id of patient whose answer's
// valueAttachment names url, with the given meta.security codings.
func lnkAnswer(id, patient, url string, security ...string) string {
	return `{"resourceType":"QuestionnaireResponse","id":"` + id + `","status":"completed"` + lnkMeta(security) + `,"subject":{"reference":"Patient/` + patient +
		`"},"item":[{"linkId":"1","answer":[{"valueAttachment":{"contentType":"text/plain","url":"` + url + `","title":"result"}}]}]}`
}

func (f *linkFixture) labels(typ, id, patient string) []string {
	f.t.Helper()
	r, _ := f.get(typ, id, patient)
	return r.Labels.Sensitivity
}

func (f *linkFixture) version(typ, id, patient string) int {
	f.t.Helper()
	r, _ := f.get(typ, id, patient)
	return r.Version
}

func (f *linkFixture) want(typ, id, patient string, labels ...string) {
	f.t.Helper()
	if got := f.labels(typ, id, patient); !slices.Equal(got, labels) {
		f.t.Errorf("%s %s: labels %v, want %v", typ, id, got, labels)
	}
}

// Example 1: import 1 stores DocumentReference d (no labels) linking
// Binary bx (no labels); import 2 (incremental) holds only bx, now HIV.
// d described bx to callers without the hiv role after import 2; now d
// gets a new version with hiv in import 2.
func TestPropagateBinaryLabelToStoredCarrier(t *testing.T) {
	f := newLinkFixture(t)
	f.mustImp(true, map[string][]string{"Patient": {lnkPat}, "Binary": {lnkBin}, "DocumentReference": {lnkDoc("d", "bx", "a")}})
	f.want("DocumentReference", "d", "p")
	rep := f.mustImp(false, map[string][]string{"Binary": {lnkBinHIV}})
	f.want("Binary", "bx", "p", "hiv")
	f.want("DocumentReference", "d", "p", "hiv")
	if rep.Relabelled != 1 || rep.Updated != 1 {
		t.Errorf("report %+v, want the Binary updated and d relabelled", rep)
	}
	if v := f.version("DocumentReference", "d", "p"); v != 2 {
		t.Errorf("d at version %d, want 2", v)
	}
}

// A Binary shared by two stored carriers: an import relabelling only the
// Binary gives both the label.
func TestPropagateToEveryStoredCarrier(t *testing.T) {
	f := newLinkFixture(t)
	f.mustImp(true, map[string][]string{"Patient": {lnkPat}, "Binary": {lnkBin}, "DocumentReference": {lnkDoc("d1", "bx", "a"), lnkDoc("d2", "bx", "b", lnkPSY)}})
	f.want("Binary", "bx", "p", "psy")
	f.want("DocumentReference", "d1", "p", "psy")
	rep := f.mustImp(false, map[string][]string{"Binary": {lnkBinHIV}})
	for _, d := range []string{"d1", "d2"} {
		f.want("DocumentReference", d, "p", "hiv", "psy")
	}
	f.want("Binary", "bx", "p", "hiv", "psy")
	if rep.Relabelled != 2 {
		t.Errorf("report %+v, want two carriers relabelled", rep)
	}
}

// Example 2: a psy-labelled answer naming Binary bx in its
// valueAttachment.url gives bx psy, and bx's carrier d too (it describes
// bx), in the import that holds them all.
func TestPropagateMentionerLabelsToBinary(t *testing.T) {
	f := newLinkFixture(t)
	rep := f.mustImp(true, map[string][]string{"Patient": {lnkPat}, "Binary": {lnkBin}, "DocumentReference": {lnkDoc("d", "bx", "a")},
		"QuestionnaireResponse": {lnkAnswer("qr", "p", "Binary/bx", lnkPSY)}})
	f.want("Binary", "bx", "p", "psy")
	f.want("DocumentReference", "d", "p", "psy")
	f.want("QuestionnaireResponse", "qr", "p", "psy")
	if rep.Relabelled != 0 {
		t.Errorf("report %+v: the import wrote each item once, with its labels", rep)
	}
	// Re-importing the unchanged set, full or not, creates no version.
	for _, full := range []bool{true, false} {
		rep := f.mustImp(full, map[string][]string{"Patient": {lnkPat}, "Binary": {lnkBin}, "DocumentReference": {lnkDoc("d", "bx", "a")},
			"QuestionnaireResponse": {lnkAnswer("qr", "p", "Binary/bx", lnkPSY)}})
		if rep.Created+rep.Updated+rep.Relabelled+rep.Retired != 0 {
			t.Errorf("re-import (full %v): %+v, want nothing new", full, rep)
		}
	}
	for _, it := range [][2]string{{"Binary", "bx"}, {"DocumentReference", "d"}, {"QuestionnaireResponse", "qr"}} {
		if v := f.version(it[0], it[1], "p"); v != 1 {
			t.Errorf("%s at version %d, want 1", it[0], v)
		}
	}
}

// A chain through the catalog: import 1 stores d linking bx; import 2
// holds only an sdv answer mentioning bx: bx gets sdv and so does d
// (stored, not in import 2); import 3 relabels bx with hiv alone: the
// answer and d get hiv. Each import's changes are new versions of what
// changed only.
func TestPropagateChainThroughCatalog(t *testing.T) {
	f := newLinkFixture(t)
	f.mustImp(true, map[string][]string{"Patient": {lnkPat}, "Binary": {lnkBin}, "DocumentReference": {lnkDoc("d", "bx", "a")}})
	rep := f.mustImp(false, map[string][]string{"QuestionnaireResponse": {lnkAnswer("qr", "p", "Binary/bx", lnkSDV)}})
	f.want("QuestionnaireResponse", "qr", "p", "sdv")
	f.want("Binary", "bx", "p", "sdv")
	f.want("DocumentReference", "d", "p", "sdv")
	if rep.Created != 1 || rep.Relabelled != 2 {
		t.Errorf("import 2: %+v, want the answer created, bx and d relabelled", rep)
	}
	rep = f.mustImp(false, map[string][]string{"Binary": {lnkBinHIV}})
	f.want("Binary", "bx", "p", "hiv", "sdv")
	f.want("DocumentReference", "d", "p", "hiv", "sdv")
	f.want("QuestionnaireResponse", "qr", "p", "hiv", "sdv")
	if rep.Updated != 1 || rep.Relabelled != 2 {
		t.Errorf("import 3: %+v, want bx updated, d and the answer relabelled", rep)
	}
	// Again: nothing changes.
	rep = f.mustImp(false, map[string][]string{"Binary": {lnkBinHIV}, "QuestionnaireResponse": {lnkAnswer("qr", "p", "Binary/bx", lnkSDV)}})
	if rep.Created+rep.Updated+rep.Relabelled+rep.Retired != 0 {
		t.Errorf("re-import: %+v, want nothing new", rep)
	}
}

// Another patient's or another tenant's answer naming Binary/bx (the same
// source id) gives p's bx nothing and takes nothing of it, whether bx
// exists or not: the mention of a Binary outside the resource's
// compartment is ignored as before.
func TestPropagateNotAcrossCompartments(t *testing.T) {
	f := newLinkFixture(t)
	f.mustImp(true, map[string][]string{"Patient": {lnkPat, lnkQ}, "Binary": {lnkBinHIV}, "DocumentReference": {lnkDoc("d", "bx", "a")}})
	f.mustImp(false, map[string][]string{"QuestionnaireResponse": {lnkAnswer("qq", "q", "Binary/bx", lnkSDV), lnkAnswer("qn", "q", "Binary/none", lnkSDV)}})
	f.want("Binary", "bx", "p", "hiv")
	f.want("DocumentReference", "d", "p", "hiv")
	f.want("QuestionnaireResponse", "qq", "q", "sdv")
	f.want("QuestionnaireResponse", "qn", "q", "sdv")
	// Another tenant, same key, same source ids.
	if _, err := ImportFHIR(context.Background(), f.cat, f.dir(map[string][]string{"Patient": {lnkPat}, "QuestionnaireResponse": {lnkAnswer("qr", "p", "Binary/bx", lnkPSY)}}),
		FHIRImport{Tenant: "u", IDKey: f.key}); err != nil {
		t.Fatal(err)
	}
	f.want("Binary", "bx", "p", "hiv")
	f.want("DocumentReference", "d", "p", "hiv")
	if v := f.version("Binary", "bx", "p"); v != 1 {
		t.Errorf("bx at version %d, want 1", v)
	}
	if v := f.version("DocumentReference", "d", "p"); v != 1 {
		t.Errorf("d at version %d, want 1", v)
	}
}

// Example 1 on an encrypted catalog: the stored carrier is relabelled and
// its content stays readable with the keys.
func TestPropagateEncrypted(t *testing.T) {
	f := newLinkFixture(t)
	dk := gcmKeys{kek: make([]byte, 32)}
	imp := func(full bool, files map[string][]string) {
		t.Helper()
		if _, err := ImportFHIR(context.Background(), f.cat, f.dir(files), FHIRImport{Tenant: f.tenant, IDKey: f.key, Full: full, DataKeys: dk}); err != nil {
			t.Fatal(err)
		}
	}
	imp(true, map[string][]string{"Patient": {lnkPat}, "Binary": {lnkBin}, "DocumentReference": {lnkDoc("d", "bx", "a")}})
	imp(false, map[string][]string{"Binary": {lnkBinHIV}})
	st, err := store.Open(f.cat, store.Options{ReadOnly: true, DataKeys: dk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.Get(f.namer.Link("DocumentReference", "d", "p"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Labels.Sensitivity, []string{"hiv"}) || r.Version != 2 {
		t.Errorf("d: labels %v version %d, want [hiv] 2", r.Labels.Sensitivity, r.Version)
	}
	if body, err := st.Blob(context.Background(), r.Digest); err != nil || len(body) == 0 {
		t.Errorf("d's body: %v", err)
	}
}

// The rule that a label leaves a Binary only by a full import holding
// every member of its component still holds: a full import in which the
// answer no longer has psy (and the Binary and its carrier never had it of
// their own) drops psy from all three; an incremental one keeps it.
func TestPropagateFullImportDropsLabel(t *testing.T) {
	f := newLinkFixture(t)
	withPSY := map[string][]string{"Patient": {lnkPat}, "Binary": {lnkBin}, "DocumentReference": {lnkDoc("d", "bx", "a")},
		"QuestionnaireResponse": {lnkAnswer("qr", "p", "Binary/bx", lnkPSY)}}
	without := map[string][]string{"Patient": {lnkPat}, "Binary": {lnkBin}, "DocumentReference": {lnkDoc("d", "bx", "a")},
		"QuestionnaireResponse": {lnkAnswer("qr", "p", "Binary/bx")}}
	f.mustImp(true, withPSY)
	f.mustImp(false, without)
	for _, it := range [][2]string{{"Binary", "bx"}, {"DocumentReference", "d"}, {"QuestionnaireResponse", "qr"}} {
		f.want(it[0], it[1], "p", "psy")
	}
	f.mustImp(true, without)
	for _, it := range [][2]string{{"Binary", "bx"}, {"DocumentReference", "d"}, {"QuestionnaireResponse", "qr"}} {
		f.want(it[0], it[1], "p")
	}
}

// Example 3: a url outside the lifted elements naming a Binary entry of a
// Bundle by its fullUrl (a urn:uuid) is resolved as the lifted elements'
// url is: the answer and the Binary share their labels, and the Binary's
// carrier takes them too; the stored answer's url is Binary/bx.
func TestPropagateMentionByFullURL(t *testing.T) {
	f := newLinkFixture(t)
	const (
		up = "urn:uuid:6b1c2c4e-0d6e-4c55-9b1e-1a2b3c4d5e6f"
		ub = "urn:uuid:7c1c2c4e-0d6e-4c55-9b1e-1a2b3c4d5e6f"
	)
	bundle := `{"resourceType":"Bundle","type":"collection","entry":[` +
		`{"fullUrl":"` + up + `","resource":` + lnkPat + `},` +
		`{"fullUrl":"` + ub + `","resource":` + lnkBin + `},` +
		`{"resource":` + lnkDoc("d", "bx", "a") + `},` +
		`{"resource":` + lnkAnswer("qr", "p", ub, lnkPSY) + `}]}`
	f.mustImp(true, map[string][]string{"Bundle": {bundle}})
	f.want("QuestionnaireResponse", "qr", "p", "psy")
	f.want("Binary", "bx", "p", "psy")
	f.want("DocumentReference", "d", "p", "psy")
	if _, body := f.get("QuestionnaireResponse", "qr", "p"); !strings.Contains(string(body), `"url":"Binary/bx"`) {
		t.Errorf("the answer's url was not resolved: %s", body)
	}
}

// A resource naming, in the same import, a Binary of another compartment
// takes that Binary's labels (as before) and gives it none; re-importing
// the same set creates no version (the store's compartment check agrees
// with the reader's components).
func TestPropagateMentionElsewhereStable(t *testing.T) {
	f := newLinkFixture(t)
	set := map[string][]string{"Patient": {lnkPat, lnkQ}, "Binary": {lnkBinHIV}, "DocumentReference": {lnkDoc("d", "bx", "a")},
		"QuestionnaireResponse": {lnkAnswer("qq", "q", "Binary/bx", lnkSDV)}}
	f.mustImp(true, set)
	f.want("QuestionnaireResponse", "qq", "q", "hiv", "sdv")
	f.want("Binary", "bx", "p", "hiv")
	f.want("DocumentReference", "d", "p", "hiv")
	for _, full := range []bool{true, false} {
		if rep := f.mustImp(full, set); rep.Created+rep.Updated+rep.Relabelled+rep.Retired != 0 {
			t.Errorf("re-import (full %v): %+v, want nothing new", full, rep)
		}
	}
}
