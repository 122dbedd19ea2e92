package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// testRules is the label rules version the tests' derive applies.
const testRules = 1

// testDerive stands for fhirin.BodyLabels (which store cannot import):
// "residence" for a body naming v3-RoleCode PTRES, nothing else.
func testDerive(body []byte) ([]string, error) {
	if !bytes.HasPrefix(body, []byte("{")) {
		return nil, errors.New("not a JSON object")
	}
	if bytes.Contains(body, []byte(`"PTRES"`)) {
		return []string{"residence"}, nil
	}
	return nil, nil
}

// openLiveRules opens path as serve does (OpenLive) requiring the label
// rules version rules, and closes it.
func openLiveRules(t *testing.T, path string, opts Options, rules uint32) error {
	t.Helper()
	opts.Timeout = time.Second
	l, err := OpenLive(path, LiveOptions{Options: opts, LabelRules: rules})
	if err == nil {
		l.Close()
	}
	return err
}

// oldRulesEntries are a tenant's resources as rules before the residence
// rule labelled them: a home Location (tenant-level) and a ward, and
// linkEntries' patient compartment (d links b1 and carries an attachment,
// l names b1 and b2, q b2) whose d contains a home Location, all
// unlabelled.
func oldRulesEntries(n *Namer) []Entry {
	es := linkEntries(n, "b1")
	for i := range es {
		if es[i].ID == "d" {
			es[i].Body = bytes.Replace(es[i].Body, []byte(`"id":"d",`), []byte(`"id":"d","contained":[{"resourceType":"Location","id":"h","type":[{"coding":[{"code":"PTRES"}]}]}],`), 1)
		}
	}
	return append(es,
		fhirEntry("Location", "home", "", `{"resourceType":"Location","id":"home","type":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode","code":"PTRES"}]}],"address":{"line":["14 Orchard Lane"]}}`),
		fhirEntry("Location", "ward", "", `{"resourceType":"Location","id":"ward","name":"Ward 3"}`))
}

// sensitivities maps each live resource's URI to its sensitivity labels.
func sensitivities(t *testing.T, path string, opts Options) map[string][]string {
	t.Helper()
	opts.ReadOnly, opts.Timeout = true, time.Second
	s := openKeyed(t, path, opts)
	defer s.Close()
	out := map[string][]string{}
	for _, r := range allResources(t, s) {
		out[r.URI] = r.Labels.Sensitivity
	}
	return out
}

// A catalog whose labels older rules derived (here: imported stating no
// rules version, as a custos before the version did not) is refused by
// OpenLive with ErrOldLabelRules; Relabel gives the home Location, and the
// resource containing one, "residence", and with it that resource's
// lifted attachment and its Binary component to the fixed point (b1, l
// naming b1, b2 named by l, q naming b2), never the ward; it records the
// version, so the catalog opens. A dry run reports the same and leaves
// the file byte-identical, and a second Relabel changes nothing. Plaintext
// and encrypted (bodies decrypted with the catalog's keys).
func TestRelabel(t *testing.T) {
	for _, enc := range []bool{false, true} {
		t.Run(map[bool]string{false: "plaintext", true: "encrypted"}[enc], func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			path := filepath.Join(dir, "catalog.db")
			n := testNamer(t, "gh")
			var opts Options
			if enc {
				opts.DataKeys = newFakeKeys(testKEK)
			}
			opts.Timeout = time.Second
			if _, err := ImportEntriesStaged(ctx, path, entries(oldRulesEntries(n)...), EntryOptions{Namer: n}, opts); err != nil {
				t.Fatal(err)
			}
			// As a custos before the version left it: no version at all.
			editDB(t, path, func(tx *bolt.Tx) error {
				if err := tx.Bucket(bucketMeta).Delete(metaLabelRulesKey); err != nil {
					return err
				}
				return markSettled(tx) // its labels settled otherwise
			})
			if err := openLiveRules(t, path, opts, testRules); !errors.Is(err, ErrOldLabelRules) || !strings.Contains(err.Error(), "predate every label rules version") {
				t.Fatalf("OpenLive of the old catalog = %v, want ErrOldLabelRules saying its labels predate every version", err)
			}
			before := sensitivities(t, path, opts)
			sum := fileSum(t, path)

			o := RelabelOptions{Rules: testRules, Derive: testDerive}
			dry := o
			dry.DryRun = true
			drep, err := Relabel(ctx, path, dry, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := fileSum(t, path); got != sum {
				t.Fatal("a dry run changed the catalog file")
			}
			if des, _ := os.ReadDir(dir); len(des) != 2 { // catalog.db and its import lock
				t.Errorf("a dry run left files: %v", des)
			}
			if err := openLiveRules(t, path, opts, testRules); !errors.Is(err, ErrOldLabelRules) {
				t.Fatalf("OpenLive after a dry run = %v, want ErrOldLabelRules", err)
			}

			rep, err := Relabel(ctx, path, o, opts)
			if err != nil {
				t.Fatal(err)
			}
			// home, d, its attachment, b1, l, b2, q.
			want := RelabelReport{Resources: 9, Read: 6, Relabelled: 7, Added: map[string]int{"residence": 7}, Removed: map[string]int{}, Rules: testRules}
			dwant := want
			dwant.DryRun = true
			if !sameRelabelReport(rep, want) || !sameRelabelReport(drep, dwant) {
				t.Errorf("relabel: %+v\ndry run: %+v\nwant %+v", rep, drep, want)
			}
			after := sensitivities(t, path, opts)
			home, ward := n.Link("Location", "home", ""), n.Link("Location", "ward", "")
			for uri, labels := range after {
				wantL := []string{"residence"}
				if uri == ward || strings.Contains(uri, "/patient/") {
					wantL = nil
				}
				if !slices.Equal(labels, wantL) {
					t.Errorf("%s: %v, want %v (before %v)", uri, labels, wantL, before[uri])
				}
			}
			if !slices.Equal(after[home], []string{"residence"}) {
				t.Errorf("home Location: %v", after[home])
			}
			if err := openLiveRules(t, path, opts, testRules); err != nil {
				t.Fatalf("OpenLive after relabel: %v", err)
			}
			checkDB(t, path)
			checkLinkIndex(t, path, opts, n)

			sum = fileSum(t, path)
			again, err := Relabel(ctx, path, o, opts)
			if err != nil || again.Relabelled != 0 || len(again.Added)+len(again.Removed) != 0 {
				t.Fatalf("second relabel: %+v %v, want nothing relabelled", again, err)
			}
			if fileSum(t, path) != sum {
				t.Error("a second relabel changed the catalog file")
			}
		})
	}
}

func sameRelabelReport(a, b RelabelReport) bool {
	return a.Resources == b.Resources && a.Read == b.Read && a.Relabelled == b.Relabelled && a.Rules == b.Rules &&
		a.DryRun == b.DryRun && fmt.Sprint(a.Added) == fmt.Sprint(b.Added) && fmt.Sprint(a.Removed) == fmt.Sprint(b.Removed)
}

// A relabel that fails changes nothing: a body the rules cannot read (an
// undecodable one; a missing blob) is refused before anything is written,
// naming how many; a relabel abandoned after its writes (the context
// canceled while it ran) leaves the scratch copy unrenamed. The catalog
// file stays byte-identical and still refused.
func TestRelabelFailureChangesNothing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	n := testNamer(t, "gh")
	if _, err := stagedImport(t, path, EntryOptions{Namer: n}, oldRulesEntries(n)...); err != nil {
		t.Fatal(err)
	}
	sum := fileSum(t, path)
	o := RelabelOptions{Rules: testRules, Derive: func(body []byte) ([]string, error) {
		if bytes.Contains(body, []byte(`"id":"ward"`)) {
			return nil, errors.New("undecodable")
		}
		return testDerive(body)
	}}
	_, err := Relabel(ctx, path, o, Options{Timeout: time.Second})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "1 of the 6 stored FHIR resources cannot be read (0 bodies missing, 1 undecodable)") {
		t.Fatalf("relabel with an undecodable body: %v", err)
	}
	if fileSum(t, path) != sum {
		t.Fatal("a refused relabel changed the catalog")
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	o.Derive = func(body []byte) ([]string, error) { cancel(); return testDerive(body) }
	if _, err := Relabel(cctx, path, o, Options{Timeout: time.Second}); !errors.Is(err, context.Canceled) {
		t.Fatalf("relabel canceled while it ran: %v", err)
	}
	if fileSum(t, path) != sum {
		t.Fatal("an abandoned relabel changed the catalog")
	}

	// A body gone from the blobs (the labels kept settled, as this
	// custos's write would).
	s := openRead(t, path)
	var ward Resource
	for _, r := range allResources(t, s) {
		if r.URI == n.Link("Location", "ward", "") {
			ward = r
		}
	}
	s.Close()
	editDB(t, path, func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketBlobs).Delete(mustDigestKey(t, ward.Digest)); err != nil {
			return err
		}
		return markSettled(tx)
	})
	sum = fileSum(t, path)
	_, err = Relabel(ctx, path, RelabelOptions{Rules: testRules, Derive: testDerive}, Options{Timeout: time.Second})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "(1 bodies missing, 0 undecodable)") {
		t.Fatalf("relabel with a missing body: %v", err)
	}
	if fileSum(t, path) != sum {
		t.Fatal("a refused relabel changed the catalog")
	}
	if err := openLiveRules(t, path, Options{}, testRules); !errors.Is(err, ErrOldLabelRules) {
		t.Fatalf("OpenLive after the failed relabels = %v, want ErrOldLabelRules", err)
	}
}

// The label rules version a catalog records is the oldest its live items
// may carry: an import records its rules in a catalog without streaming
// data, an incremental import lowers it to its own, a full import raises
// it only when every live streaming item is its own (not while another
// tenant's are live), and a write by a custos that does not keep it makes
// it unknown. A manifest-only catalog needs none. Reencrypt's compaction
// keeps it.
func TestLabelRulesVersion(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.db")
	opens := func(step string, rules uint32, opts Options) {
		t.Helper()
		if err := openLiveRules(t, path, opts, rules); err != nil {
			t.Fatalf("after %s: OpenLive(rules %d) = %v, want it to open", step, rules, err)
		}
	}
	refused := func(step string, rules uint32, why string, opts Options) {
		t.Helper()
		if err := openLiveRules(t, path, opts, rules); !errors.Is(err, ErrOldLabelRules) || !strings.Contains(err.Error(), why) {
			t.Fatalf("after %s: OpenLive(rules %d) = %v, want ErrOldLabelRules saying %q", step, rules, err, why)
		}
	}

	f := newFixture(t)
	f.addN(2)
	f.writeManifest()
	if _, err := ImportStaged(ctx, path, f.dir, Options{Timeout: time.Second}, nil); err != nil {
		t.Fatal(err)
	}
	opens("a manifest import", 7, Options{})

	gh, other := testNamer(t, "gh"), testNamer(t, "other")
	day := []Entry{itemEntry("Patient", "p1", "p1", false), itemEntry("Observation", "o1", "p1", false)}
	if _, err := stagedImport(t, path, EntryOptions{Namer: gh, LabelRules: 2}, day...); err != nil {
		t.Fatal(err)
	}
	opens("the first streaming import", 2, Options{})
	refused("the first streaming import", 3, "were derived with label rules version 2, and this custos's are version 3", Options{})

	if _, err := stagedImport(t, path, EntryOptions{Namer: gh, LabelRules: 1}, itemEntry("Observation", "o2", "p1", false)); err != nil {
		t.Fatal(err)
	}
	refused("an incremental import with older rules", 2, "version 1", Options{})
	if _, err := stagedImport(t, path, EntryOptions{Namer: gh, LabelRules: 2}, day...); err != nil {
		t.Fatal(err)
	}
	refused("an incremental import with the rules", 2, "version 1", Options{})
	rep, err := stagedImport(t, path, EntryOptions{Namer: gh, LabelRules: 2, Full: true}, append(day, itemEntry("Observation", "o2", "p1", false))...)
	if err != nil || rep.Unchanged != 3 {
		t.Fatalf("full import: %+v %v, want every entry unchanged", rep, err)
	}
	opens("a full import of every streaming item, changing nothing else", 2, Options{})

	if _, err := stagedImport(t, path, EntryOptions{Namer: other, LabelRules: 1}, itemEntry("Patient", "p9", "p9", false)); err != nil {
		t.Fatal(err)
	}
	if _, err := stagedImport(t, path, EntryOptions{Namer: gh, LabelRules: 2, Full: true}, day...); err != nil {
		t.Fatal(err)
	}
	refused("a full import of one tenant of two", 2, "version 1", Options{})
	if _, err := Relabel(ctx, path, RelabelOptions{Rules: 2, Derive: testDerive}, Options{Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	opens("relabel", 2, Options{})

	dk := newFakeKeys(testKEK)
	s := openKeyed(t, path, Options{DataKeys: dk, Migrate: true})
	if st, err := s.Reencrypt(ctx, nil); err != nil || !st.Compacted {
		t.Fatalf("reencrypt: %+v %v", st, err)
	}
	s.Close()
	opens("reencrypt and its compaction", 2, Options{DataKeys: dk})

	editDB(t, path, func(tx *bolt.Tx) error { return markSettled(tx) }) // a custos that keeps settled labels only
	refused("a write by a custos that does not keep the version", 0, "does not keep the label rules version", Options{DataKeys: dk})
}
