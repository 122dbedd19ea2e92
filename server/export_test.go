package server

import (
	"time"

	"github.com/custos-mcp/custos/store"
)

// SetMaxListenURIs lowers the per-listen URI bound for a test and returns
// the function that restores it.
func SetMaxListenURIs(n int) (restore func()) {
	old := maxListenURIs
	maxListenURIs = n
	return func() { maxListenURIs = old }
}

// WithExpiry returns id with its credential expiring at t, as an OAuth
// token's exp sets it.
func WithExpiry(id Identity, t time.Time) Identity {
	id.expires = t
	return id
}

// ResearchAlias is the research alias of a catalog id under key.
func ResearchAlias(key []byte, tenant, id string) string { return researchAlias(key, tenant, id) }

// PatientOf is patientOf of a server on catalog, with its fast paths, and
// lookupPatientOf, the plain catalog lookup it must agree with.
func PatientOf(catalog Catalog) (fast, plain func(store.URI) string) {
	s := &Server{cfg: Config{Catalog: catalog}}
	return s.patientOf, func(u store.URI) string { id, _ := s.lookupPatientOf(u); return id }
}

// PlainAliasesBuilt reports whether the server built the research alias
// index of the whole catalog (aliases.real), which an indexed catalog
// never needs.
func (s *Server) PlainAliasesBuilt() bool {
	s.aliases.mu.Lock()
	defer s.aliases.mu.Unlock()
	return s.aliases.real != nil
}

// AliasedTenants are the tenants whose research aliases the server has
// made (per audit key and catalog index).
func (s *Server) AliasedTenants() []string {
	s.aliases.mu.Lock()
	defer s.aliases.mu.Unlock()
	var out []string
	for t := range s.aliases.tenants {
		out = append(out, t)
	}
	return out
}
