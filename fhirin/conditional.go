package fhirin

import (
	"crypto/sha256"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
)

// Search is the query of a conditional update or create that Read
// resolves (R4 http.html#cond-update, #ccreate): one parameter, _id or
// identifier, with one value.
type Search struct {
	// ID is the _id searched, "" for a search by identifier.
	ID string
	// System and Value are the identifier token searched
	// (identifier=[system|]value). AnySystem is set for a token without
	// "|" (any system matches); "|value" searches identifiers without a
	// system (System "", AnySystem false).
	System, Value string
	AnySystem     bool
}

// Found is a live resource of the catalog that a conditional search found
// (Options.Match): its source id, the source id of the Patient whose
// compartment holds it ("" for a tenant-level resource; a Patient's own
// id for a Patient), and its own sensitivity labels there (what it gives
// a Binary whose securityContext names it, when a conditional create
// keeps it).
type Found struct {
	ID, Patient string
	Labels      []string
}

// Matches reports whether an identifier {system, value} matches s (by
// identifier; an _id search matches no identifier).
func (s Search) Matches(system, value string) bool {
	return s.ID == "" && value == s.Value && (s.AnySystem || system == s.System)
}

// conditional is a Bundle entry's conditional update (PUT Type?query) or
// create (POST with ifNoneExist): the element that holds its query and the
// query parsed.
type conditional struct {
	path   string // "request.url" or "request.ifNoneExist"
	search Search
	create bool // a conditional create (POST with ifNoneExist)
}

// conditionalOf reads e's conditional update or create, if it is one: ok
// false for any other entry. A query Read does not resolve (another
// parameter, several, several values, a modifier) is an ErrUnsupported
// naming the entry and the parameter (as elementName writes it: a name is
// the input's); nothing of the import is written.
//
// An absolute url (request.url, ifNoneExist, or the POST's request.url)
// searches the server it names: it is resolved only on base, the
// import's server ($export manifest's request), or on the base of the
// entry's own RESTful fullUrl; on any other, or when neither is known, it
// is an ErrUnsupported naming the host (never the query): this catalog is
// not that server, and a match in it would update (or keep) a resource
// that server's search may not find.
func conditionalOf(w, path, base string, e *entry) (conditional, bool, error) {
	if e.Request == nil || e.typ == "" {
		return conditional{}, false, nil
	}
	var c conditional
	var query, at, atPath string // at: an absolute url's base and type, named by atPath
	switch strings.ToUpper(e.Request.Method) {
	case "PUT":
		u, q, hasQuery := strings.Cut(strings.TrimPrefix(e.Request.URL, "/"), "?")
		if !hasQuery || q == "" || !typeLevel(u, e.typ) {
			return conditional{}, false, nil // bundleEntry checks every other PUT url
		}
		c.path, query, at = path+".request.url", q, strings.TrimSuffix(u, "/")
		atPath = c.path
	case "POST":
		if e.Request.IfNoneExist == "" {
			return conditional{}, false, nil
		}
		c.path, c.create = path+".request.ifNoneExist", true
		atPath = c.path
		// R4: the query part alone ("what follows the ?"); the entry's
		// type-level URL before it is a common form too, relative (Type?,
		// Type/?, /Type?) or absolute ([base]/Type?), and so is the "?"
		// alone before it (?query, which HAPI FHIR reads as the query;
		// until a later change on 2026-12-06 refused as "a path before
		// the ?"). A "?" after a "=" or "&" is the query's own.
		query = e.Request.IfNoneExist
		if u, q, ok := strings.Cut(query, "?"); ok && !strings.ContainsAny(u, "=&") {
			if rel := strings.TrimPrefix(u, "/"); u != "" && !typeLevel(rel, e.typ) {
				last := strings.TrimSuffix(rel, "/")
				last = last[strings.LastIndex(last, "/")+1:]
				if IsResourceType(last) && typeLevel(rel, last) {
					return conditional{}, false, newError(w, c.path, ErrValue, "the conditional create's search is of another type than its resource")
				}
				return conditional{}, false, newError(w, c.path, ErrValue, "a path before the search's \"?\" that is not the type-level URL of the entry's resource type: R4 gives the query alone (what follows the \"?\"), which custos also reads after Type?, Type/?, /Type? or [base]/Type?")
			}
			query = q
			if strings.Contains(u, "://") {
				at = strings.TrimSuffix(u, "/")
			}
		}
		if at == "" && strings.Contains(e.Request.URL, "://") {
			at, _, _ = strings.Cut(e.Request.URL, "?")
			at, atPath = strings.TrimSuffix(at, "/"), path+".request.url"
		}
	default:
		return conditional{}, false, nil
	}
	if strings.Contains(at, "://") {
		if err := onImportServer(w, atPath, base, NormURL(strings.TrimSuffix(at, "/"+e.typ)), e, "a conditional search", "searches", "Type?query"); err != nil {
			return conditional{}, false, err
		}
	}
	v, err := url.ParseQuery(query)
	if err != nil {
		return conditional{}, false, newError(w, c.path, ErrUnsupported, "the conditional query is not a URL query: only identifier=[system|]value or _id=id, alone, is resolved")
	}
	if len(v) != 1 {
		return conditional{}, false, newError(w, c.path, ErrUnsupported, "a conditional query of %d parameters is not resolved: only identifier=[system|]value or _id=id, alone, is", len(v))
	}
	for name, vals := range v {
		switch {
		case name != "identifier" && name != "_id":
			return conditional{}, false, newError(w, c.path, ErrUnsupported, "a conditional query by the search parameter %s is not resolved: only identifier=[system|]value or _id=id, alone, is", paramName(name))
		case len(vals) != 1 || strings.Contains(vals[0], ","):
			return conditional{}, false, newError(w, c.path, ErrUnsupported, "a conditional query with several values of %s is not resolved: give one", name)
		case name == "_id" && !validID(vals[0]):
			return conditional{}, false, newError(w, c.path, ErrValue, "the _id searched is not a FHIR id")
		case name == "_id":
			c.search.ID = vals[0]
		default:
			sys, val, hasSys := strings.Cut(vals[0], "|")
			if val == "" && hasSys || vals[0] == "" {
				return conditional{}, false, newError(w, c.path, ErrUnsupported, "a conditional query by identifier without a value is not resolved")
			}
			if !hasSys {
				val = sys
			}
			c.search = Search{System: sys, Value: val, AnySystem: !hasSys}
			if !hasSys {
				c.search.System = ""
			}
		}
	}
	return c, true, nil
}

// typeLevel reports whether u (no query) is the type-level URL of typ:
// "Type", or an absolute "[base]/Type", either with a trailing slash
// ("[base]/Type/" is that server's Type endpoint, as servers route it:
// it was taken as another server's, [base]/Type, and refused).
func typeLevel(u, typ string) bool {
	u = strings.TrimSuffix(u, "/")
	return u == typ || strings.Contains(u, "://") && strings.HasSuffix(u, "/"+typ)
}

// onImportServer checks on, the server base an absolute request url of e
// names (at: that element), against the import's server: base (its
// $export manifest's request) or the base of e's own RESTful fullUrl.
// Another server's, or any when neither is known, is an ErrUnsupported
// naming the element and the host, never the url's path or query: the
// url names that server's resource (or search), not this catalog's, and a
// plain PUT of https://other.example/fhir/Patient/7 was imported as this
// catalog's Patient/7. what is the request ("a conditional search", "a
// PUT"), does what it does to that server, give what to write instead. A
// DELETE is held to its export's server alone (bundleEntry).
func onImportServer(w, at, base, on string, e *entry, what, does, give string) error {
	full := restBase(e.FullURL)
	if on == base && base != "" || on == full && full != "" {
		return nil
	}
	host := "an unreadable host"
	if u, err := url.Parse(on); err == nil && u.Host != "" {
		host = "host " + u.Host
	}
	if base == "" && full == "" {
		return newError(w, at, ErrUnsupported, "%s on an absolute URL (%s) is not imported when the import's server is unknown (its $export manifest's request, or the entry's RESTful fullUrl): it %s that server, not this catalog; give %s", what, host, does, give)
	}
	return newError(w, at, ErrUnsupported, "%s on another server (%s) than the import's is not imported: it %s that server, not this catalog; give %s", what, host, does, give)
}

// paramName is a search parameter's name as an error may write it: its
// name before a modifier (":exact"), as elementName writes it, and the
// modifier named as such.
func paramName(name string) string {
	base, _, modified := strings.Cut(name, ":")
	if modified {
		return elementName(strings.TrimPrefix(base, "_")) + " (with a modifier)"
	}
	if rest, ok := strings.CutPrefix(base, "_"); ok {
		return "_" + elementName(rest)
	}
	return elementName(base)
}

// matchesEntry reports whether the resource of another entry, typ with id
// and identifiers ("system|value"), is one the search of c finds.
func (c conditional) matchesEntry(typ string, o *entry) bool {
	if o.typ != typ {
		return false
	}
	if c.search.ID != "" {
		return o.id == c.search.ID
	}
	for _, k := range o.identifiers {
		sys, val, _ := strings.Cut(k, "|")
		if c.search.Matches(sys, val) {
			return true
		}
	}
	return false
}

// resolveConditionals resolves the conditional updates and creates of a
// Bundle's entries (R4 http.html#cond-update; transaction processing),
// against what custos can see of the same source: the other entries of
// the Bundle and, with Options.Match, the importer's catalog. An entry
// whose search another entry of the Bundle matches is refused (R4: a
// transaction whose entries resolve to one resource fails); one that
// matches exactly one resource of the catalog takes its id (the entry
// updates it: same id, same URI, where it was imported under its
// urn:uuid before and a re-import of an export minting new uuids
// duplicated it); no match: the entry creates its resource, under its own
// id; more than one: refused (FHIR's 412 Precondition Failed). A
// conditional create (ifNoneExist) whose match exists leaves it as it is
// (R4 http.html#ccreate): the entry is that resource, but yields a Kept
// item instead of its content (until 2026-12-06 the input's content was
// written as a new version of the match). Nothing is written when an
// entry is refused: Read fails.
func (rd *reader) resolveConditionals(s *source, entries []*entry) error {
	if rd.sweep {
		// firstPassOfBundles: every entry's search, as scanBundle files
		// them, though a problem below ends the loop at one entry (a
		// problem that pass may drop: its searches are kept).
		for i, e := range entries {
			if c, ok, err := conditionalOf(where(s, e.line), "Bundle.entry["+itoa(i)+"]", s.base, e); err == nil && ok {
				if err := rd.addSearched(e.typ, c.search); err != nil {
					return err
				}
			}
		}
	}
	for i, e := range entries {
		path := "Bundle.entry[" + itoa(i) + "]"
		w := where(s, e.line)
		c, ok, err := conditionalOf(w, path, s.base, e)
		if err != nil {
			return atEntry(e.name, err.(*Error))
		}
		if !ok {
			continue
		}
		for j, o := range entries {
			if j != i && c.matchesEntry(e.typ, o) {
				return atEntry(e.name, newError(w, c.path, ErrValue, "the conditional search matches another entry of the Bundle (Bundle.entry[%d]): two entries would write one resource, which fails a FHIR transaction", j))
			}
		}
		ids, err := rd.match(e.typ, c.search)
		if err != nil {
			return err
		}
		e.conditional = true
		ids, unplaced := rd.withWritten(e.typ, c.search, ids)
		switch len(ids) {
		case 0:
			// It creates its resource under its own id: the importer
			// refuses it over a live resource of that id of other
			// content (Item.NoOverwrite: FHIR's 409), and takes the same
			// content again as unchanged (a re-import of the Bundle).
			e.noOverwrite = c.path
		case 1:
			if e.typ == "Binary" && ids[0].ID == e.id {
				// The Binary of the entry's own id (body or urn:uuid):
				// updated as PUT Binary/id updates it, its compartment
				// set by its linkers. Refused below until 2026-12-06, so
				// that such a Bundle imported once and never again. A
				// conditional create of it (what its first import
				// created) writes no new content over it: its own
				// content again is unchanged, other content FHIR's 409,
				// as for a create that matched nothing (NoOverwrite).
				if c.create {
					e.noOverwrite = c.path
				}
				continue
			}
			if e.typ == "Binary" {
				// A Binary's compartment is where the resources linking
				// it (or its securityContext) place it, which resource
				// does not know: the match could not be held to the
				// entry's compartment, and was refused as a match in
				// "another patient compartment" its body never named.
				return atEntry(e.name, newError(w, c.path, ErrUnsupported, "a conditional update or create of a Binary that finds a Binary (of the catalog, or written by an earlier Bundle) is not imported: a Binary's patient compartment is set by the resources that link it, not by the Binary, so the match cannot be checked to be in the entry's compartment; name the Binary (PUT Binary/id)"))
			}
			// resource checks, once it knows the entry's compartment,
			// that the match is in it (matchedPatient).
			e.id, e.matched, e.matchedPatient, e.matchedLabels, e.condPath = ids[0].ID, true, ids[0].Patient, ids[0].Labels, c.path
			e.kept, e.unplaced = c.create, unplaced
		default:
			return atEntry(e.name, newError(w, c.path, ErrValue, "the conditional search matches %d resources of this source in the catalog or written by an earlier Bundle of the import (FHIR 412 Precondition Failed): it names no one resource to update", len(ids)))
		}
	}
	return nil
}

// match asks Options.Match once per search and type.
func (rd *reader) match(typ string, q Search) ([]Found, error) {
	if rd.opts.Match == nil {
		return nil, nil
	}
	key := searchKey(typ, q)
	if ids, ok := rd.matched[key]; ok {
		return ids, nil
	}
	ids, err := rd.opts.Match(typ, q)
	if err != nil {
		return nil, err
	}
	if rd.matched == nil {
		rd.matched = map[string][]Found{}
	}
	rd.matched[key] = ids
	return ids, nil
}

// searchKey files a search of typ (match's cache, reader.written).
func searchKey(typ string, q Search) string {
	switch {
	case q.ID != "":
		return typ + "\x00_id\x00" + q.ID
	case q.AnySystem:
		return typ + "\x00*|" + q.Value
	}
	return typ + "\x00" + q.System + "|" + q.Value
}

// writtenResource is a resource that an earlier Bundle of the pass wrote:
// its id, and its compartment as an index into reader.patientList, or
// wroteUnplaced if the pass did not read it.
type writtenResource struct {
	id string
	at int32
}

// found is w as a conditional search finds it, and whether the pass read
// its compartment (its labels are the import's).
func (rd *reader) found(w writtenResource) (Found, bool) {
	if w.at < 0 {
		return Found{ID: w.id}, false
	}
	return Found{ID: w.id, Patient: rd.patientList[w.at]}, true
}

// wroteKey files a resource typ/id in reader.wrote, or a search by
// identifier (searchKey) in reader.written: the first 16 bytes of
// SHA-256(key), so that each resource the Bundles of an import write costs
// a fixed few bytes, not its type and id again.
type wroteKey [16]byte

func keyOf(key string) wroteKey {
	h := sha256.Sum256([]byte(key))
	return wroteKey(h[:16])
}

// idKey is keyOf the resource typ/id.
func idKey(typ, id string) wroteKey { return keyOf(typ + "\x00" + id) }

// reader.wrote's values other than an index into reader.patientList.
const (
	wroteUnplaced int32 = -1 // written; this pass did not read its compartment
	wroteDeleted  int32 = -2 // retired by a DELETE entry
)

// forgetWritten starts a pass knowing nothing an earlier Bundle wrote.
func (rd *reader) forgetWritten() {
	rd.wrote, rd.written, rd.writtenMore, rd.writtenList, rd.patients, rd.patientList = nil, nil, nil, nil, nil, nil
	rd.outside = rememberedSum{}
}

// remember files what a Bundle's entries wrote (created, or updated in
// the catalog) or deleted, so that a later Bundle of the same import
// searches it as a FHIR server handling the Bundles in turn would: every
// resource written or deleted by its type and id (wrote: found by _id, or
// gone), and one with identifiers under each search that finds it (each
// identifier with its system and with any). A resource an earlier Bundle
// wrote is found by what it wrote, not by what the catalog held before:
// a later search no longer finds it by an identifier it dropped
// (withWritten). Until 2026-12-06 only conditional entries were filed,
// and a later conditional create did not find what an earlier Bundle's
// plain POST created (two resources). A kept match (a conditional
// create's) changes nothing, and is in the catalog. Memory: about 30
// bytes per resource written, and 130 more with an identifier.
func (rd *reader) remember(entries []*entry) {
	for _, e := range entries {
		switch {
		case e.deletes != (refTarget{}):
			rd.file(e.deletes, wroteDeleted)
			continue
		case !e.writes || e.kept || !validID(e.id):
			continue
		}
		at := wroteUnplaced
		if e.placed {
			at = rd.patientIndex(e.patient)
		}
		// Written by an earlier entry, it is filed under its identifiers
		// already: the same content again (other content under one id
		// fails the import in the store, whatever a search finds).
		_, filed := rd.wrote[idKey(e.typ, e.id)]
		rd.file(refTarget{e.typ, e.id}, at)
		if len(e.identifiers) == 0 || filed {
			continue
		}
		if rd.written == nil {
			rd.written, rd.writtenMore = map[wroteKey]int32{}, map[wroteKey][]int32{}
		}
		i := int32(len(rd.writtenList))
		rd.writtenList = append(rd.writtenList, writtenResource{e.id, at})
		for _, k := range e.identifiers {
			sys, val, _ := strings.Cut(k, "|")
			for _, k := range []wroteKey{keyOf(searchKey(e.typ, Search{System: sys, Value: val})), keyOf(searchKey(e.typ, Search{Value: val, AnySystem: true}))} {
				// Each resource is filed once (above), so only its own
				// identifiers can file it twice under k, last: a check
				// of the last one filed, not of every one (many share
				// an identifier: Synthea's claim-group|99999999999 of
				// every ExplanationOfBenefit, scanned so quadratically).
				first, ok := rd.written[k]
				more := rd.writtenMore[k]
				switch {
				case !ok:
					rd.written[k] = i
				case first != i && (len(more) == 0 || more[len(more)-1] != i):
					rd.writtenMore[k] = append(more, i)
				}
			}
		}
	}
}

// rememberResource files a resource read outside a Bundle (an NDJSON
// line, a resource file) as remember files a Bundle's plain write, so that
// the import's Bundles, read after every resource outside a Bundle in each
// pass (reader.pass), find it: until 2026-12-06 they did not, and a Bulk
// export imported with Bundles conditionally creating its Practitioners
// got a second one, and its next import was refused (FHIR 412).
// m is the resource decoded, raw its JSON; placed: patient is its
// compartment. Only a resource that one of the Bundles' conditional
// searches finds, or whose id is one they find in the catalog, is filed
// (reader.searched); an input without them files nothing.
func (rd *reader) rememberResource(typ, id string, m map[string]any, raw []byte, patient string, placed bool) {
	if !rd.remembers {
		return
	}
	rd.rememberOutside(&entry{typ: typ, id: id, identifiers: identifiersOf(identifierElement(m, raw)), writes: true, patient: patient, placed: placed})
}

// identifierElement is the identifier element of a resource, m decoded
// from raw, as a decode of its head reads it (rememberHead, bundle.index,
// the catalog's search in app): a struct field, which encoding/json
// matches to a key in any case ("Identifier"), the last one when several
// are. Until 2026-12-06 the pass reading the resource whole took the key
// "identifier" alone: a pass reading its head found a Practitioner by
// an NPI under "Identifier" and the one reading it whole did not, and
// the import failed as an internal error (reader.pass), every time
// (TestRememberIdentifierKeyAsEveryReader). One such key, the usual
// case, is re-encoded from m; several (an error of the pass that yields:
// jsonkeys.Duplicate) are read from raw in their order.
func identifierElement(m map[string]any, raw []byte) json.RawMessage {
	var v any
	n := 0
	for k, x := range m {
		if strings.EqualFold(k, "identifier") {
			v, n = x, n+1
		}
	}
	switch n {
	case 0:
		return nil
	case 1:
		b, _ := json.Marshal(v)
		return b
	}
	var head struct {
		Identifier json.RawMessage `json:"identifier"`
	}
	_ = json.Unmarshal(raw, &head)
	return head.Identifier
}

// rememberOutside remembers e, a resource read outside a Bundle, when a
// conditional search of the import's Bundles may find it or change what
// it finds (searchedBy): by its id, or an identifier. Until a later
// change on 2026-12-06 every such resource with an identifier was
// remembered, about 127 bytes each (1.3 GB for 10 million beside one
// Bundle); now the memory is bounded by the Bundles' searches and their
// matches. Each pass adds what it remembers to reader.outside, which the
// passes compare (reader.pass).
func (rd *reader) rememberOutside(e *entry) {
	if !validID(e.id) || !rd.searchedBy(e) {
		return
	}
	rd.remember([]*entry{e})
	rd.outside.add(e)
}

// searchedBy reports whether a conditional search of the import's Bundles
// finds e (by _id, or an identifier with its system or with any), or
// found a resource of e's type and id in the catalog (reader.searched).
func (rd *reader) searchedBy(e *entry) bool {
	if _, ok := rd.searched[idKey(e.typ, e.id)]; ok {
		return true
	}
	for _, k := range e.identifiers {
		sys, val, _ := strings.Cut(k, "|")
		for _, q := range []Search{{System: sys, Value: val}, {Value: val, AnySystem: true}} {
			if _, ok := rd.searched[keyOf(searchKey(e.typ, q))]; ok {
				return true
			}
		}
	}
	return false
}

// collectSearches reads the Bundles of the input (the files that may hold
// one) for their conditional searches before the first pass, and files in
// reader.searched each search (keyOf its searchKey; idKey for an _id) and
// the id of each catalog resource it finds (Options.Match, cached for the
// passes): what a resource outside a Bundle must be for a Bundle's search
// to find it, or to change what it finds (a catalog match written again
// without the identifier searched is no longer found: withWritten). A
// query the passes refuse is left to them.
func (rd *reader) collectSearches(srcs []source) error {
	rd.scan, rd.bundlePhase = true, true
	defer func() { rd.scan, rd.bundlePhase = false, false }()
	for _, s := range srcs {
		if err := rd.problem(rd.readSource(&s)); err != nil {
			return err
		}
	}
	return nil
}

// scanBundle is collectSearches for one Bundle, raw, at line of s.
func (rd *reader) scanBundle(s *source, line int, raw []byte) error {
	var b struct {
		Entry []*entry `json:"entry"`
	}
	if json.Unmarshal(raw, &b) != nil {
		return nil // the passes report it
	}
	for i, e := range b.Entry {
		var head struct {
			ResourceType string `json:"resourceType"`
		}
		if e == nil || json.Unmarshal(e.Resource, &head) != nil {
			continue
		}
		e.typ = head.ResourceType
		c, ok, err := conditionalOf(where(s, line), "Bundle.entry["+itoa(i)+"]", s.base, e)
		if err != nil || !ok {
			continue
		}
		if err := rd.addSearched(e.typ, c.search); err != nil {
			return err
		}
	}
	return nil
}

// addSearched files a conditional search of typ, and the ids of what it
// finds in the catalog, in reader.searched.
func (rd *reader) addSearched(typ string, q Search) error {
	if rd.searched == nil {
		rd.searched = map[wroteKey]struct{}{}
	}
	if q.ID != "" {
		rd.searched[idKey(typ, q.ID)] = struct{}{}
	} else {
		rd.searched[keyOf(searchKey(typ, q))] = struct{}{}
	}
	found, err := rd.match(typ, q)
	if err != nil {
		return err
	}
	for _, f := range found {
		rd.searched[idKey(typ, f.ID)] = struct{}{}
	}
	return nil
}

// rememberedSum is what a pass remembered of the resources outside
// Bundles: how many, and SHA-256 chained over each one's type, id and
// identifiers in input order. Every pass must remember the same, or a
// Bundle's search would find one thing where the importer is told
// another (the first pass reads most resources by their head alone).
type rememberedSum struct {
	n   int
	sum [32]byte
}

func (r *rememberedSum) add(e *entry) {
	h := sha256.New()
	h.Write(r.sum[:])
	h.Write([]byte(e.typ + "\x00" + e.id))
	for _, k := range e.identifiers {
		h.Write([]byte("\x00" + k))
	}
	h.Sum(r.sum[:0])
	r.n++
}

// rememberHead is rememberResource for a resource this pass skips (it
// reads only its id and identifiers, not its compartment): every pass
// files the same resources, so a Bundle's search finds the same in each.
// A line that is no resource is the pass that reads it whole's problem.
func (rd *reader) rememberHead(typ string, raw []byte) {
	if !rd.remembers {
		return
	}
	var head struct {
		ResourceType string          `json:"resourceType"`
		ID           string          `json:"id"`
		Identifier   json.RawMessage `json:"identifier"`
	}
	if json.Unmarshal(raw, &head) != nil || head.ResourceType != typ && typ != "" {
		return
	}
	rd.rememberOutside(&entry{typ: head.ResourceType, id: head.ID, identifiers: identifiersOf(head.Identifier), writes: true})
}

// file records in reader.wrote that t was written (at: its compartment's
// index, or wroteUnplaced) or deleted (wroteDeleted).
func (rd *reader) file(t refTarget, at int32) {
	if rd.wrote == nil {
		rd.wrote = map[wroteKey]int32{}
	}
	rd.wrote[idKey(t.typ, t.id)] = at
}

// patientIndex is patient's index in reader.patientList, added once.
func (rd *reader) patientIndex(patient string) int32 {
	if i, ok := rd.patients[patient]; ok {
		return i
	}
	if rd.patients == nil {
		rd.patients = map[string]int32{}
	}
	i := int32(len(rd.patientList))
	rd.patients[patient] = i
	rd.patientList = append(rd.patientList, patient)
	return i
}

// writtenBy is what the Bundles before this one in the pass wrote that a
// search q of typ finds (remember): by _id, the resource if written and
// not deleted; by identifier, those written with it.
func (rd *reader) writtenBy(typ string, q Search) []writtenResource {
	if q.ID != "" {
		if at, ok := rd.wrote[idKey(typ, q.ID)]; ok && at != wroteDeleted {
			return []writtenResource{{q.ID, at}}
		}
		return nil
	}
	k := keyOf(searchKey(typ, q))
	first, ok := rd.written[k]
	if !ok {
		return nil
	}
	out := []writtenResource{rd.writtenList[first]}
	for _, i := range rd.writtenMore[k] {
		out = append(out, rd.writtenList[i])
	}
	return out
}

// withWritten is the catalog's matches ids of a search q of typ as the
// Bundles before this one in the pass left them: a match they wrote
// again or deleted stays only if what they wrote is found by q (an
// identifier dropped, or a resource deleted, no longer matches), and what
// they wrote that q finds is added, each id once; unplaced when the one
// match is such a resource whose compartment the pass did not read.
func (rd *reader) withWritten(typ string, q Search, ids []Found) ([]Found, bool) {
	if len(rd.wrote) == 0 {
		return ids, false
	}
	written := rd.writtenBy(typ, q)
	// match's cache keeps the catalog's answer: a copy.
	ids = slices.DeleteFunc(slices.Clone(ids), func(f Found) bool {
		_, again := rd.wrote[idKey(typ, f.ID)]
		return again && !slices.ContainsFunc(written, func(w writtenResource) bool { return w.id == f.ID })
	})
	unplaced := false
	for _, w := range written {
		f, placed := rd.found(w)
		if i := slices.IndexFunc(ids, func(o Found) bool { return o.ID == w.id }); i >= 0 {
			if placed {
				ids[i] = f // as the earlier Bundle wrote it
			}
			continue
		}
		ids = append(ids, f)
		unplaced = unplaced || !placed
	}
	return ids, unplaced && len(ids) == 1
}
