package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store"
)

// ActionComplete is the audit action of a completion/complete request (like
// the subscription actions, a short name rather than the method).
const ActionComplete = "complete"

// MaxCompletionValues is the most values one completion returns (the MCP
// limit).
const MaxCompletionValues = 100

// maxCompletionInput bounds the argument and context values a completion
// request may carry, in bytes (longer than any valid URI segment).
const maxCompletionInput = store.MaxURILength

// complete answers completion/complete for the arguments of the resource
// templates (ref/resource with a uriTemplate of resources/templates/list).
//
// A suggested value is one some catalog resource has in that position of
// its URI, that matches the request's context arguments and whose resource
// the policy would let the caller list (policy.ActionList, the decision
// behind resources/list: a completion shows nothing list would not). Values
// are sorted and at most MaxCompletionValues; hasMore is set when more
// exist or the scan budget (Config.ScanLimit catalog entries) ran out, and
// total only when the scan saw every candidate. Each request is one audit
// record, durable before the answer, naming the patients whose resources
// the values came from.
func (s *Server) complete(ctx context.Context, ident identityFunc, req mcp.Request) (mcp.Result, error) {
	r, ok := req.(*mcp.CompleteRequest)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not supported: completion/complete"}
	}
	ctx, id, err := s.admit(ctx, ident, ActionComplete, req)
	if err != nil {
		return nil, err
	}
	return s.completeArgument(ctx, id, r.Params)
}

// completion is a validated completion request.
type completion struct {
	tokens []templateToken   // the template, parsed
	scheme string            // its resource family
	arg    string            // the variable to complete
	prefix string            // what the client typed so far
	given  map[string]string // context arguments of other variables
	// patients is whether the template names a patient: the templates of
	// tenant-level reference data (no {patient}) match only URIs without
	// one, and the others only URIs with one.
	patients bool
}

// templateToken is a literal run or a {variable} of a level-1 URI template.
type templateToken struct {
	lit, name string
}

// parseTemplate splits a level-1 template into tokens.
func parseTemplate(t string) []templateToken {
	var out []templateToken
	for t != "" {
		i := strings.IndexByte(t, '{')
		if i < 0 {
			return append(out, templateToken{lit: t})
		}
		if i > 0 {
			out = append(out, templateToken{lit: t[:i]})
		}
		j := strings.IndexByte(t[i:], '}')
		out = append(out, templateToken{name: t[i+1 : i+j]})
		t = t[i+j+1:]
	}
	return out
}

// parseCompletion validates p against the server's templates. Its errors
// are the -32602 message and the audit reason; they never echo values.
func parseCompletion(p *mcp.CompleteParams) (completion, string, error) {
	if p == nil || p.Ref == nil {
		return completion{}, ReasonBadCompletion, invalidParams("completion: ref is required")
	}
	if p.Ref.Type != "ref/resource" {
		return completion{}, ReasonUnknownRef, invalidParams("completion: unknown ref (this server has no prompts; use ref/resource with a uriTemplate)")
	}
	i := slices.IndexFunc(allTemplates(), func(t store.Template) bool { return t.URITemplate == p.Ref.URI })
	if i < 0 {
		return completion{}, ReasonUnknownRef, invalidParams("completion: ref uri is not a uriTemplate of resources/templates/list")
	}
	tmpl := allTemplates()[i].URITemplate
	c := completion{tokens: parseTemplate(tmpl), arg: p.Argument.Name, prefix: p.Argument.Value, given: map[string]string{}}
	c.scheme, _, _ = strings.Cut(tmpl, "://")
	c.patients = strings.Contains(tmpl, "{patient}")
	vars := map[string]bool{}
	for _, t := range c.tokens {
		if t.name != "" {
			vars[t.name] = true
		}
	}
	if !vars[c.arg] {
		return completion{}, ReasonUnknownArgument, invalidParams("completion: the template has no variable by that argument name")
	}
	if len(c.prefix) > maxCompletionInput {
		return completion{}, ReasonBadCompletion, invalidParams("completion: argument value too long")
	}
	if p.Context != nil {
		for name, v := range p.Context.Arguments {
			if len(v) > maxCompletionInput {
				return completion{}, ReasonBadCompletion, invalidParams("completion: context argument value too long")
			}
			// Context names the template does not have are ignored, as is
			// the argument being completed.
			if vars[name] && name != c.arg && name != store.PageVariable {
				c.given[name] = v
			}
		}
	}
	return c, "", nil
}

// seek is the longest URI prefix every matching resource starts with: the
// template expanded up to the first variable that is neither given nor the
// argument (whose typed prefix ends it).
func (c completion) seek() string {
	var b strings.Builder
	for _, t := range c.tokens {
		switch v, ok := c.given[t.name]; {
		case t.name == "":
			b.WriteString(t.lit)
		case t.name == c.arg:
			b.WriteString(c.prefix)
			return b.String()
		case ok:
			b.WriteString(v)
		default:
			return b.String()
		}
	}
	return b.String()
}

// value returns u's value of the argument, if u matches the template and
// the given context.
func (c completion) value(u store.URI) (string, bool) {
	if u.Scheme != c.scheme || (u.Patient != "") != c.patients {
		return "", false
	}
	vals := map[string]string{"tenant": u.Tenant, "patient": u.Patient, "type": u.Type, "id": u.ID}
	for name, v := range c.given {
		if vals[name] != v {
			return "", false
		}
	}
	v, ok := vals[c.arg]
	if !ok || !strings.HasPrefix(v, c.prefix) {
		return "", false
	}
	return v, true
}

// completeArgument scans the catalog from c.seek(), deciding each candidate
// whose value is not yet suggested, and audits the answer.
func (s *Server) completeArgument(ctx context.Context, id Identity, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	e := s.entry(ctx, id, ActionComplete)
	e.DecisionID = uuid.NewString() // names this completion; per-candidate decisions are summarized in Reason
	c, reason, err := parseCompletion(p)
	if err != nil {
		return nil, s.refuse(ctx, e, audit.OutcomeDeny, reason, err)
	}
	// A research caller names and is shown aliases (research.go): the
	// context's and the typed values of a patient or id are aliases, and
	// the candidates are scanned in research-URI order (by alias, as a
	// research list is), so that which values a truncated answer holds
	// says nothing of the catalog's ids.
	al, err := s.researchAliaser(ctx, id)
	if err != nil {
		return nil, s.aliasKeyUnavailable(ctx, e, err)
	}
	ix, err := s.catalogIndex()
	if err != nil {
		return nil, s.catalogFailed(ctx, e, ReasonCatalogUnavailable, err)
	}

	// Nothing visible to the caller: every candidate would be denied, so
	// none is scanned (see list).
	subj := policy.NewSubject(id.Principal)
	nothing, err := s.nothingVisible(ctx, id, subj)
	if clientCancelled(ctx, err) {
		return nil, s.undecidedCancelled(e.Action)
	}
	if err != nil {
		s.log.Error("policy could not say whether anything is visible; request refused", "completion", e.DecisionID, "err", err)
		return nil, s.refuse(ctx, e, audit.OutcomeError, ReasonPolicyError+" argument="+c.arg+" returned=0 denied=0 scanned=0", undecided())
	}
	var (
		values    []string
		seen      = map[string]bool{}
		patients  []string
		scanned   int
		denied    int
		policyErr bool
		// policyFailure is the error that stopped the scan.
		policyFailure error
		grants        grantsRelied                             // break-the-glass grants the values rely on
		complete      = c.arg == store.PageVariable || nothing // page numbers are not suggested: the count depends on minimization
		more          bool
		seek          = c.seek()
		last          = seek
	)
	if last != "" {
		last = last[:len(last)-1] // Page returns URIs > after; seek itself must be included
	}
scan:
	for !complete && scanned < s.cfg.ScanLimit {
		batch, shown, err := s.scanPage(ctx, id, al, ix, last, min(s.cfg.ScanLimit-scanned, 256))
		if err != nil {
			return nil, s.catalogFailed(ctx, e, ReasonCatalogUnavailable, err)
		}
		if len(batch) == 0 {
			complete = true
			break
		}
		for i, r := range batch {
			last = r.URI
			if al != nil {
				last = shown[i]
			}
			if !strings.HasPrefix(last, seek) && last > seek {
				complete = true // past every URI with the prefix
				break scan
			}
			scanned++
			u, err := store.ParseURI(last)
			if err != nil {
				continue
			}
			v, ok := c.value(u)
			if !ok || seen[v] {
				continue
			}
			d, bg, err := s.decide(ctx, id, subj, policy.ActionList, r)
			if err == nil && d.Allow && ix != nil {
				// Decided on the index's labels, as a list is: the
				// value stands only for the version the catalog holds.
				full, gerr := s.cfg.Catalog.Get(r.URI)
				switch {
				case errors.Is(gerr, store.ErrNotFound):
					d.Allow = false // removed since it was indexed
				case gerr != nil:
					return nil, s.catalogFailed(ctx, e, ReasonCatalogUnavailable, gerr)
				case !sameDecided(full, r):
					d, bg, err = s.decide(ctx, id, subj, policy.ActionList, full) // replaced since: decide what is there
				}
			}
			if err != nil {
				policyErr = true
				policyFailure = err
				break scan
			}
			if !d.Allow {
				denied++
				continue
			}
			if len(values) == MaxCompletionValues {
				more = true // a 101st value exists
				break scan
			}
			seen[v] = true
			values = append(values, v)
			grants.add(bg)
			patients = append(patients, r.Labels.Patient)
			if c.arg == "id" {
				e.URIs = append(e.URIs, r.URI)
			}
			if scanned == s.cfg.ScanLimit {
				break
			}
		}
	}
	// hasMore says only that a 101st value the caller may list exists, and
	// no total is given: a scan that spent its budget on entries the caller
	// may not list must answer like a scan that found nothing (otherwise a
	// context naming a hidden patient with many resources would answer
	// differently from one naming no patient at all).
	e.Reason = fmt.Sprintf("argument=%s returned=%d denied=%d scanned=%d", c.arg, len(values), denied, scanned) + grants.reason()
	if nothing {
		e.Reason = ReasonNothingVisible + " " + e.Reason
	}
	if clientCancelled(ctx, policyFailure) {
		return nil, s.undecidedCancelled(e.Action)
	}
	if policyErr {
		e.URIs = []string{}
		s.log.Error("policy could not decide a completion candidate; request refused", "completion", e.DecisionID)
		return nil, s.refuse(ctx, e, audit.OutcomeError, ReasonPolicyError+" "+e.Reason, undecided())
	}
	e.Outcome = audit.OutcomeAllow
	e.Patients = dedupe(patients)
	rec, err := s.commit(ctx, e)
	if err != nil {
		return nil, err
	}
	s.recordUses(grants, rec)
	slices.Sort(values)
	res := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, HasMore: more}, Meta: receipt(rec)}
	if res.Completion.Values == nil {
		res.Completion.Values = []string{}
	}
	return res, nil
}
