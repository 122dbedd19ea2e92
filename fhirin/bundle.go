package fhirin

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/custos-mcp/custos/internal/fhirr4"
)

// importedBundleTypes are the Bundle types whose entries are imported. A
// document (an International Patient Summary, a discharge summary) is
// imported as its resources, the Composition among them, as a collection
// is. message and history Bundles (and the responses) are refused: their
// entries are not a set of resources to keep as they are (a message's
// focus is an event, a history holds one resource many times).
var importedBundleTypes = map[string]bool{"collection": true, "document": true, "transaction": true, "batch": true, "searchset": true}

// r4BundleTypes are R4's Bundle types (the required binding of
// Bundle.type): a refusal names one of them, and never another value.
var r4BundleTypes = map[string]bool{
	"document": true, "message": true, "transaction": true, "transaction-response": true, "batch": true,
	"batch-response": true, "history": true, "searchset": true, "collection": true,
}

// bundle is one Bundle's reference context: its entries by fullUrl and by
// identifier, and the labels of its meta.security, which apply to every entry.
type bundle struct {
	typ          string
	labels       []string
	byFullURL    map[string]refTarget
	byIdentifier map[string]refTarget // "Type?system|value" and "Type?*|value"; an ambiguous key maps to the zero target
	// binaryFullURLs are the fullUrls of the Binary entries.
	binaryFullURLs map[string]bool
}

// mayNameBinary is mayNameBinary for a resource of the Bundle: it may also
// name a Binary entry by its fullUrl (a string of raw that resolveFullURL
// resolves to a Binary entry), or by a conditional reference. It reads
// raw once, looking each string up: it searched raw for every Binary's
// fullUrl, so the first pass over a Bundle of N entries and B Binaries
// read N times B entries (a Bundle of 10,000 Observations and 1,000
// Binaries was read in 2.5 s instead of 0.8 s; found by h-review9).
func (b *bundle) mayNameBinary(raw []byte) bool {
	if bytes.Contains(raw, []byte("Binary")) || mayNameBinary(raw) {
		return true
	}
	if len(b.binaryFullURLs) == 0 {
		return false
	}
	for i := 0; ; {
		q := bytes.IndexByte(raw[i:], '"')
		if q < 0 {
			return false
		}
		start, end, escaped := i+q+1, i+q+1, false
		for end < len(raw) && raw[end] != '"' {
			if raw[end] == '\\' {
				escaped = true
				end++
			}
			end++
		}
		if end >= len(raw) {
			return true // not JSON: the reader reports it
		}
		s := string(raw[start:end])
		if escaped && json.Unmarshal(raw[start-1:end+1], &s) != nil {
			return true
		}
		s = NormURL(s)
		if b.binaryFullURLs[s] {
			return true
		}
		if h := strings.Index(s, "/_history/"); h > 0 && b.binaryFullURLs[s[:h]] {
			return true
		}
		i = end + 1
	}
}

// entry is one Bundle.entry.
type entry struct {
	FullURL  string          `json:"fullUrl"`
	Resource json.RawMessage `json:"resource"`
	Request  *entryRequest   `json:"request"`
	Search   *entrySearch    `json:"search"`

	line int
	// name is "Bundle.entry[i]" when another entry of the Bundle starts on
	// its line (a minified Bundle: the line alone names none of them), ""
	// otherwise: Error.Entry of its problems.
	name string
	typ  string // resource.resourceType
	id   string // resource.id, or the uuid of a urn:uuid fullUrl, or the id a conditional update or create matched
	// matched: id is that of the one resource of the catalog its
	// conditional update or create matched (resolveConditionals).
	matched bool
	// matchedPatient is the compartment (source Patient id, "" for none)
	// of the resource matched; condPath the element holding the query
	// ("Bundle.entry[3].request.url").
	matchedPatient, condPath string
	// matchedLabels are the match's own labels in the catalog (Found).
	matchedLabels []string
	// kept: the match is a conditional create's (ifNoneExist), which R4
	// leaves as it is: the entry yields a Kept item, not its content.
	kept bool
	// conditional: the entry is a conditional update or create that
	// resolveConditionals resolved; unplaced: its match is a resource an
	// earlier Bundle of this pass wrote whose compartment this pass did
	// not read (resource checks it in the pass that does).
	conditional, unplaced bool
	// patient is its resource's compartment, once resource read it
	// (placed); an earlier-Bundle match takes it (remember).
	patient string
	placed  bool
	// identifiers are its resource's identifiers, "system|value".
	identifiers []string
	// writes: bundleEntry imports its resource (not skipped, not a
	// search outcome); deletes: the resource its DELETE retires. What
	// remember files for a later Bundle's searches.
	writes  bool
	deletes refTarget
	// noOverwrite is condPath for a conditional entry that matched
	// nothing (resolveConditionals): Item.NoOverwrite of its resource.
	noOverwrite string
}

// entryRequest is what the reader reads of Bundle.entry.request.
type entryRequest struct {
	Method      string `json:"method"`
	URL         string `json:"url"`
	IfNoneExist string `json:"ifNoneExist"`
}

// entrySearch is what the reader reads of Bundle.entry.search.
type entrySearch struct {
	Mode string `json:"mode"`
}

type coding struct {
	System string `json:"system"`
	Code   string `json:"code"`
}

// readBundle imports the entries of one Bundle, raw, that starts at line.
//
// Its envelope (the Bundle without its entries' resources) is checked by
// fhirr4.Check before anything of it is used, as every resource is
// (docs/import.md, "Structure"); each entry's resource is checked once,
// as a resource of its own (resource), not as part of the envelope.
func (rd *reader) readBundle(s *source, line int, raw []byte) error {
	w := where(s, line)
	b := &bundle{byFullURL: map[string]refTarget{}, byIdentifier: map[string]refTarget{}}
	envelope, entries, err := bundleReading.split(raw, line)
	if err != nil {
		return newError(w, "Bundle", ErrJSON, "not a JSON object")
	}
	if ps := fhirr4.Check(envelope); len(ps) > 0 {
		if i, ok := entryIndex(ps[0].Path); ok && i < len(entries) {
			w = where(s, entries[i].line) // the path names the entry
		}
		return structureError(w, "", ps)
	}
	next := false // a link of relation next: the Bundle is one page of more
	b.typ, _ = envelope["type"].(string)
	if meta, ok := envelope["meta"].(map[string]any); ok {
		var security []coding
		for _, c := range list(meta["security"]) {
			c, _ := c.(map[string]any)
			system, _ := c["system"].(string)
			code, _ := c["code"].(string)
			security = append(security, coding{System: system, Code: code})
		}
		b.labels = labelsOf(security)
	}
	for _, l := range list(envelope["link"]) {
		l, _ := l.(map[string]any)
		next = next || l["relation"] == "next"
	}
	if !importedBundleTypes[b.typ] {
		what := "a Bundle whose type is none of R4's"
		if r4BundleTypes[b.typ] {
			what = "a " + b.typ + " Bundle"
		}
		return newError(w, "Bundle.type", ErrUnsupported, "%s is not imported: only collection, document, transaction, batch and searchset Bundles are", what)
	}
	if next && b.typ == "searchset" && rd.opts.Complete {
		// One page of a search result: a full import would retire every
		// resource on the pages it lacks (as a partial $export would).
		return newError(w, "Bundle.link", ErrValue, "the search result continues on another page (link next), so this Bundle holds only part of it, and a full import retires what its input does not hold: import every page without --full (custos sync follows the pages)")
	}
	for i, e := range entries {
		if i > 0 && entries[i-1].line == e.line || i+1 < len(entries) && entries[i+1].line == e.line {
			// Another entry starts on this line (a minified Bundle): the
			// line alone names none of them, and two entries with the same
			// problem were one problem. The index keeps the name too, for
			// the problems found once the input is read (index.check).
			e.name = "Bundle.entry[" + itoa(i) + "]"
		}
	}
	if err := b.index(s, entries, func() error { return rd.resolveConditionals(s, entries) }); err != nil {
		return err
	}
	for i, e := range entries {
		if err := rd.ctx.Err(); err != nil {
			return err
		}
		err := rd.bundleEntry(s, b, i, e)
		if fe, ok := err.(*Error); ok && fe.Entry == "" && !strings.HasPrefix(fe.Path, "Bundle.entry[") {
			fe.Entry = e.name
		}
		if err := rd.problem(err); err != nil {
			return err
		}
	}
	rd.remember(entries)
	return nil
}

// placeholder stands in the envelope for an entry's resource, which is
// checked on its own (resource): an R4 resource that requires no element,
// so it adds no problem, and keeps an entry holding a resource alone from
// reading as an empty object.
var placeholder = map[string]any{"resourceType": "Parameters"}

// list is v as a JSON array ([]any), nil for anything else.
func list(v any) []any {
	a, _ := v.([]any)
	return a
}

// entryIndex is i of a path "Bundle.entry[i]...".
func entryIndex(path string) (int, bool) {
	rest, ok := strings.CutPrefix(path, "Bundle.entry[")
	if !ok {
		return 0, false
	}
	n, _, ok := strings.Cut(rest, "]")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(n)
	return i, err == nil
}

// index reads every entry's resource head and records its fullUrl and
// identifiers, so references between entries resolve in any order. resolve
// runs once the heads are read, before anything is recorded: it may give
// an entry the id of the resource its conditional update matched.
func (b *bundle) index(s *source, entries []*entry, resolve func() error) error {
	for i, e := range entries {
		if len(e.Resource) == 0 || bytes.Equal(e.Resource, []byte("null")) {
			continue
		}
		path := "Bundle.entry[" + itoa(i) + "].resource"
		head, err := bundleReading.head(e.Resource, true, true)
		if err != nil {
			return newError(where(s, e.line), path, ErrJSON, "not a resource object")
		}
		e.typ, e.id = head.typ, head.id
		if e.id == "" {
			if u, ok := strings.CutPrefix(e.FullURL, "urn:uuid:"); ok {
				e.id = strings.ToLower(u)
			}
		}
		e.identifiers = identifiersOf(head.identifier)
	}
	if err := resolve(); err != nil {
		return err
	}
	for i, e := range entries {
		if len(e.Resource) == 0 || bytes.Equal(e.Resource, []byte("null")) {
			continue
		}
		t := refTarget{e.typ, e.id}
		if e.FullURL != "" {
			at := "Bundle.entry[" + itoa(i) + "].fullUrl"
			full := NormURL(e.FullURL) // the key references are looked up by (resolveFullURL)
			if _, dup := b.byFullURL[full]; dup {
				return newError(where(s, e.line), at, ErrValue, "two entries share one fullUrl")
			}
			// A fullUrl that looks like a RESTful URL SHALL end with its
			// resource's type and id (R4 Bundle.entry.fullUrl): then a
			// relative reference, resolved against the fullUrl's base
			// (R4 "Resolving references in Bundles"), names the entry
			// whose Type/id it is, and reading it as Type/id is right.
			if lit, ok := parseLiteral(e.FullURL); ok && strings.Contains(e.FullURL, "://") && e.id != "" && lit != t {
				if e.matched {
					return newError(where(s, e.line), at, ErrValue, "the conditional update or create matched a resource of the catalog other than the one its RESTful fullUrl names")
				}
				return newError(where(s, e.line), at, ErrValue, "a RESTful fullUrl must end with the type and id of its resource")
			}
			b.byFullURL[full] = t
			if e.typ == "Binary" {
				if b.binaryFullURLs == nil {
					b.binaryFullURLs = map[string]bool{}
				}
				b.binaryFullURLs[full] = true
			}
		}
		for _, id := range e.identifiers {
			_, value, _ := strings.Cut(id, "|")
			for _, k := range []string{e.typ + "?" + id, e.typ + "?*|" + value} {
				if old, seen := b.byIdentifier[k]; seen && old != t {
					b.byIdentifier[k] = refTarget{} // ambiguous
				} else {
					b.byIdentifier[k] = t
				}
			}
		}
	}
	return nil
}

// Identifiers is the {system, value} of each Identifier with a value in
// raw, a resource's identifier element: a list, or one Identifier where R4
// holds one (Composition, QuestionnaireResponse), which the catalog's
// search finds too (app). Until 2026-12-06 the latter was not indexed, so
// a later Bundle's conditional create of such a resource did not find an
// earlier Bundle's and created a second, and every later import of the
// same input was refused (FHIR 412: the catalog held two); and app read
// the catalog's as a list only, failing the import as a corrupt catalog.
func Identifiers(raw json.RawMessage) [][2]string {
	type identifier struct {
		System string `json:"system"`
		Value  string `json:"value"`
	}
	var list []identifier
	if json.Unmarshal(raw, &list) != nil {
		var one identifier
		if json.Unmarshal(raw, &one) != nil {
			return nil
		}
		list = []identifier{one}
	}
	var out [][2]string
	for _, i := range list {
		if i.Value != "" {
			out = append(out, [2]string{i.System, i.Value})
		}
	}
	return out
}

// identifiersOf is Identifiers as "system|value".
func identifiersOf(raw json.RawMessage) []string {
	var out []string
	for _, i := range Identifiers(raw) {
		out = append(out, i[0]+"|"+i[1])
	}
	return out
}

// resolveFullURL finds the entry whose fullUrl a reference is (R4
// "Resolving references in Bundles": an absolute reference, whatever its
// scheme, urn:uuid, urn:oid, http(s), matches a fullUrl exactly; a
// version-specific one matches without its version). Scheme and host
// match in any case (normURL): RFC 3986 makes them case-insensitive, and
// "HTTP://Example.org/fhir/Patient/1" was refused as naming no entry.
func (b *bundle) resolveFullURL(ref string) (refTarget, bool) {
	ref = NormURL(ref)
	t, ok := b.byFullURL[ref]
	if !ok {
		if i := strings.Index(ref, "/_history/"); i > 0 {
			t, ok = b.byFullURL[ref[:i]]
		}
	}
	return t, ok
}

// resolveConditional resolves "Type?identifier=[system|]value" against the
// Bundle's entries; every other search is left unresolved.
func (b *bundle) resolveConditional(ref string) (refTarget, bool) {
	typ, q, ok := strings.Cut(ref, "?")
	if !ok || !r4Types[typ] {
		return refTarget{}, false
	}
	v, err := url.ParseQuery(q)
	if err != nil || len(v) != 1 || len(v["identifier"]) != 1 {
		return refTarget{}, false
	}
	tok := v["identifier"][0]
	key := typ + "?*|" + tok
	if strings.Contains(tok, "|") {
		key = typ + "?" + tok
	}
	t, ok := b.byIdentifier[key]
	return t, ok && t.id != ""
}

// httpVerbs are R4's HTTPVerb codes, and "" for an entry without request
// (or without its method).
var httpVerbs = map[string]bool{"": true, "GET": true, "HEAD": true, "POST": true, "PUT": true, "DELETE": true, "PATCH": true}

// bundleEntry imports one entry: a resource, or the retirement a DELETE
// request names. GET and HEAD requests without a resource carry nothing to
// import; search outcomes (OperationOutcome) are skipped. Both are counted
// (Options.Skipped).
func (rd *reader) bundleEntry(s *source, b *bundle, i int, e *entry) error {
	w := where(s, e.line)
	path := "Bundle.entry[" + itoa(i) + "]"
	method := ""
	if e.Request != nil {
		method = strings.ToUpper(e.Request.Method)
	}
	hasResource := len(e.Resource) > 0 && !bytes.Equal(e.Resource, []byte("null"))
	if !httpVerbs[method] {
		// R4 HTTPVerb is a required code: an entry with another method
		// ("MERGE", a typo) asks for something the reader does not know,
		// and was imported as if it were a create.
		return newError(w, path+".request.method", ErrValue, "not an R4 HTTP verb (GET, HEAD, POST, PUT, DELETE, PATCH)")
	}
	switch method {
	case "PATCH":
		return newError(w, path+".request.method", ErrUnsupported, "PATCH entries are not imported")
	case "DELETE":
		if hasResource {
			return newError(w, path+".resource", ErrUnsupported, "a DELETE entry carries no resource")
		}
		t, ok := parseLiteral(e.Request.URL)
		if !ok {
			// Say which: a url from the root or with a query on a Type/id
			// is no conditional delete (and a query such as HAPI's
			// _cascade=delete deletes more than the resource).
			u, query, hasQuery := strings.Cut(e.Request.URL, "?")
			switch _, typed := parseLiteral(strings.TrimPrefix(u, "/")); {
			case typed && strings.HasPrefix(u, "/"):
				return newError(w, path+".request.url", ErrUnsupported, "a DELETE url from the root (/Type/id) is not imported: name Type/id")
			case typed && hasQuery && query != "":
				return newError(w, path+".request.url", ErrUnsupported, "a DELETE url with a query (Type/id?...) is not imported: it may delete more than Type/id (a cascading delete); name Type/id")
			}
			return newError(w, path+".request.url", ErrUnsupported, "a DELETE must name Type/id (conditional deletes are not imported)")
		}
		if strings.Contains(e.Request.URL, "/_history/") {
			// Not an R4 interaction; R5's delete-history-version removes
			// that version only, never the resource. It retired the live
			// resource, read as a reference would be.
			return newError(w, path+".request.url", ErrUnsupported, "a DELETE of one version (Type/id/_history/vid) is not imported: it does not delete the resource; name Type/id")
		}
		if strings.Contains(e.Request.URL, "://") && (s.base == "" || restBase(e.Request.URL) != s.base) {
			// Another server's Patient/7 is not this import's.
			return newError(w, path+".request.url", ErrUnsupported, "a DELETE of an absolute URL on another server than the export's, or when that is unknown (its $export manifest's request), is not imported: name Type/id")
		}
		e.deletes = t // remember files it
		if rd.emit {
			return rd.emitItem(Item{Type: t.typ, ID: t.id, Deleted: true, Where: w})
		}
		return nil
	case "GET", "HEAD":
		if !hasResource {
			rd.skip(&rd.skipped.Reads)
			return nil
		}
	}
	if !hasResource {
		return newError(w, path+".resource", ErrValue, "an entry without a resource (and not a DELETE)")
	}
	if method == "PUT" {
		// PUT Type/id stores the resource as Type/id (R4 "update"): a body
		// of another type or id would be imported under a name the
		// transaction does not give it. The url read as servers read it:
		// a leading slash ("/Patient/1", relative to the root all the
		// same) and a query ("?_format=json") do not change what it
		// names; both let a PUT of another id through before. A
		// conditional update ("Patient?identifier=...") names no id. Any
		// other url (a trailing slash, a path before the type) was not
		// checked and the entry imported under the resource's id
		// (h-review21): it is refused, as it names nothing certain.
		u, query, hasQuery := strings.Cut(strings.TrimPrefix(e.Request.URL, "/"), "?")
		t, ok := parseLiteral(u)
		conditional := hasQuery && query != "" && typeLevel(u, e.typ)
		switch {
		case ok && (t.typ != e.typ || t.id != e.id):
			return newError(w, path+".request.url", ErrValue, "a PUT names another resource (type or id) than the entry's resource")
		case !ok && !conditional:
			return newError(w, path+".request.url", ErrValue, "a PUT url must name Type/id of the entry's resource, or be a conditional update of its type (Type?search)")
		case ok && strings.Contains(u, "://"):
			// [base]/Type/id updates that server's resource
			// (conditionalOf checks a conditional update's base).
			if err := onImportServer(w, path+".request.url", s.base, restBase(u), e, "a PUT", "writes to", "Type/id"); err != nil {
				return err
			}
		}
	}
	if method == "POST" && strings.Contains(e.Request.URL, "://") {
		// [base]/Type creates a resource on that server; so does
		// [base]/Type/, the same endpoint (its base was taken as
		// [base]/Type, another server's, and the entry refused).
		u, _, _ := strings.Cut(e.Request.URL, "?")
		u = strings.TrimSuffix(u, "/")
		if err := onImportServer(w, path+".request.url", s.base, NormURL(u[:strings.LastIndexByte(u, '/')]), e, "a POST", "creates on", "Type"); err != nil {
			return err
		}
	}
	if b.typ == "searchset" && e.typ == "OperationOutcome" && (e.Search == nil || e.Search.Mode == "" || e.Search.Mode == "outcome") {
		// A search's outcome, with or without search.mode (as custos sync
		// reads a page): not a result. One reporting an error says the
		// search did not complete, and what the Bundle holds is not the
		// whole result (a full import would retire the rest). Before, it
		// was skipped, and one without search.mode imported as a
		// tenant-level resource, its diagnostics readable by any caller.
		if _, code, failed := Outcome(e.Resource); failed {
			if code == "" {
				return newError(w, path, ErrValue, "the searchset's outcome reports an error: the search did not complete, and a partial result is not imported")
			}
			return newError(w, path, ErrValue, "the searchset's outcome reports an error (issue code %s): the search did not complete, and a partial result is not imported", code)
		}
		rd.skip(&rd.skipped.Outcomes)
		return nil
	}
	if e.Search != nil && e.Search.Mode == "outcome" {
		if e.typ != "OperationOutcome" {
			// R4 search mode "outcome" marks an OperationOutcome; skipping
			// anything else would lose it.
			return newError(w, path+".search.mode", ErrValue, "an outcome entry holds an OperationOutcome, not another resource")
		}
		rd.skip(&rd.skipped.Outcomes)
		return nil
	}
	e.writes = true // remember files it, whatever this pass reads of it
	if rd.skim() && !indexedTypes[e.typ] && !b.mayNameBinary(e.Resource) {
		return nil
	}
	return rd.resource(s, w, e.Resource, "", b, e)
}

// skip counts an entry left out on purpose in n, a count of rd.skipped,
// once: in the pass that yields, not in the passes that read before it.
func (rd *reader) skip(n *int) {
	if rd.emit {
		*n++
	}
}

// rewriteRefs walks a resource of the Bundle and replaces every reference
// to an entry (its fullUrl, whatever the scheme, or a conditional
// reference by identifier that one entry matches) with its relative form
// "Type/id", so it stays meaningful once the resource is stored on its
// own; a RESTful URL that already names the entry's resource is kept as
// written. A urn:uuid naming no entry is an error. Outside a Bundle (b nil)
// every urn:uuid reference is dangling. Any other reference is kept as
// written: where it decides a compartment, compartment() refuses what it
// cannot read as Type/id.
func (r *resource) rewriteRefs(b *bundle) error {
	err := eachObject(r.m, func(obj map[string]any, path objectPath) error {
		if ref, ok := obj["reference"].(string); ok {
			return r.rewriteRef(b, obj, ref, path)
		}
		return nil
	})
	if err != nil || b == nil {
		return err
	}
	// Any other url (a QuestionnaireResponse answer's valueAttachment, a
	// Consent.sourceAttachment) naming a Binary entry by its fullUrl is
	// made Binary/<id> too, so that the mention is read as the lifted
	// elements' link is (mentionedBinaries); before, such a url named the
	// Binary and was not seen as naming it. A url that names no entry, or
	// one that is not a Binary, is kept as written.
	err = eachObject(r.m, func(obj map[string]any, _ objectPath) error {
		u, _ := obj["url"].(string)
		if u == "" {
			return nil
		}
		if t, ok := b.resolveFullURL(u); ok && t.typ == "Binary" && validID(t.id) && u != "Binary/"+t.id {
			obj["url"] = "Binary/" + t.id
			r.modified = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	// An attachment url may name a Binary entry by its fullUrl too
	// (a urn:uuid, or an absolute URL on any server).
	return r.eachAttachment(func(att map[string]any, path string) error {
		u, _ := att["url"].(string)
		t, ok := b.resolveFullURL(u)
		if !ok {
			if strings.HasPrefix(u, "urn:uuid:") {
				return r.errf(path+".url", ErrDangling, "a urn:uuid url to no entry of the Bundle")
			}
			return nil
		}
		if rel := t.typ + "/" + t.id; u != rel {
			att["url"] = rel
			r.modified = true
		}
		return nil
	})
}

func (r *resource) rewriteRef(b *bundle, obj map[string]any, ref string, stack objectPath) error {
	if b != nil {
		if t, ok := b.resolveFullURL(ref); ok {
			if !r4Types[t.typ] || !validID(t.id) {
				return nil // the entry is an error of its own
			}
			if lit, ok := parseLiteral(ref); !ok || lit != t {
				obj["reference"] = t.typ + "/" + t.id
				r.modified = true
			} else if r.entries == nil {
				r.entries = map[string]bool{NormURL(ref): true}
			} else {
				r.entries[NormURL(ref)] = true
			}
			return nil
		}
	}
	if strings.HasPrefix(ref, "urn:uuid:") {
		return r.errf(r.typ+stack.String()+".reference", ErrDangling, "a urn:uuid reference to no entry of the Bundle")
	}
	if b != nil && strings.Contains(ref, "?") {
		if t, ok := b.resolveConditional(ref); ok {
			obj["reference"] = t.typ + "/" + t.id
			r.modified = true
		}
	}
	return nil
}
