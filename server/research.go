package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"hash"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/store"
)

// ResearchPurpose is the purpose of use (HL7 HRESCH) whose callers see the
// research view: payloads minimized as the policy's obligations demand
// (Safe Harbor under the default policy; what a list item claims follows
// the decision, researchTitle) and, here, research aliases in place of the
// catalog's ids.
const ResearchPurpose = "HRESCH"

// Research aliases. A patient id or resource id is, under Safe Harbor, a
// "unique identifying number or code" (class R) when it is the same code
// the rest of the organization uses: a researcher holding it could link a
// de-identified record to the clinical one. A caller with purpose HRESCH
// therefore never sees catalog ids: every URI it is shown (list items,
// completion values) carries, in place of the patient id and of the
// resource id, an alias — a UUID (version 8) made from
// HMAC-SHA256(audit key, "custos/research-alias/v2" 0x00 tenant 0x00 id).
// Aliases are stable while the audit key version is (so a study can link
// one patient's resources), mean nothing without the key, and are resolved
// back only by the server, through an index of the catalog. They are per
// tenant: ids are unique within a tenant only, and two tenants holding the
// same id (two hospitals numbering their patients alike, an enterprise id
// used in both) must not show their researchers one alias, on which two
// studies could join their data sets (v1 hashed the id alone). Reads, subscriptions and
// audit records use the real URI (audit records pseudonymize it as usual);
// the answer names the URI the caller asked for.

// aliasDomain separates research aliases from every other keyed hash made
// with the audit key (audit.Pseudonym uses another domain).
const aliasDomain = "custos/research-alias/v2\x00"

// researchAlias is the alias of one catalog id of tenant under key:
//
//	UUIDv8(HMAC-SHA256(key, "custos/research-alias/v2" 0x00 tenant 0x00 id)[:16])
func researchAlias(key []byte, tenant, id string) string {
	return newAliasHasher(key).alias(tenant, id)
}

// aliasHasher makes many aliases under one key with one keyed state and
// one scratch buffer: a tenant's first research list makes one per patient.
type aliasHasher struct {
	m   hash.Hash
	buf []byte
	sum [sha256.Size]byte
}

func newAliasHasher(key []byte) *aliasHasher {
	return &aliasHasher{m: hmac.New(sha256.New, key)}
}

// alias is researchAlias(key, tenant, id).
func (h *aliasHasher) alias(tenant, id string) string {
	h.m.Reset()
	h.buf = append(append(append(append(h.buf[:0], aliasDomain...), tenant...), 0), id...)
	h.m.Write(h.buf)
	var u uuid.UUID
	copy(u[:], h.m.Sum(h.sum[:0]))
	u[6] = (u[6] & 0x0f) | 0x80 // version 8 (custom)
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 9562 variant
	return u.String()
}

// aliases is the reverse index alias → catalog id for one audit key
// version, and the catalog's URIs in the order of their research URIs,
// rebuilt from the catalog when an alias is not found or a research list
// starts (at most once per aliasRebuild) or the key changes.
type aliases struct {
	mu    sync.Mutex
	keyID string
	built time.Time
	real  map[string]string // tenant 0x00 alias -> catalog id
	order []aliasedURI      // sorted by shown

	// With an indexed catalog (store.Index), the aliases are built per
	// tenant, lazily, for one key and one catalog index at a time:
	// tenants[t] for (tkey, tix).
	tkey    string
	tix     *store.Index
	tenants map[string]*tenantAliases
}

// tenantAliases are the research aliases of one tenant's patients under
// one audit key and one catalog index. Invariant
// (TestIndexedListAgreesWithPlain): walking groups in order and, in
// each, the members' research URIs sorted, yields the tenant's resources
// in the order of their research URIs — the order the plain index
// (aliases.order) gives them — because every research URI of a group
// starts with the group's prefix and the prefixes are sorted and none is
// a prefix of another. Resource id aliases are not kept: they are made
// for one patient's resources when needed.
type tenantAliases struct {
	groups  []aliasGroup           // sorted by prefix; nil until a list needs them
	patient map[string]aliasTarget // patient alias -> the patient it names
}

// aliasTarget is the patient a patient alias names: its labels' patient id
// (what the index is keyed on) and the URI segment the alias was made of.
// The two are equal for the manifest format; for FHIR input the label is
// the source id and the segment its keyed id. One label patient can have
// resources under both (a tenant moving from manifests to FHIR input), so
// aliases and groups are per URI segment.
type aliasTarget struct{ label, seg string }

// aliasGroup is the resources of one patient under one URI scheme: every
// research URI of them starts with its prefix,
// "{scheme}://{tenant}/patients/{alias}/"; or, with fixed set, the
// tenant-level resources (no patient) whose research URIs start with fixed,
// "{scheme}://{tenant}/{collection}/". No type or collection segment is
// "patients", so no prefix is a prefix of another, and groups are kept
// sorted by prefix.
type aliasGroup struct {
	scheme, alias, patient, seg, fixed string
	pfx                                string // the prefix, made once by aliasGroups
}

// makePrefix makes the prefix of the group in tenant.
func (g aliasGroup) makePrefix(tenant string) string {
	if g.fixed != "" {
		return g.fixed
	}
	return g.scheme + "://" + tenant + "/patients/" + g.alias + "/"
}

// aliasedURI is a catalog URI and the URI a research caller is shown.
type aliasedURI struct{ shown, real string }

const aliasRebuild = time.Second

// aliaser maps one research caller's URIs; nil for every other caller.
type aliaser struct {
	key secrets.Key
	s   *Server
}

// researchAliaser returns the aliaser of id's request, nil if id is not a
// research caller, or an error if the audit key is unavailable (the caller
// refuses the request: a research view without aliases would show ids).
func (s *Server) researchAliaser(ctx context.Context, id Identity) (*aliaser, error) {
	if id.PurposeOfUse != ResearchPurpose {
		return nil, nil
	}
	k, err := s.cfg.Keys.AuditKey(ctx)
	if err != nil {
		return nil, err
	}
	return &aliaser{key: k, s: s}, nil
}

// aliasKeyUnavailable records and refuses a research request whose aliases
// cannot be made (the audit key is unavailable): a research view without
// aliases would show catalog ids.
func (s *Server) aliasKeyUnavailable(ctx context.Context, e audit.Entry, err error) error {
	s.log.Error("audit key unavailable; research request refused", "err", err)
	return s.refuse(ctx, e, audit.OutcomeError, ReasonAuditKeyUnavailable, refused("keys unavailable: request refused"))
}

func (a *aliaser) alias(tenant, id string) string { return researchAlias(a.key.Bytes, tenant, id) }

// present rewrites a list item for the research caller: its URI; its
// name, which the catalog derives from the resource id; its title and
// description, which the catalog takes from the source (they may name the
// patient, an address or a date) and which are rebuilt from the type
// alone; and its entity tag (researchEntityTag, never the tag another
// caller gets for the real URI).
func (a *aliaser) present(item *mcp.Resource, r store.Resource, d policy.Decision, tagKey []byte) {
	typ := r.Labels.Type
	item.URI = a.out(r.URI)
	item.Name = typ
	if u, err := store.ParseURI(item.URI); err == nil && len(u.ID) >= 8 {
		// The alias's first hex digits written as letters (0-f as a-p):
		// a name without digits never looks like a ZIP code or a phone
		// number.
		name := []byte(u.ID[:8])
		for i, c := range name {
			if c >= '0' && c <= '9' {
				name[i] = 'a' + c - '0'
			} else {
				name[i] = 'k' + c - 'a'
			}
		}
		item.Name = typ + "-" + string(name)
	}
	item.Title, item.Description = researchTitle(typ, d)
	if item.Annotations != nil {
		// The priority is the source's number (a manifest sets any in
		// [0, 1], 0.219099999 carries an SSN's digits); the audience is
		// one of custos's two words.
		item.Annotations.Priority = 0
	}
	delete(item.Meta, ETagKey)
	if t := researchEntityTag(r, d, tagKey, item.URI); t != "" {
		item.Meta[ETagKey] = t
	}
}

// researchTitle is the title and description of a research list item,
// made from the resource type and what d, the item's decision, applies
// only: nothing of the source record. The note, report, image and
// attachment families are no FHIR R4 resources and are named as what they
// are.
//
// The research view claims Safe Harbor only when d demands it (the
// deidentify obligation, safeHarbor): the loaded policy, not the purpose,
// decides what a research caller gets, and a policy may release a research
// read minimized field by field (a limited data set, 45 CFR 164.514(e)) or
// whole (research under an IRB waiver, 164.512(i)). Then the description
// says so and names the policy revision that decided, never more
// de-identification than applied (TestResearchListClaimsOnlyWhatWasApplied).
func researchTitle(typ string, d policy.Decision) (title, description string) {
	var what string
	switch typ {
	case store.TypeAttachment:
		title, what = "Attachment", "An attachment (document or image)"
	case store.TypeNote:
		title, what = "Note", "A clinical note"
	case store.TypeReport:
		title, what = "Report", "A report document"
	case store.TypeImage:
		title, what = "Image", "An image"
	default:
		title = typ
		if n := store.FHIRResourceType(typ); n != "" {
			title = n
		}
		what = "A FHIR R4 " + title + " resource"
	}
	switch {
	case safeHarbor(d):
		return title + " (de-identified)", what + ", de-identified under HIPAA Safe Harbor (research view)."
	case len(d.Obligations) > 0:
		return title + " (minimized, not de-identified)", what + ", minimized as policy " + d.Revision + " requires; not de-identified under HIPAA Safe Harbor (research view)."
	default:
		return title + " (not de-identified)", what + ", released as stored under policy " + d.Revision + ": not de-identified (research view)."
	}
}

// safeHarbor reports whether d demands HIPAA Safe Harbor de-identification
// of the whole resource (minimize.OpDeidentify with
// minimize.DeidentifySafeHarbor), the only obligation the research view
// may call de-identification.
func safeHarbor(d policy.Decision) bool {
	return slices.ContainsFunc(d.Obligations, func(o minimize.Obligation) bool {
		return o.Op == minimize.OpDeidentify && o.Fn == minimize.DeidentifySafeHarbor
	})
}

// minimizeAlias is the alias function minimization rewrites references to
// the patient of the resource at u with (minimize.Options.Alias): the alias
// the caller's URIs carry for that patient. The payload names the patient
// by subject, the catalog's labels.patient: for the manifest format that
// is u's patient segment, but for FHIR input it is the source id, while
// the segment is its keyed id (docs/import.md); the alias of the source id
// named nothing the caller is shown (not the patient's URIs, not its
// Patient resource). Other ids (one the payload's subject element names
// beside it) get the alias of the id, under u's tenant.
func (a *aliaser) minimizeAlias(u store.URI, subject string) func(string) string {
	return func(id string) string {
		if id == subject && u.Patient != "" {
			id = u.Patient
		}
		return a.alias(u.Tenant, id)
	}
}

// page returns up to limit catalog resources whose research URI sorts
// after after, in research-URI order, with those URIs: a research list is
// ordered by alias, so that its order says nothing of the catalog's ids.
func (a *aliaser) page(ctx context.Context, after string, limit int) ([]store.Resource, []string, error) {
	order, err := a.ordered(ctx)
	if err != nil {
		return nil, nil, err
	}
	i, _ := slices.BinarySearchFunc(order, after, func(e aliasedURI, t string) int { return strings.Compare(e.shown, t) })
	if i < len(order) && order[i].shown == after {
		i++
	}
	var rs []store.Resource
	var shown []string
	for ; i < len(order) && len(rs) < limit; i++ {
		r, err := a.s.cfg.Catalog.Get(order[i].real)
		if errors.Is(err, store.ErrNotFound) {
			continue // removed since the index was built
		}
		if err != nil {
			return nil, nil, err
		}
		rs, shown = append(rs, r), append(shown, order[i].shown)
	}
	return rs, shown, nil
}

// out is uri as the research caller sees it: patient and resource id
// replaced by their aliases. A URI that does not parse is returned as is
// (the server only shows catalog URIs).
func (a *aliaser) out(uri string) string {
	u, err := store.ParseURI(uri)
	if err != nil {
		return uri
	}
	if u.Patient != "" { // tenant-level reference data has no patient
		u.Patient = a.alias(u.Tenant, u.Patient)
	}
	u.ID = a.alias(u.Tenant, u.ID)
	return u.String()
}

// in resolves a URI the research caller named (its patient and id
// aliases) to the catalog URI; ok is false when either is not an alias of
// a catalog id (the caller gets "not found", as for any missing URI).
func (a *aliaser) in(ctx context.Context, u store.URI) (store.URI, bool) {
	p, ok1 := "", true
	if u.Patient != "" {
		p, ok1 = a.resolve(ctx, u.Tenant, u.Patient)
	}
	id, ok2 := a.resolve(ctx, u.Tenant, u.ID)
	if !ok1 || !ok2 {
		return u, false
	}
	u.Patient, u.ID = p, id
	return u, true
}

// resolve returns the catalog id of tenant whose alias is alias.
func (a *aliaser) resolve(ctx context.Context, tenant, alias string) (string, bool) {
	idx := &a.s.aliases
	idx.mu.Lock()
	defer idx.mu.Unlock()
	if idx.keyID == a.keyID() {
		if id, ok := idx.real[tenant+"\x00"+alias]; ok {
			return id, true
		}
		if time.Since(idx.built) < aliasRebuild {
			return "", false
		}
	}
	if err := a.rebuild(ctx, idx); err != nil {
		a.s.log.Error("cannot index the catalog for research aliases", "err", err)
		return "", false
	}
	id, ok := idx.real[tenant+"\x00"+alias]
	return id, ok
}

// ordered returns the catalog's URIs in research-URI order, rebuilt if
// older than aliasRebuild. The slice is never modified once built.
func (a *aliaser) ordered(ctx context.Context) ([]aliasedURI, error) {
	idx := &a.s.aliases
	idx.mu.Lock()
	defer idx.mu.Unlock()
	if idx.keyID != a.keyID() || time.Since(idx.built) >= aliasRebuild {
		if err := a.rebuild(ctx, idx); err != nil {
			return nil, err
		}
	}
	return idx.order, nil
}

// WarmResearchAliases builds, for the catalog's current index and the
// audit key, every tenant's research aliases and groups: what a
// researcher's first list builds otherwise (tenantAliases), so that the
// first research page after a start or a catalog swap does not pay for it
// (~20-40 ms for a 10,000-patient tenant on the 2-core build machine). It
// fills the same cache the first list would, with the same function, and
// changes nothing a caller sees. It keeps ~550 bytes a patient (measured
// at 3,000 patients), so it builds tenants ahead only up to
// maxWarmPatients patients in all (~55 MB); the others' aliases are built
// by their first research list, as without it. Without an indexed catalog
// it does nothing; an unavailable audit key is returned (a research
// request would be refused for it anyway).
func (s *Server) WarmResearchAliases(ctx context.Context) error {
	ix, err := s.catalogIndex()
	if err != nil || ix == nil {
		return err
	}
	k, err := s.cfg.Keys.AuditKey(ctx)
	if err != nil {
		return err
	}
	a := &aliaser{key: k, s: s}
	warmed := 0
	for _, t := range ix.Tenants() {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := len(ix.Patients(t))
		if warmed+n > maxWarmPatients {
			continue
		}
		warmed += n
		a.tenantAliases(ix, t, true)
	}
	return nil
}

// maxWarmPatients bounds the patients whose research aliases
// WarmResearchAliases builds ahead (a var: tests lower it).
var maxWarmPatients = 100_000

// tenantAliases returns the aliases of tenant's patients in ix, built on
// first use for this key and index (one keyed hash per patient of the
// tenant, ~0.5 µs each: a few ms for 10,000 patients, against ~1 s for
// the plain index of a 100,000-resource catalog). A new key or index (a
// swapped catalog) drops what was built for the previous one. With
// groups, the groups are built too (a list needs them, a read does not).
func (a *aliaser) tenantAliases(ix *store.Index, tenant string, groups bool) *tenantAliases {
	idx := &a.s.aliases
	idx.mu.Lock()
	defer idx.mu.Unlock()
	if idx.tkey != a.keyID() || idx.tix != ix {
		idx.tkey, idx.tix, idx.tenants = a.keyID(), ix, map[string]*tenantAliases{}
	}
	ta, ok := idx.tenants[tenant]
	if !ok {
		patients := ix.Patients(tenant)
		ta = &tenantAliases{patient: make(map[string]aliasTarget, len(patients))}
		h := newAliasHasher(a.key.Bytes)
		for _, p := range patients {
			if p == "" { // tenant-level reference data: grouped below
				continue
			}
			for _, seg := range ix.PatientSegments(tenant, p) {
				ta.patient[h.alias(tenant, seg)] = aliasTarget{label: p, seg: seg}
			}
		}
		if len(patients) > 0 {
			// Only tenants of the catalog are kept: a caller can name any
			// tenant in a URI, and must not grow this map by doing so.
			idx.tenants[tenant] = ta
		}
	}
	if groups && ta.groups == nil {
		ta.groups = a.aliasGroups(ix, tenant, ta)
	}
	return ta
}

// aliasGroups builds tenant's groups (see tenantAliases), sorted by prefix:
// one per patient alias and URI scheme, then one per research URI
// collection of the tenant-level reference data. It is built once per
// tenant, key and catalog index, on a researcher's first list, so it keeps
// its allocations few (a 10,000-patient tenant's first research page was
// mostly this): the patients are sorted once with their targets, the
// slice is made at its size, and each group's prefix is made once.
func (a *aliaser) aliasGroups(ix *store.Index, tenant string, ta *tenantAliases) []aliasGroup {
	type patient struct {
		alias   string
		t       aliasTarget
		schemes []string
	}
	pats := make([]patient, 0, len(ta.patient))
	for al, t := range ta.patient {
		pats = append(pats, patient{alias: al, t: t})
	}
	slices.SortFunc(pats, func(x, y patient) int { return strings.Compare(x.alias, y.alias) })
	var all []string
	n := 0
	for i := range pats {
		pats[i].schemes = ix.PatientSchemes(tenant, pats[i].t.label)
		n += len(pats[i].schemes)
		for _, sc := range pats[i].schemes {
			if !slices.Contains(all, sc) {
				all = append(all, sc)
			}
		}
	}
	slices.Sort(all)
	// Tenant-level reference data: one group per research URI
	// collection ("fhir://{tenant}/organization/").
	fixed := map[string]bool{}
	for _, e := range ix.PatientEntries(tenant, "") {
		out := a.out(e.URI)
		fixed[out[:strings.LastIndexByte(out, '/')+1]] = true
	}
	gs := make([]aliasGroup, 0, n+len(fixed))
	for _, sc := range all {
		for _, p := range pats {
			if slices.Contains(p.schemes, sc) {
				g := aliasGroup{scheme: sc, alias: p.alias, patient: p.t.label, seg: p.t.seg}
				g.pfx = g.makePrefix(tenant)
				gs = append(gs, g)
			}
		}
	}
	for f := range fixed {
		sc, _, _ := strings.Cut(f, "://")
		g := aliasGroup{scheme: sc, fixed: f}
		g.pfx = g.makePrefix(tenant)
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(x, y aliasGroup) int { return strings.Compare(x.pfx, y.pfx) })
	return gs
}

// errAliasOrder means a research URI does not start with its group's
// prefix: the URI forms changed and indexedPage's order would no longer be
// the research-URI order. The list is refused rather than misordered.
var errAliasOrder = errors.New("research alias order: a research URI outside its group")

// indexedPage is page over the tenant's resources in ix: up to limit of
// them whose research URI sorts after after, in research-URI order, with
// those URIs, as entries (see entryResources). It computes the aliases of
// the patients it pages through only.
func (a *aliaser) indexedPage(ctx context.Context, ix *store.Index, tenant, after string, limit int) ([]store.Resource, []string, error) {
	ta := a.tenantAliases(ix, tenant, true)
	// The groups wholly before after: after is past their prefix and
	// does not start with it (then every URI starting with the prefix
	// sorts before after).
	i := sort.Search(len(ta.groups), func(i int) bool {
		p := ta.groups[i].pfx
		return after <= p || strings.HasPrefix(after, p)
	})
	var rs []store.Resource
	var shown []string
	for ; i < len(ta.groups) && len(rs) < limit; i++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		g := ta.groups[i]
		prefix := g.pfx
		var members []aliasedURI
		for _, e := range ix.PatientEntries(tenant, g.patient) {
			if e.Scheme() != g.scheme || g.seg != "" && !strings.Contains(e.URI, "/patients/"+g.seg+"/") {
				continue // another scheme's, or another URI patient's (aliasTarget)
			}
			out := a.out(e.URI)
			if g.fixed != "" && !strings.HasPrefix(out, g.fixed) {
				continue // another collection's group
			}
			if !strings.HasPrefix(out, prefix) {
				return nil, nil, errAliasOrder
			}
			if out > after {
				members = append(members, aliasedURI{shown: out, real: e.URI})
				rs = append(rs, entryResources([]store.IndexEntry{e})...)
			}
		}
		// Sort the group's members (and their resources alike) by
		// research URI.
		start := len(rs) - len(members)
		order := make([]int, len(members))
		for j := range order {
			order[j] = j
		}
		slices.SortFunc(order, func(x, y int) int { return strings.Compare(members[x].shown, members[y].shown) })
		sorted := make([]store.Resource, len(members))
		for j, k := range order {
			sorted[j] = rs[start+k]
			shown = append(shown, members[k].shown)
		}
		copy(rs[start:], sorted)
	}
	if len(rs) > limit {
		rs, shown = rs[:limit], shown[:limit]
	}
	return rs, shown, nil
}

// indexedIn is in for an indexed catalog: the patient alias is resolved
// through the tenant's aliases, the resource id among that patient's
// resources only.
func (a *aliaser) indexedIn(ix *store.Index, u store.URI) (store.URI, bool) {
	p := "" // tenant-level reference data: among the tenant's resources without a patient
	if u.Patient != "" {
		ta := a.tenantAliases(ix, u.Tenant, false)
		t, ok := ta.patient[u.Patient]
		if !ok {
			return u, false
		}
		p = t.label
	}
	want := u.String()
	for _, e := range ix.PatientEntries(u.Tenant, p) {
		if a.out(e.URI) == want {
			if real, err := store.ParseURI(e.URI); err == nil {
				return real, true
			}
		}
	}
	return u, false
}

func (a *aliaser) keyID() string { return a.key.ID + "\x00" + string(a.key.Bytes) }

// rebuild indexes the catalog into idx (held locked): the alias of every
// patient id and resource id, with its tenant, to the id, and every URI by
// research URI.
func (a *aliaser) rebuild(ctx context.Context, idx *aliases) error {
	real := map[string]string{}
	var order []aliasedURI
	after := ""
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := a.s.cfg.Catalog.Page(after, 1024)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			after = r.URI
			u, err := store.ParseURI(r.URI)
			if err != nil {
				continue
			}
			if u.Patient != "" {
				real[u.Tenant+"\x00"+a.alias(u.Tenant, u.Patient)] = u.Patient
			}
			real[u.Tenant+"\x00"+a.alias(u.Tenant, u.ID)] = u.ID
			order = append(order, aliasedURI{shown: a.out(r.URI), real: r.URI})
		}
	}
	slices.SortFunc(order, func(x, y aliasedURI) int { return strings.Compare(x.shown, y.shown) })
	idx.keyID, idx.built, idx.real, idx.order = a.keyID(), time.Now(), real, order
	return nil
}
