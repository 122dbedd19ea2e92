package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/store"
	"github.com/custos-mcp/custos/store/synth"
)

// Golden vectors of research aliases, computed independently (Python's
// hmac and uuid modules): key = bytes 0..31. One id in two tenants has two
// aliases (TestResearchAliasesArePerTenant); v1, which hashed the id
// alone, gave 67956e46-6679-80b2-a37e-97bc46958d62 for the first id in
// every tenant.
func TestResearchAliasGolden(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	for _, v := range []struct{ tenant, id, want string }{
		{"general-hospital", "7d1a3c52-0b8e-4f57-9a77-2f3d1c9b0a01", "7a307b89-c8d3-8765-ab6e-93eb86a32c2d"},
		{"general-hospital", "11111111-1111-4111-8111-111111111111", "507598ba-0c49-86c9-8b9b-23aecbbdb2dc"},
		{"other-clinic", "7d1a3c52-0b8e-4f57-9a77-2f3d1c9b0a01", "d63d1707-3349-803c-bd6f-b69ecf9924fb"},
		{"other-clinic", "11111111-1111-4111-8111-111111111111", "5a3ad2c9-56a1-84db-bb7f-8802819a3323"},
	} {
		if got := researchAlias(key, v.tenant, v.id); got != v.want {
			t.Errorf("researchAlias(%s, %s) = %s, want %s", v.tenant, v.id, got, v.want)
		}
	}
}

// A research entity tag is keyed by the URI the caller is shown: it is never
// the tag another caller gets for the real URI under the same obligations,
// and two aliases of one stored version get different tags.
func TestResearchEntityTagIsNotTheRealURIsTag(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	r := store.Resource{URI: "fhir://t/patients/p/observation/o", Digest: "sha256:" + strings.Repeat("ab", 32), Version: 2}
	d := policy.Decision{Allow: true, Obligations: []minimize.Obligation{{Op: minimize.OpDeidentify, Fn: minimize.DeidentifySafeHarbor}}}
	real := entityTag(r, d, key)
	a1 := researchEntityTag(r, d, key, "fhir://t/patients/a/observation/b")
	a2 := researchEntityTag(r, d, key, "fhir://t/patients/c/observation/d")
	if real == "" || a1 == "" || a1 == real || a2 == real || a1 == a2 {
		t.Fatalf("tags real %q, alias %q and %q must all differ", real, a1, a2)
	}
	if researchEntityTag(r, d, nil, "x") != "" {
		t.Fatal("a research tag without a key")
	}
}

// Research list titles and descriptions are made from the type alone.
func TestResearchTitleFromTypeOnly(t *testing.T) {
	sh := policy.Decision{Allow: true, Revision: "sha256:ab", Obligations: []minimize.Obligation{{Op: minimize.OpDeidentify, Fn: minimize.DeidentifySafeHarbor}}}
	title, desc := researchTitle("observation", sh)
	if title != "Observation (de-identified)" || minimize.ScrubString(desc) != desc || strings.Contains(desc, "observation/") {
		t.Fatalf("researchTitle = %q, %q", title, desc)
	}
}

// Research aliases are kept for tenants of the catalog only: naming other
// tenants (any caller can put any tenant in a URI) does not grow the map,
// and they resolve nothing. The golden vector above holds for the aliases
// made with one reused keyed state too.
func TestTenantAliasesKeepOnlyCatalogTenants(t *testing.T) {
	_, ix := seededIndex(t, 3, 2)
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	a := &aliaser{key: secrets.Key{ID: "k", Bytes: key}, s: &Server{}}
	for i := range 100 {
		u := store.URI{Scheme: store.SchemeFHIR, Tenant: fmt.Sprintf("t%d", i), Patient: "67956e46-6679-80b2-a37e-97bc46958d62", Type: "patient", ID: "5601172e-6311-8704-905e-34f744e16709"}
		if _, ok := a.indexedIn(ix, u); ok {
			t.Fatal("an unknown tenant resolved")
		}
	}
	ta := a.tenantAliases(ix, synth.DefaultTenant, true)
	if n := len(a.s.aliases.tenants); n != 1 || len(ta.patient) != 3 || len(ta.groups) == 0 {
		t.Fatalf("%d tenants kept, %d patients, %d groups", n, len(ta.patient), len(ta.groups))
	}
	for al, p := range ta.patient {
		if researchAlias(key, synth.DefaultTenant, p.seg) != al || p.label != p.seg { // the manifest format: label = URI segment
			t.Fatalf("alias of %+v: %s, want %s", p, al, researchAlias(key, synth.DefaultTenant, p.seg))
		}
	}
}

// A research list item shows nothing the source chose, for every type a
// catalog can hold (every R4 resource type, not only the seed's, and the
// note, report, image and attachment families): its name is the type and
// the alias's letters, its title and description are made from the type
// (the FHIR spelling for an R4 type, never "A FHIR R4 note resource"),
// and the source's annotations (a priority the manifest set, which can
// hold any number: 0.219099999 carries an SSN's digits; lastModified) are
// not shown.
func TestResearchListItemShowsNothingOfTheSource(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	a := &aliaser{key: secrets.Key{ID: "k", Bytes: key}, s: &Server{}}
	d := policy.Decision{Allow: true, Obligations: []minimize.Obligation{{Op: minimize.OpDeidentify, Fn: minimize.DeidentifySafeHarbor}}}
	const patient, id = "7d1a3c52-0b8e-4f57-9a77-2f3d1c9b0a01", "11111111-1111-4111-8111-111111111111"
	uris := map[string]string{
		store.TypeNote:       "note://t/patients/" + patient + "/notes/" + id,
		store.TypeReport:     "report://t/patients/" + patient + "/reports/" + id,
		store.TypeImage:      "image://t/patients/" + patient + "/images/" + id,
		store.TypeAttachment: "attachment://t/patients/" + patient + "/attachments/" + id,
	}
	for _, typ := range store.FHIRTypes() {
		uris[typ] = "fhir://t/patients/" + patient + "/" + typ + "/" + id
	}
	for typ, uri := range uris {
		r := store.Resource{URI: uri, Name: "Evelyn Marsh 219-09-9999", Title: "Evelyn Marsh, MRN 77441123", Description: "1420 Wrenfield Lane, Tallowmere 05501",
			MIMEType: "application/fhir+json", Version: 3, Digest: "sha256:" + strings.Repeat("ab", 32),
			Annotations: store.Annotations{Audience: []string{"user"}, Priority: 0.219099999, LastModified: time.Date(1931, 3, 14, 0, 0, 0, 0, time.UTC)},
			Labels:      store.Labels{Type: typ, Patient: patient}}
		item := listItem(r, d, key)
		a.present(item, r, d, key)
		b, err := json.Marshal(item)
		if err != nil {
			t.Fatal(err)
		}
		for _, leak := range []string{"Evelyn", "Marsh", "219", "7744", "Wrenfield", "05501", "1931", patient, id} {
			if strings.Contains(string(b), leak) {
				t.Errorf("%s: the research list item shows %q: %s", typ, leak, b)
			}
		}
		fhirName := store.FHIRResourceType(typ)
		switch {
		case fhirName != "" && (item.Title != fhirName+" (de-identified)" || !strings.Contains(item.Description, "FHIR R4 "+fhirName+" resource")):
			t.Errorf("%s: title %q, description %q", typ, item.Title, item.Description)
		case fhirName == "" && (strings.Contains(item.Description, "FHIR") || item.Title == "" || item.Title[0] < 'A' || item.Title[0] > 'Z'):
			t.Errorf("%s, not a FHIR type: title %q, description %q", typ, item.Title, item.Description)
		}
	}
}

// WarmResearchAliases builds, for the catalog's index and the audit key,
// what a researcher's first list would (every tenant's aliases and
// groups, by the same tenantAliases), so that list finds it built; with
// the key unavailable it returns the error and builds nothing.
func TestWarmResearchAliases(t *testing.T) {
	live, ix := seededIndex(t, 4, 3)
	keys, err := secrets.NewDev()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: Config{Catalog: live, Keys: keys}}
	if err := s.WarmResearchAliases(context.Background()); err != nil {
		t.Fatal(err)
	}
	k, err := keys.AuditKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a := &aliaser{key: k, s: s}
	warm := s.aliases.tenants[synth.DefaultTenant]
	if s.aliases.tix != ix || s.aliases.tkey != a.keyID() || len(s.aliases.tenants) != len(ix.Tenants()) ||
		warm == nil || len(warm.patient) != 4 || len(warm.groups) == 0 {
		t.Fatalf("not built ahead: index %v, key %v, %d tenants of %v, %+v", s.aliases.tix == ix, s.aliases.tkey == a.keyID(), len(s.aliases.tenants), ix.Tenants(), warm)
	}
	if got := a.tenantAliases(ix, synth.DefaultTenant, true); got != warm {
		t.Fatal("the first list built the aliases again")
	}
	// The same as a first list builds them without the warm-up.
	cold := (&aliaser{key: k, s: &Server{}}).tenantAliases(ix, synth.DefaultTenant, true)
	if fmt.Sprint(cold.patient) != fmt.Sprint(warm.patient) || fmt.Sprint(cold.groups) != fmt.Sprint(warm.groups) {
		t.Fatalf("warm and cold aliases differ:\n%v\n%v", warm, cold)
	}

	// A tenant over the bound is left to its first research list.
	defer func(n int) { maxWarmPatients = n }(maxWarmPatients)
	maxWarmPatients = 3
	big := &Server{cfg: Config{Catalog: live, Keys: keys}}
	if err := big.WarmResearchAliases(context.Background()); err != nil || len(big.aliases.tenants) != 0 {
		t.Fatalf("over the bound: %v, %d tenants built", err, len(big.aliases.tenants))
	}

	down := &Server{cfg: Config{Catalog: live, Keys: sealedAuditKey{keys}}}
	if err := down.WarmResearchAliases(context.Background()); err == nil || len(down.aliases.tenants) != 0 {
		t.Fatalf("key unavailable: %v, %d tenants built", err, len(down.aliases.tenants))
	}
}

// sealedAuditKey is a key set whose audit key is unavailable (a sealed
// Vault).
type sealedAuditKey struct{ Keys }

func (sealedAuditKey) AuditKey(context.Context) (secrets.Key, error) {
	return secrets.Key{}, fmt.Errorf("vault sealed")
}

// seededIndex is a live catalog of a seeded data set of n patients (seed
// s), closed at the test's end, and its index.
func seededIndex(t *testing.T, n int, s int64) (*store.Live, *store.Index) {
	t.Helper()
	dir := t.TempDir()
	seed, cat := filepath.Join(dir, "seed"), filepath.Join(dir, "catalog.db")
	if _, err := synth.Generate(context.Background(), seed, synth.Options{Patients: n, Seed: s}); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(cat, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(context.Background(), seed, nil); err != nil {
		t.Fatal(err)
	}
	st.Close()
	live, err := store.OpenLive(cat, store.LiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Close() })
	ix, err := live.Index()
	if err != nil {
		t.Fatal(err)
	}
	return live, ix
}

// fixedReferencer names every resource of tenant "t" "k-" + its id.
type fixedReferencer struct{}

func (fixedReferencer) KeyedID(tenant, typ, id string) (string, bool) {
	if tenant != "t" {
		return "", false
	}
	return "k-" + id, true
}

// The pseudonymize obligation's names (readKeyID): a caller other than a
// researcher gets the keyed id of the resource's URI; a research read by
// alias the alias of that keyed id, the id its research URI carries; any
// other research read, a resource a manifest import named (its URI holds
// no keyed id), or a server without References, no name at all (the
// reference keeps its type): a research caller never sees a catalog id.
func TestReadKeyIDFollowsTheResearchView(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	al := &aliaser{key: secrets.Key{ID: "k", Bytes: key}, s: &Server{}}
	s := &Server{cfg: Config{References: fixedReferencer{}}}
	for _, c := range []struct {
		name     string
		s        *Server
		keyed    bool
		al       *aliaser
		viaAlias bool
		want     string // "" for no name
	}{
		{"biller", s, true, nil, false, "k-1"},
		{"biller, a manifest import's resource", s, false, nil, false, ""},
		{"research read by alias", s, true, al, true, researchAlias(key, "t", "k-1")},
		{"research read of a catalog URI", s, true, al, false, ""},
		{"no References", &Server{}, true, nil, false, ""},
	} {
		got, ok := c.s.readKeyID("t", c.keyed, c.al, c.viaAlias)("Coverage", "1")
		if ok != (c.want != "") || got != c.want {
			t.Errorf("%s: %q %v, want %q", c.name, got, ok, c.want)
		}
	}
	if _, ok := s.readKeyID("u", true, nil, false)("Coverage", "1"); ok {
		t.Error("another tenant's resource was named")
	}
}
