package server

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/policy/btg"
	"github.com/custos-mcp/custos/store"
)

// Audit actions written by this package.
const (
	ActionList      = "resources/list"
	ActionRead      = "resources/read"
	ActionTemplates = "resources/templates/list"
)

// private marks every result as per-user data that only the requesting
// user's client may cache, and not for long.
var private = mcp.Cacheable{TTLMs: 0, CacheScope: "private"}

// list answers resources/list: scan the catalog from the cursor position,
// keep each item the policy would let this caller read, audit what is
// returned, then answer.
func (s *Server) list(ctx context.Context, id Identity, p *mcp.ListResourcesParams) (*mcp.ListResourcesResult, error) {
	e := s.entry(ctx, id, ActionList)
	e.DecisionID = uuid.NewString() // names this list operation; per-item decisions are summarized in Reason

	keys, err := s.cfg.Keys.CursorKeys(ctx)
	if err == nil && len(keys) == 0 {
		err = errors.New("no cursor key")
	}
	if err != nil {
		e.Outcome, e.Reason = audit.OutcomeError, "cursor_key_unavailable"
		if _, aerr := s.commit(ctx, e); aerr != nil {
			return nil, aerr
		}
		return nil, refused("keys unavailable: request refused")
	}
	binding := cursorBinding(id)
	after := ""
	if p != nil && p.Cursor != "" {
		st, err := openCursorAny(keys, binding, p.Cursor, s.now())
		if err != nil {
			e.Outcome, e.Reason = audit.OutcomeDeny, "bad_cursor"
			if _, aerr := s.commit(ctx, e); aerr != nil {
				return nil, aerr
			}
			return nil, invalidParams("invalid cursor: %s", strings.TrimPrefix(err.Error(), ErrBadCursor.Error()+": "))
		}
		after = st.After
	}

	var (
		items     []*mcp.Resource
		patients  []string
		obls      []string
		scanned   int
		denied    int
		policyErr int
		last      = after
		more      = true
		subj      = policy.NewSubject(id.Principal)
	)
scan:
	for len(items) < s.cfg.PageSize && scanned < s.cfg.ScanLimit {
		batch, err := s.cfg.Catalog.Page(last, min(s.cfg.ScanLimit-scanned, 256))
		if err != nil {
			s.log.Error("catalog scan failed", "err", err)
			e.Outcome, e.Reason = audit.OutcomeError, "catalog_unavailable"
			if _, aerr := s.commit(ctx, e); aerr != nil {
				return nil, aerr
			}
			return nil, refused("catalog unavailable: request refused")
		}
		if len(batch) == 0 {
			more = false
			break
		}
		for _, r := range batch {
			scanned++
			last = r.URI
			d, err := s.decide(ctx, id, subj, policy.ActionList, r)
			if err != nil {
				// The page cannot be decided: stop scanning and fail the
				// whole request below rather than return a page that looks
				// complete.
				policyErr++
				break scan
			}
			if !d.Allow {
				denied++
			} else {
				items = append(items, listItem(r, d))
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

	e.Reason = fmt.Sprintf("returned=%d denied=%d scanned=%d", len(items), denied, scanned)
	if policyErr > 0 {
		// Fail closed: nothing of the page is released.
		e.Outcome = audit.OutcomeError
		e.Reason = "policy_error " + e.Reason
		e.URIs, e.Patients, e.Digests = []string{}, []string{}, []string{}
		s.log.Error("policy could not decide a list item; request refused", "list", e.DecisionID)
		if _, err := s.commit(ctx, e); err != nil {
			return nil, err
		}
		return nil, refused("access decision unavailable: request refused")
	}
	res := &mcp.ListResourcesResult{Resources: items, Cacheable: private}
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
			e.Outcome, e.Reason = audit.OutcomeError, "cursor_seal_failed"
			e.URIs, e.Patients, e.Digests = []string{}, []string{}, []string{}
			if _, aerr := s.commit(ctx, e); aerr != nil {
				return nil, aerr
			}
			return nil, refused("cannot seal cursor: request refused")
		}
	}
	e.Patients = dedupe(patients)
	e.Obligations = dedupe(obls)
	e.Outcome = audit.OutcomeAllow
	rec, err := s.commit(ctx, e)
	if err != nil {
		return nil, err
	}
	res.Meta = receipt(rec)
	return res, nil
}

// listItem is the minimized metadata of one listed resource: titles and
// descriptions are scrubbed of identifiers, and size and content digest are
// given only when read would return the stored bytes unchanged.
func listItem(r store.Resource, d policy.Decision) *mcp.Resource {
	item := &mcp.Resource{
		URI:         r.URI,
		Name:        minimize.ScrubString(r.Name),
		Title:       minimize.ScrubString(r.Title),
		Description: minimize.ScrubString(r.Description),
		MIMEType:    r.MIMEType,
		Annotations: annotations(r, len(d.Obligations) == 0),
	}
	if len(d.Obligations) == 0 {
		item.Size = r.Size
		item.Meta = mcp.Meta{"etag": r.ETag, "version": r.Version}
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
func (s *Server) read(ctx context.Context, id Identity, p *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	e := s.entry(ctx, id, ActionRead)
	raw := ""
	if p != nil {
		raw = p.URI
	}
	u, err := store.ParseURI(raw)
	if err != nil {
		// The raw string may hold a secret (userinfo, a token in a query):
		// neither the audit record nor the error repeats it.
		e.Outcome, e.Reason = audit.OutcomeDeny, "bad_uri"
		if _, aerr := s.commit(ctx, e); aerr != nil {
			return nil, aerr
		}
		return nil, invalidParams("invalid resource uri: %s", strings.TrimPrefix(err.Error(), store.ErrBadURI.Error()+": "))
	}
	uri := u.String()
	e.URIs = []string{uri}
	e.Patients = []string{u.Patient}
	e.DecisionID = uuid.NewString()

	r, err := s.cfg.Catalog.Get(uri)
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		e.Outcome, e.Reason = audit.OutcomeError, "catalog_unavailable"
		s.log.Error("catalog lookup failed", "err", err)
		if _, aerr := s.commit(ctx, e); aerr != nil {
			return nil, aerr
		}
		return nil, refused("catalog unavailable: request refused")
	}
	if found {
		e.Patients = []string{r.Labels.Patient}
		e.Digests = []string{digestRef(r)}
	} else {
		// Decide a missing URI as if it existed with no labels. A not-found
		// read then costs a policy evaluation like any other, and fails the
		// same way when the policy cannot decide, so neither the answer nor
		// its timing says whether the URI exists.
		r = store.Resource{URI: uri, MIMEType: u.MIMEType(), Labels: store.Labels{Tenant: u.Tenant, Patient: u.Patient, Type: u.Type}}
	}

	in := policy.Input{Subject: policy.NewSubject(id.Principal), PurposeOfUse: id.PurposeOfUse, Action: policy.ActionRead, Resource: resourceInput(r),
		BreakGlass: s.breakGlass(id, r.Labels.Patient)}
	d, derr := s.decideInput(ctx, in, r)
	// The input as evaluated, recorded (pseudonymized) with the decision
	// for replay against a candidate policy (custos policy impact).
	in.Principal, in.Subject = id.Principal, nil
	if d.ID != "" {
		e.DecisionID = d.ID
	}
	if d.Revision != "" {
		e.PolicyRevision = d.Revision
	}
	e.Reason = strings.Join(d.Reasons, ",")
	if derr != nil {
		e.Outcome = audit.OutcomeError
		if e.Reason == "" {
			e.Reason = "policy_error"
		}
		if !found {
			e.Reason += ",not_found"
		}
		s.log.Error("policy could not decide; request refused", "decision", d.ID, "err", derr)
		if _, aerr := s.commitInput(ctx, e, &in); aerr != nil {
			return nil, aerr
		}
		return nil, refused("access decision unavailable: request refused")
	}
	if !found {
		e.Outcome, e.Reason = audit.OutcomeDeny, "not_found"
		if _, aerr := s.commitInput(ctx, e, &in); aerr != nil {
			return nil, aerr
		}
		return nil, notFound(uri)
	}
	if !d.Allow {
		e.Outcome = audit.OutcomeDeny
		if e.Reason == "" {
			e.Reason = "denied"
		}
		if _, aerr := s.commitInput(ctx, e, &in); aerr != nil {
			return nil, aerr
		}
		return nil, notFound(uri)
	}
	for _, o := range d.Obligations {
		e.Obligations = append(e.Obligations, o.String())
	}
	e.Outcome = audit.OutcomeAllow
	rec, err := s.commitInput(ctx, e, &in)
	if err != nil {
		return nil, err
	}
	if in.BreakGlass != nil && slices.Contains(d.Reasons, "break_glass") {
		s.cfg.Grants.Used(in.BreakGlass.Grant, btg.Use{EventID: rec.EventID, Time: rec.Time, Action: ActionRead, Outcome: audit.OutcomeAllow})
	}

	// The record is durable: fetch and minimize.
	payload, err := s.cfg.Catalog.Blob(ctx, r.ETag)
	if err != nil {
		s.log.Error("payload fetch failed after audit; nothing released", "decision", d.ID, "err", err)
		if errors.Is(err, store.ErrDataKey) {
			return nil, s.auditFailure(ctx, e, "key_unavailable", refused("keys unavailable: the payload's data key could not be unwrapped; nothing released"))
		}
		return nil, s.auditFailure(ctx, e, "payload_unavailable", refused("payload unavailable: nothing released"))
	}
	out, err := minimize.Apply(r.MIMEType, payload, d.Obligations, minimize.Options{Now: s.now()})
	if err != nil {
		s.log.Error("minimization failed; nothing released", "decision", d.ID, "err", err)
		return nil, s.auditFailure(ctx, e, "minimization_failed", refused("minimization failed: nothing released"))
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: r.MIMEType}
	if isBinary(r.MIMEType) {
		c.Blob = out
	} else {
		c.Text = string(out)
	}
	if len(d.Obligations) == 0 {
		c.Meta = mcp.Meta{"etag": r.ETag, "version": r.Version}
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}, Cacheable: private, Meta: receipt(rec)}, nil
}

// templates answers resources/templates/list after a policy decision.
func (s *Server) templates(ctx context.Context, id Identity, p *mcp.ListResourceTemplatesParams) (*mcp.ListResourceTemplatesResult, error) {
	e := s.entry(ctx, id, ActionTemplates)
	if p != nil && p.Cursor != "" {
		// There is a single page; any cursor is one we never issued.
		e.Outcome, e.Reason = audit.OutcomeDeny, "bad_cursor"
		if _, aerr := s.commit(ctx, e); aerr != nil {
			return nil, aerr
		}
		return nil, invalidParams("invalid cursor: templates are served in one page")
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
	case derr != nil:
		e.Outcome = audit.OutcomeError
		s.log.Error("policy could not decide; request refused", "decision", d.ID, "err", derr)
	case !d.Allow:
		e.Outcome = audit.OutcomeDeny
	default:
		e.Outcome = audit.OutcomeAllow
	}
	if _, err := s.commitInput(ctx, e, &in); err != nil {
		return nil, err
	}
	switch e.Outcome {
	case audit.OutcomeError:
		return nil, refused("access decision unavailable: request refused")
	case audit.OutcomeDeny:
		return nil, &jsonrpcForbidden
	}
	res := &mcp.ListResourceTemplatesResult{Cacheable: private, ResourceTemplates: []*mcp.ResourceTemplate{}}
	for _, t := range store.Templates() {
		res.ResourceTemplates = append(res.ResourceTemplates, &mcp.ResourceTemplate{
			URITemplate: t.URITemplate, Name: t.Name, Title: t.Title, Description: t.Description, MIMEType: t.MIMEType,
		})
	}
	return res, nil
}

// ReceiptKey is the _meta key of a result's audit receipt: the event id of
// the durable audit record that authorized it. A client can keep it and an
// auditor can find the record (and prove its inclusion) by it.
const ReceiptKey = "custos/audit-event"

func receipt(rec audit.Record) mcp.Meta { return mcp.Meta{ReceiptKey: rec.EventID} }

// digestRef is the content reference recorded in the audit log.
func digestRef(r store.Resource) string { return fmt.Sprintf("%s@v%d", r.ETag, r.Version) }

// isBinary reports whether a MIME type is served as a base64 blob (anything
// that is neither text/* nor JSON).
func isBinary(mt string) bool {
	base, _, err := mime.ParseMediaType(mt)
	if err != nil {
		return true
	}
	return !(strings.HasPrefix(base, "text/") || base == "application/json" || strings.HasSuffix(base, "+json"))
}

func dedupe(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}
