package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/store"
)

// ResearchPurpose is the purpose of use (HL7 HRESCH) whose callers see the
// de-identified research view: Safe Harbor payloads (the policy's
// obligations) and, here, research aliases in place of the catalog's ids.
const ResearchPurpose = "HRESCH"

// Research aliases. A patient id or resource id is, under Safe Harbor, a
// "unique identifying number or code" (class R) when it is the same code
// the rest of the organization uses: a researcher holding it could link a
// de-identified record to the clinical one. A caller with purpose HRESCH
// therefore never sees catalog ids: every URI it is shown (list items,
// completion values) carries, in place of the patient id and of the
// resource id, an alias — a UUID (version 8) made from
// HMAC-SHA256(audit key, "custos/research-alias/v1" 0x00 id). Aliases are
// stable while the audit key version is (so a study can link one patient's
// resources), mean nothing without the key, and are resolved back only by
// the server, through an index of the catalog. Reads, subscriptions and
// audit records use the real URI (audit records pseudonymize it as usual);
// the answer names the URI the caller asked for.

// aliasDomain separates research aliases from every other keyed hash made
// with the audit key (audit.Pseudonym uses another domain).
const aliasDomain = "custos/research-alias/v1\x00"

// researchAlias is the alias of one catalog id under key.
func researchAlias(key []byte, id string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(aliasDomain))
	m.Write([]byte(id))
	var u uuid.UUID
	copy(u[:], m.Sum(nil))
	u[6] = (u[6] & 0x0f) | 0x80 // version 8 (custom)
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 9562 variant
	return u.String()
}

// aliases is the reverse index alias → catalog id for one audit key
// version, rebuilt from the catalog when an alias is not found (at most
// once per aliasRebuild) or the key changes.
type aliases struct {
	mu    sync.Mutex
	keyID string
	built time.Time
	real  map[string]string
}

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

func (a *aliaser) alias(id string) string { return researchAlias(a.key.Bytes, id) }

// present rewrites a list item for the research caller: its URI, and its
// name, which the catalog derives from the resource id.
func (a *aliaser) present(item *mcp.Resource, uri, typ string) {
	item.URI = a.out(uri)
	if u, err := store.ParseURI(item.URI); err == nil && len(u.ID) >= 8 {
		item.Name = typ + "-" + u.ID[:8]
	}
}

// out is uri as the research caller sees it: patient and resource id
// replaced by their aliases. A URI that does not parse is returned as is
// (the server only shows catalog URIs).
func (a *aliaser) out(uri string) string {
	u, err := store.ParseURI(uri)
	if err != nil {
		return uri
	}
	u.Patient, u.ID = a.alias(u.Patient), a.alias(u.ID)
	return u.String()
}

// in resolves a URI the research caller named (its patient and id
// aliases) to the catalog URI; ok is false when either is not an alias of
// a catalog id (the caller gets "not found", as for any missing URI).
func (a *aliaser) in(ctx context.Context, u store.URI) (store.URI, bool) {
	p, ok1 := a.resolve(ctx, u.Patient)
	id, ok2 := a.resolve(ctx, u.ID)
	if !ok1 || !ok2 {
		return u, false
	}
	u.Patient, u.ID = p, id
	return u, true
}

// resolve returns the catalog id whose alias is alias.
func (a *aliaser) resolve(ctx context.Context, alias string) (string, bool) {
	idx := &a.s.aliases
	idx.mu.Lock()
	defer idx.mu.Unlock()
	if idx.keyID == a.key.ID+"\x00"+string(a.key.Bytes) {
		if id, ok := idx.real[alias]; ok {
			return id, true
		}
		if time.Since(idx.built) < aliasRebuild {
			return "", false
		}
	}
	real, err := a.index(ctx)
	if err != nil {
		a.s.log.Error("cannot index the catalog for research aliases", "err", err)
		return "", false
	}
	idx.keyID, idx.built, idx.real = a.key.ID+"\x00"+string(a.key.Bytes), time.Now(), real
	id, ok := real[alias]
	return id, ok
}

// index maps the alias of every patient id and resource id in the
// catalog to the id.
func (a *aliaser) index(ctx context.Context) (map[string]string, error) {
	real := map[string]string{}
	after := ""
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		page, err := a.s.cfg.Catalog.Page(after, 1024)
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			return real, nil
		}
		for _, r := range page {
			after = r.URI
			u, err := store.ParseURI(r.URI)
			if err != nil {
				continue
			}
			real[a.alias(u.Patient)] = u.Patient
			real[a.alias(u.ID)] = u.ID
		}
	}
}
