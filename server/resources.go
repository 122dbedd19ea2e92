package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store"
)

// Audit actions written by this package.
const (
	ActionList      = "resources/list"
	ActionRead      = "resources/read"
	ActionTemplates = "resources/templates/list"
)

// ResourceOptions tunes the Resources protocol surface of a Server. The zero
// value means the documented defaults.
type ResourceOptions struct {
	// TemplatesPageSize is the number of templates per
	// resources/templates/list page, 1 to 100; 0 means
	// DefaultTemplatesPageSize. Clients cannot choose it.
	TemplatesPageSize int
	// TextPageSize is the size in bytes of one page of a ranged read
	// (store.PageURI), 64 to 1 MiB; 0 means DefaultTextPageSize. Pages are
	// cut from the minimized text on UTF-8 character boundaries, so a page
	// may be up to 3 bytes shorter.
	TextPageSize int
	// CacheTTL sets the ttlMs hints sent to clients of protocol revision
	// 2026-07-28 and later; nil means DefaultCacheTTL. Older revisions always
	// get ttlMs 0. cacheScope is always "private".
	CacheTTL *CacheTTL
}

// CacheTTL is how long a client may keep each kind of result (the ttlMs
// hint). Zero means "immediately stale".
type CacheTTL struct {
	List      time.Duration // resources/list pages
	Read      time.Duration // resources/read results, whole or one page
	Templates time.Duration // resources/templates/list pages
}

// Defaults of ResourceOptions (justified in docs/uris.md, "Caching hints").
const (
	DefaultTemplatesPageSize = 10
	DefaultTextPageSize      = 16 << 10
	DefaultListTTL           = 0
	DefaultReadTTL           = 0
	DefaultTemplatesTTL      = 60 * time.Second
)

// DefaultCacheTTL returns the default CacheTTL.
func DefaultCacheTTL() CacheTTL {
	return CacheTTL{List: DefaultListTTL, Read: DefaultReadTTL, Templates: DefaultTemplatesTTL}
}

// validate checks o and returns it with defaults filled in.
func (o ResourceOptions) validate() (ResourceOptions, error) {
	switch {
	case o.TemplatesPageSize < 0 || o.TemplatesPageSize > 100:
		return o, fmt.Errorf("%w: Resources.TemplatesPageSize must be between 1 and 100", ErrBadConfig)
	case o.TextPageSize != 0 && (o.TextPageSize < 64 || o.TextPageSize > 1<<20):
		return o, fmt.Errorf("%w: Resources.TextPageSize must be between 64 and 1048576", ErrBadConfig)
	case o.CacheTTL != nil && (o.CacheTTL.List < 0 || o.CacheTTL.Read < 0 || o.CacheTTL.Templates < 0):
		return o, fmt.Errorf("%w: Resources.CacheTTL must not be negative", ErrBadConfig)
	}
	if o.TemplatesPageSize == 0 {
		o.TemplatesPageSize = DefaultTemplatesPageSize
	}
	if o.TextPageSize == 0 {
		o.TextPageSize = DefaultTextPageSize
	}
	if o.CacheTTL == nil {
		d := DefaultCacheTTL()
		o.CacheTTL = &d
	}
	return o, nil
}

// ropts is s.cfg.Resources with defaults (New validates it; a Server built
// otherwise still gets the defaults).
func (s *Server) ropts() ResourceOptions {
	o, err := s.cfg.Resources.validate()
	if err != nil {
		o, _ = ResourceOptions{}.validate()
	}
	return o
}

// ProtocolStateless is the first MCP protocol revision without sessions
// (SEP-2575): its requests carry their protocol version in _meta.
const ProtocolStateless = "2026-07-28"

// statelessRevision reports whether a request's params _meta says it
// follows protocol revision 2026-07-28 or later.
func statelessRevision(m mcp.Meta) bool {
	v, _ := m[mcp.MetaKeyProtocolVersion].(string)
	return v >= ProtocolStateless
}

// cacheable is the cache hint of a result: always cacheScope "private"
// (per-user PHI, no shared cache may keep it); ttlMs is ttl for 2026-07-28
// clients and 0 for older revisions, which have no such field (the SDK
// sends it anyway; 0 is the conservative value for a client that reads it).
func cacheable(m mcp.Meta, ttl time.Duration) mcp.Cacheable {
	c := mcp.Cacheable{CacheScope: "private"}
	if statelessRevision(m) {
		c.TTLMs = int(ttl / time.Millisecond)
	}
	return c
}

// Page _meta keys of a ranged read's content.
const (
	PageKey  = "custos/page"  // the page number returned
	PagesKey = "custos/pages" // how many pages the released text has
)

// splitPages cuts text into pages of at most size bytes, each ending on a
// UTF-8 character boundary (a page is shorter rather than split a
// character; invalid UTF-8 is cut at size). Empty text is one empty page.
// Concatenating the pages gives text back. size must be at least
// utf8.UTFMax.
func splitPages(text []byte, size int) [][]byte {
	pages := [][]byte{}
	for len(text) > size {
		end := size
		// If a valid character straddles the cut, cut before it instead
		// (it starts at most UTFMax-1 bytes earlier, never at 0 as
		// size >= UTFMax: every page is non-empty).
		for i := end - 1; i > 0 && i > end-utf8.UTFMax; i-- {
			if utf8.RuneStart(text[i]) {
				if r, n := utf8.DecodeRune(text[i:]); (r != utf8.RuneError || n > 1) && i+n > end {
					end = i
				}
				break
			}
		}
		pages = append(pages, text[:end])
		text = text[end:]
	}
	return append(pages, text)
}

// catalogFailed logs a catalog failure, records it under reason (the
// record carries the reason only, not the store's error) and refuses the
// request: nothing is released.
func (s *Server) catalogFailed(ctx context.Context, e audit.Entry, reason string, err error) error {
	s.log.Error("catalog unavailable; request refused", "action", e.Action, "err", err)
	return s.refuse(ctx, e, audit.OutcomeError, reason, refused("catalog unavailable: request refused"))
}

// list answers resources/list: scan the catalog from the cursor position,
// keep each item the policy would let this caller read, audit what is
// returned, then answer. A caller to whom the policy says nothing is
// visible gets one empty page without cursor, and no scan.
func (s *Server) list(ctx context.Context, id Identity, p *mcp.ListResourcesParams) (*mcp.ListResourcesResult, error) {
	e := s.entry(ctx, id, ActionList)
	e.DecisionID = uuid.NewString() // names this list operation; per-item decisions are summarized in Reason

	keys, err := s.cfg.Keys.CursorKeys(ctx)
	if err == nil && len(keys) == 0 {
		err = errors.New("no cursor key")
	}
	if err != nil {
		return nil, s.refuse(ctx, e, audit.OutcomeError, ReasonCursorKeyUnavailable, refused("keys unavailable: request refused"))
	}
	al, err := s.researchAliaser(ctx, id)
	if err != nil {
		return nil, s.aliasKeyUnavailable(ctx, e, err)
	}
	binding := cursorBinding(id)
	tagKey := entityTagKey(keys[0].Bytes)
	after := ""
	if p != nil && p.Cursor != "" {
		st, err := openCursorAny(keys, binding, p.Cursor, s.now())
		if err != nil {
			return nil, s.refuse(ctx, e, audit.OutcomeDeny, ReasonBadCursor, badCursor(err))
		}
		after = st.After
	}

	// Nothing visible: the policy says that no resource can be allowed to
	// this caller for this purpose, and the engine enforces that on every
	// decision, so a scan would deny every item: skip it and answer one
	// empty page, no cursor (decide.go, nothingVisible).
	subj := policy.NewSubject(id.Principal)
	nothing, err := s.nothingVisible(ctx, id, subj)
	if clientCancelled(ctx, err) {
		return nil, s.undecidedCancelled(e.Action)
	}
	if err != nil {
		s.log.Error("policy could not say whether anything is visible; request refused", "list", e.DecisionID, "err", err)
		return nil, s.refuse(ctx, e, audit.OutcomeError, ReasonPolicyError+" returned=0 denied=0 scanned=0", undecided())
	}

	// A catalog with an index (store.Live) is scanned over the caller's
	// tenant only: the tenant boundary (finishDecision) denies every other
	// resource whatever the policy says, so skipping them changes no page.
	// Items are decided on their indexed labels; the metadata of an
	// allowed one is read afterwards (Get) and must be the version decided.
	ix, err := s.catalogIndex()
	if err != nil {
		return nil, s.catalogFailed(ctx, e, ReasonCatalogUnavailable, err)
	}
	var (
		items     []*mcp.Resource
		patients  []string
		obls      []string
		scanned   int
		denied    int
		policyErr int
		// policyFailure is the error that stopped the scan.
		policyFailure error
		grants        grantsRelied // break-the-glass grants the page relies on
		last          = after
		more          = !nothing
	)
scan:
	for more && len(items) < s.cfg.PageSize && scanned < s.cfg.ScanLimit {
		var (
			batch []store.Resource
			shown []string // the position of each item in the listing: its URI as shown
			n     = min(s.cfg.ScanLimit-scanned, 256)
		)
		batch, shown, err = s.scanPage(ctx, id, al, ix, last, n)
		if err != nil {
			e.URIs, e.Patients, e.Digests = []string{}, []string{}, []string{} // nothing of the page is released
			return nil, s.catalogFailed(ctx, e, ReasonCatalogUnavailable, err)
		}
		if len(batch) == 0 {
			more = false
			break
		}
		// Decide no more of the chunk than can be consumed: up to the
		// page's free slots (a page fills at the earliest when every
		// item is allowed) and the scan budget.
		batch = batch[:min(len(batch), s.cfg.PageSize-len(items), s.cfg.ScanLimit-scanned)]
		ds, bgs, err := s.decideBatch(ctx, id, subj, batch)
		if err != nil {
			// The page cannot be decided: stop scanning and fail the
			// whole request below rather than return a page that looks
			// complete.
			policyErr++
			policyFailure = err
			break scan
		}
		for i, r := range batch {
			d := ds[i]
			if d.Allow && ix != nil {
				full, err := s.cfg.Catalog.Get(r.URI)
				switch {
				case errors.Is(err, store.ErrNotFound):
					d.Allow = false // removed since it was indexed: not listed
				case err != nil:
					e.URIs, e.Patients, e.Digests = []string{}, []string{}, []string{} // nothing of the page is released
					return nil, s.catalogFailed(ctx, e, ReasonCatalogUnavailable, err)
				case !sameDecided(full, r):
					// Replaced since it was indexed (another version, or
					// a file from elsewhere whose versions restart: then
					// its labels may differ at the same version): end the
					// page before it; the next page decides what is there.
					break scan
				default:
					r = full
				}
			}
			scanned++
			last = r.URI
			if al != nil {
				last = shown[i]
			}
			if !d.Allow {
				denied++
			} else {
				item := listItem(r, d, tagKey)
				if al != nil {
					al.present(item, r, d, tagKey)
				}
				items = append(items, item)
				grants.add(bgs[i])
				e.URIs = append(e.URIs, r.URI)
				e.Digests = append(e.Digests, digestRef(r))
				patients = append(patients, r.Labels.Patient)
				for _, o := range d.Obligations {
					obls = append(obls, o.String())
				}
			}
			if len(items) == s.cfg.PageSize || scanned == s.cfg.ScanLimit {
				break
			}
		}
	}
	// more stays true whenever the scan stopped before the end of the
	// catalog (page full or scan budget spent). The catalog is deliberately
	// not peeked: whether anything follows a full page must not depend on
	// entries the caller may not see, so a full page always carries a
	// cursor, even when the next page turns out empty.

	e.Reason = fmt.Sprintf("returned=%d denied=%d scanned=%d", len(items), denied, scanned) + grants.reason()
	if nothing {
		e.Reason = ReasonNothingVisible + " " + e.Reason
	}
	if clientCancelled(ctx, policyFailure) {
		return nil, s.undecidedCancelled(e.Action)
	}
	if policyErr > 0 {
		// Fail closed: nothing of the page is released.
		e.URIs, e.Patients, e.Digests = []string{}, []string{}, []string{}
		s.log.Error("policy could not decide a list item; request refused", "list", e.DecisionID)
		return nil, s.refuse(ctx, e, audit.OutcomeError, ReasonPolicyError+" "+e.Reason, undecided())
	}
	var meta mcp.Meta
	if p != nil {
		meta = p.Meta
	}
	res := &mcp.ListResourcesResult{Resources: items, Cacheable: cacheable(meta, s.ropts().CacheTTL.List)}
	if res.Resources == nil {
		res.Resources = []*mcp.Resource{}
	}
	if more {
		nonce, err := newNonce()
		if err == nil {
			res.NextCursor, err = sealCursor(keys[0].Bytes, binding, nonce, cursorState{After: last, IAT: s.now().Unix()})
		}
		if err != nil {
			s.log.Error("cannot seal cursor; request refused", "err", err)
			e.URIs, e.Patients, e.Digests = []string{}, []string{}, []string{}
			return nil, s.refuse(ctx, e, audit.OutcomeError, ReasonCursorSealFailed, refused("cannot seal cursor: request refused"))
		}
	}
	e.Patients = dedupe(patients)
	e.Obligations = dedupe(obls)
	e.Outcome = audit.OutcomeAllow
	rec, err := s.commit(ctx, e)
	if err != nil {
		return nil, err
	}
	s.recordUses(grants, rec)
	res.Meta = receipt(rec)
	return res, nil
}

// indexedCatalog is a Catalog that keeps an in-memory index of its
// resources by tenant and patient (store.Live does).
type indexedCatalog interface {
	// Index returns the index of the catalog now served; it describes
	// that catalog even after another one replaced it.
	Index() (*store.Index, error)
}

// catalogIndex is the index of the catalog, nil if it keeps none.
func (s *Server) catalogIndex() (*store.Index, error) {
	if c, ok := s.cfg.Catalog.(indexedCatalog); ok {
		return c.Index()
	}
	return nil, nil
}

// scanPage returns the next n candidates of a list or completion scan
// after last, in the order the caller is shown them: a research caller's
// (al not nil) in research-URI order, with their URIs as shown (shown is
// nil for the others), and over an indexed catalog (ix not nil) the
// caller's tenant only (the tenant boundary, finishDecision, denies every
// other resource whatever the policy says, so skipping them changes no
// answer), as index entries (entryResources): the caller decides on their
// labels and reads an allowed one's metadata afterwards (Get), which must
// be the version decided (sameDecided).
func (s *Server) scanPage(ctx context.Context, id Identity, al *aliaser, ix *store.Index, last string, n int) (batch []store.Resource, shown []string, err error) {
	switch {
	case al != nil && ix != nil:
		return al.indexedPage(ctx, ix, id.Principal.Tenant, last, n)
	case al != nil:
		return al.page(ctx, last, n)
	case ix != nil:
		return entryResources(ix.TenantPage(id.Principal.Tenant, last, n)), nil, nil
	default:
		batch, err = s.cfg.Catalog.Page(last, n)
		return batch, nil, err
	}
}

// entryResources are index entries as the resources decided on: URI,
// labels, MIME type, version and digest (what a decision reads, and what
// tells the version decided apart), without the rest of the metadata.
func entryResources(es []store.IndexEntry) []store.Resource {
	rs := make([]store.Resource, len(es))
	for i, e := range es {
		rs[i] = store.Resource{URI: e.URI, MIMEType: e.MIMEType, Version: e.Version, Digest: e.Digest, Labels: e.Labels}
	}
	return rs
}

// listItem is the minimized metadata of one listed resource: names, titles
// and descriptions are scrubbed of identifiers (minimize.ScrubString, inside
// UUIDs and hex runs too: they come from the source, not from custos), and
// size, lastModified and the content digest are given only when read would
// return the stored bytes unchanged. Every item carries its entity tag under ETagKey (see
// entityTag; tagKey is entityTagKey of the newest cursor key).
func listItem(r store.Resource, d policy.Decision, tagKey []byte) *mcp.Resource {
	item := &mcp.Resource{
		URI:         r.URI,
		Name:        minimize.ScrubString(r.Name),
		Title:       minimize.ScrubString(r.Title),
		Description: minimize.ScrubString(r.Description),
		MIMEType:    r.MIMEType,
		Annotations: annotations(r, len(d.Obligations) == 0),
	}
	item.Meta = mcp.Meta{}
	if len(d.Obligations) == 0 {
		item.Size = r.Size
		item.Meta[DigestKey], item.Meta[VersionKey] = r.Digest, r.Version
	}
	if t := entityTag(r, d, tagKey); t != "" {
		item.Meta[ETagKey] = t
	}
	return item
}

// annotations are the resource's annotations; lastModified only when read
// would return the record unminimized (it is often a clinical date, e.g.
// when a result was issued, which de-identification removes from the body).
func annotations(r store.Resource, full bool) *mcp.Annotations {
	a := &mcp.Annotations{Priority: r.Annotations.Priority}
	for _, au := range r.Annotations.Audience {
		a.Audience = append(a.Audience, mcp.Role(au))
	}
	if full && !r.Annotations.LastModified.IsZero() {
		a.LastModified = r.Annotations.LastModified.UTC().Format("2006-01-02T15:04:05Z")
	}
	return a
}

// read answers resources/read: validate, look up, decide, audit durably,
// and only then fetch and minimize the payload.
//
// A page URI (store.PageURI) is read the same way, as the resource it
// belongs to: the same decision on the resource, its own audit record
// (reason suffixed ",page=N"), then the page is cut from the minimized text
// (splitPages). A page past the end answers exactly like a missing
// resource; its allow record is followed by an error record
// "page_out_of_range,page=N" (the page count is known only after the
// payload was fetched and minimized, which the allow record must precede).
func (s *Server) read(ctx context.Context, id Identity, p *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	e := s.entry(ctx, id, ActionRead)
	raw := ""
	var meta mcp.Meta
	if p != nil {
		raw, meta = p.URI, p.Meta
	}
	if raw == s.emptyURI && raw != "" {
		raw = "" // named by the HTTP layer for an empty uri (emptyName)
	}
	pu, err := store.ParseReadURI(raw)
	if err != nil {
		// The raw string may hold a secret (userinfo, a token in a query):
		// neither the audit record nor the error repeats it.
		return nil, s.refuse(ctx, e, audit.OutcomeDeny, ReasonBadURI, badURI(err))
	}
	asked := pu.String() // what the client named; u is the resource
	u, page := pu.URI, pu.Page
	named := u.String() // the resource as the client named it (a research alias, or not)
	al, err := s.researchAliaser(ctx, id)
	if err != nil {
		return nil, s.aliasKeyUnavailable(ctx, e, err)
	}
	viaAlias := false // a research caller named the resource by its alias
	if al != nil && u.Tenant == id.Principal.Tenant {
		// A research caller names aliases; an unknown one stays as named
		// and is not found, like any missing URI. Only its own tenant's:
		// the tenant boundary denies every other resource, and resolving
		// another tenant's aliases made them (one keyed hash per patient,
		// kept), so that a researcher's first read naming that tenant
		// took time in proportion to its patients, and none for a tenant
		// that does not exist
		// (TestResearchReadResolvesAliasesOfItsOwnTenantOnly).
		ix, err := s.catalogIndex()
		if err != nil {
			return nil, s.catalogFailed(ctx, e, ReasonCatalogUnavailable, err)
		}
		if ix != nil {
			if real, ok := al.indexedIn(ix, u); ok {
				u, viaAlias = real, true
			}
		} else if real, ok := al.in(ctx, u); ok {
			u, viaAlias = real, true
		}
	}
	v := s.decideResource(ctx, id, e, u, page, true)
	if v.err != nil {
		return nil, v.err
	}
	if !v.allow {
		return nil, notFound(asked)
	}
	r, d, rec, e := v.r, v.d, v.rec, v.e

	// The record is durable: fetch and minimize. The fetch is not cut
	// short by the client's cancellation: an encrypted catalog's data-key
	// unwrap (a Vault call, bounded by its own timeout) cancelled with the
	// request came back as a fetch failure, logged as an error, answered
	// -32603 and counted refused (CustosRequestsRefused) for a client that
	// merely went away (TestReadCancelledDuringFetch). What is on record,
	// allowed, is what is done.
	payload, err := s.cfg.Catalog.Blob(context.WithoutCancel(ctx), r.Digest)
	if err != nil {
		s.log.Error("payload fetch failed after audit; nothing released", "decision", d.ID, "err", err)
		if errors.Is(err, store.ErrDataKey) {
			return nil, s.auditFailure(ctx, e, withPage(ReasonDataKeyUnavailable, page), refused("keys unavailable: the payload's data key could not be unwrapped; nothing released"))
		}
		return nil, s.auditFailure(ctx, e, withPage(ReasonPayloadUnavailable, page), refused("payload unavailable: nothing released"))
	}
	mopts := minimize.Options{Now: s.now(), Subject: r.Labels.Patient}
	if viaAlias {
		// Only a read by alias gets the patient's alias in the payload: a
		// research read of a catalog URI (held from elsewhere, naming the
		// real patient) that did would link the real patient to the alias
		// the research view shows; there the reference is dropped.
		mopts.Alias = al.minimizeAlias(u, r.Labels.Patient)
	}
	mopts.KeyID = s.readKeyID(u.Tenant, r.Source != "", al, viaAlias)
	out, err := minimize.Apply(r.MIMEType, payload, d.Obligations, mopts)
	if err != nil {
		s.log.Error("minimization failed; nothing released", "decision", d.ID, "err", err)
		return nil, s.auditFailure(ctx, e, withPage(ReasonMinimizationFailed, page), refused("minimization failed: nothing released"))
	}
	c := &mcp.ResourceContents{URI: asked, MIMEType: r.MIMEType, Meta: mcp.Meta{}}
	if page > 0 {
		// Pages are cut from the minimized text only: whatever the page
		// boundaries, concatenated pages are the minimized whole.
		pages := splitPages(out, s.ropts().TextPageSize)
		if page > len(pages) {
			return nil, s.auditFailure(ctx, e, withPage(ReasonPageOutOfRange, page), notFound(asked))
		}
		out = pages[page-1]
		c.Meta[PageKey], c.Meta[PagesKey] = page, len(pages)
	}
	if minimize.IsBinary(r.MIMEType) {
		c.Blob = out
	} else {
		c.Text = string(out)
	}
	if len(d.Obligations) == 0 {
		c.Meta[DigestKey], c.Meta[VersionKey] = r.Digest, r.Version
	}
	var tagKey []byte
	if len(d.Obligations) > 0 {
		if keys, err := s.cfg.Keys.CursorKeys(ctx); err == nil && len(keys) > 0 {
			tagKey = entityTagKey(keys[0].Bytes)
		}
	}
	t := entityTag(r, d, tagKey)
	if al != nil {
		// Keyed by the URI named: a research caller that names a catalog
		// URI must not get the tag of its alias (it would link the two).
		t = researchEntityTag(r, d, tagKey, named)
	}
	if t != "" {
		c.Meta[ETagKey] = t
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}, Cacheable: cacheable(meta, s.ropts().CacheTTL.Read), Meta: receipt(rec)}, nil
}

// readKeyID is the name a read's view gives the resources of tenant it
// names (minimize.Options.KeyID, the pseudonymize obligation): the keyed
// id of the resource's URI (Config.References), so that a reader can
// join a Claim's insurance.coverage to the Coverage's URI. Only a
// resource a streaming import named (keyed: Resource.Source set) has its
// references named so; a manifest import's URIs carry no keyed ids, so
// its references would name nothing. A reference is named whether or not
// the catalog holds its target (store.Referencer), so a view does not
// tell a hidden or retired resource from a missing one. A research caller
// is shown aliases, never catalog ids: a read by alias names a resource by
// the alias of its keyed id (the id its research URI carries), any other
// research read names none (as minimizeAlias gives the patient's alias
// only to a read by alias). Without References it names nothing.
func (s *Server) readKeyID(tenant string, keyed bool, al *aliaser, viaAlias bool) func(typ, id string) (string, bool) {
	refs := s.cfg.References
	return func(typ, id string) (string, bool) {
		if refs == nil || !keyed || al != nil && !viaAlias {
			return "", false
		}
		k, ok := refs.KeyedID(tenant, typ, id)
		if ok && al != nil {
			k = al.alias(tenant, k)
		}
		return k, ok
	}
}

// withPage suffixes an audit reason with the page a ranged read named.
func withPage(reason string, page int) string {
	if page == 0 {
		return reason
	}
	if reason == "" {
		return "page=" + strconv.Itoa(page)
	}
	return reason + ",page=" + strconv.Itoa(page)
}

// templates answers resources/templates/list, one page at a time: each page
// is decided by the policy and audited on its own. Cursors are sealed like
// list cursors but for a different purpose (templatesCursorBinding), so a
// list cursor does not open here nor the reverse.
func (s *Server) templates(ctx context.Context, id Identity, p *mcp.ListResourceTemplatesParams) (*mcp.ListResourceTemplatesResult, error) {
	e := s.entry(ctx, id, ActionTemplates)
	all := allTemplates()
	size := s.ropts().TemplatesPageSize

	keys, err := s.cfg.Keys.CursorKeys(ctx)
	if err == nil && len(keys) == 0 {
		err = errors.New("no cursor key")
	}
	if err != nil {
		return nil, s.refuse(ctx, e, audit.OutcomeError, ReasonCursorKeyUnavailable, refused("keys unavailable: request refused"))
	}
	binding := templatesCursorBinding(id)
	start := 0
	var meta mcp.Meta
	if p != nil {
		meta = p.Meta
	}
	if p != nil && p.Cursor != "" {
		st, err := openCursorAny(keys, binding, p.Cursor, s.now())
		if err == nil {
			i := slices.IndexFunc(all, func(t store.Template) bool { return t.URITemplate == st.After })
			if i < 0 { // the server's templates changed since the cursor was issued
				err = fmt.Errorf("%w: stale", ErrBadCursor)
			}
			start = i + 1
		}
		if err != nil {
			return nil, s.refuse(ctx, e, audit.OutcomeDeny, ReasonBadCursor, badCursor(err))
		}
	}
	in := policy.Input{Principal: id.Principal, PurposeOfUse: id.PurposeOfUse, Action: policy.ActionTemplates}
	d, derr := s.decider(ctx).Decide(ctx, in)
	if d.Revision != "" {
		d.Revision = s.policyRevision(ctx, d.Revision)
	}
	e.DecisionID = d.ID
	if d.Revision != "" {
		e.PolicyRevision = d.Revision
	}
	e.Reason = strings.Join(d.Reasons, ",")
	switch {
	case clientCancelled(ctx, derr):
		return nil, s.undecidedCancelled(e.Action)
	case derr != nil:
		e.Outcome = audit.OutcomeError
		s.log.Error("policy could not decide; request refused", "decision", d.ID, "err", derr)
	case !d.Allow:
		e.Outcome = audit.OutcomeDeny
	default:
		e.Outcome = audit.OutcomeAllow
	}
	res := &mcp.ListResourceTemplatesResult{Cacheable: cacheable(meta, s.ropts().CacheTTL.Templates), ResourceTemplates: []*mcp.ResourceTemplate{}}
	if e.Outcome == audit.OutcomeAllow {
		end := min(start+size, len(all))
		for _, t := range all[start:end] {
			res.ResourceTemplates = append(res.ResourceTemplates, &mcp.ResourceTemplate{
				URITemplate: t.URITemplate, Name: t.Name, Title: t.Title, Description: t.Description, MIMEType: t.MIMEType,
			})
		}
		if end < len(all) {
			nonce, err := newNonce()
			if err == nil {
				res.NextCursor, err = sealCursor(keys[0].Bytes, binding, nonce, cursorState{After: all[end-1].URITemplate, IAT: s.now().Unix()})
			}
			if err != nil {
				s.log.Error("cannot seal cursor; request refused", "err", err)
				e.Outcome, e.Reason = audit.OutcomeError, ReasonCursorSealFailed
			}
		}
	}
	rec, err := s.commitInput(ctx, e, &in)
	if err != nil {
		return nil, err
	}
	switch {
	case e.Reason == ReasonCursorSealFailed:
		return nil, refused("cannot seal cursor: request refused")
	case e.Outcome == audit.OutcomeError:
		return nil, undecided()
	case e.Outcome == audit.OutcomeDeny:
		return nil, &jsonrpcForbidden
	}
	res.Meta = receipt(rec)
	return res, nil
}

// allTemplates is every template the server serves, in a fixed order: one
// per resource family, then the page templates.
func allTemplates() []store.Template {
	return append(store.Templates(), store.PageTemplates()...)
}

// ReceiptKey is the _meta key of a result's audit receipt: the event id of
// the durable audit record that authorized it. A client can keep it and an
// auditor can find the record (and prove its inclusion) by it.
const ReceiptKey = "custos/audit-event"

func receipt(rec audit.Record) mcp.Meta { return mcp.Meta{ReceiptKey: rec.EventID} }

func dedupe(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// sameDecided reports whether full, read from the catalog after a list
// item was decided on its indexed entry r, is what was decided on: the same
// version and content, and the same decision inputs (labels, MIME type).
// Versions alone are not enough across catalog files from different
// lineages (a restored or separately built file restarts them).
func sameDecided(full, r store.Resource) bool {
	a, b := full.Labels, r.Labels
	return full.Version == r.Version && full.Digest == r.Digest && full.MIMEType == r.MIMEType &&
		a.Tenant == b.Tenant && a.Patient == b.Patient && a.Type == b.Type &&
		slices.Equal(a.Sensitivity, b.Sensitivity) && slices.Equal(a.Consent, b.Consent)
}
