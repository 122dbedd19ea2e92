package server

import "time"

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
func ResearchAlias(key []byte, id string) string { return researchAlias(key, id) }
