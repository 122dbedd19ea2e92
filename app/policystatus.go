package app

import (
	"sync"
	"time"

	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/server"
)

// PolicyStatus is the policy a running server has in force and the last
// candidate it refused, as 'custos policy status' shows them (GET
// /v1/policy on the admin socket). It holds digests, key ids, numbers and
// times, and a refusal's reason scrubbed as its audit record is: no
// secret, no PHI.
type PolicyStatus struct {
	// Source is "builtin", "dir" or "bundle"; Path is the directory or
	// bundle file ("" for the built-in policy).
	Source string `json:"source"`
	Path   string `json:"path,omitempty"`
	// Revision is the revision of the policy modules in force
	// ("sha256:…", the records' policy_revision); BundleDigest,
	// Sequence and KeyID are those of its bundle (file digest, signed
	// sequence claim, the key whose signature verified it).
	Revision     string `json:"revision"`
	BundleDigest string `json:"bundle_digest,omitempty"`
	Sequence     uint64 `json:"sequence,omitempty"`
	KeyID        string `json:"key_id,omitempty"`
	// LoadedAt is when the policy in force was loaded (UTC).
	LoadedAt time.Time `json:"loaded_at"`
	// LastRejection is the last candidate refused since the server
	// started (nil: none); Pending is true when it was refused after the
	// policy in force loaded: the rollout it belongs to is not serving.
	LastRejection *PolicyRejection `json:"last_rejection,omitempty"`
	Pending       bool             `json:"rollout_pending"`
}

// PolicyRejection is a refused candidate: when, why (the class of
// custos_policy_rejections_total and the reason, scrubbed as in its
// policy/reject record) and what it was, as far as its signature verified
// it (policy.Event).
type PolicyRejection struct {
	At                time.Time `json:"at"`
	Class             string    `json:"class"`
	Reason            string    `json:"reason"`
	CandidateDigest   string    `json:"candidate_digest,omitempty"`
	CandidateRevision string    `json:"candidate_revision,omitempty"`
	CandidateSequence uint64    `json:"candidate_sequence,omitempty"`
	CandidateKeyID    string    `json:"candidate_key_id,omitempty"`
}

// policyState is what PolicyStatus reports beyond the engine in force.
type policyState struct {
	mu       sync.Mutex
	loadedAt time.Time
	rejected *PolicyRejection
}

// loaded notes that the policy in force was loaded at t.
func (s *policyState) loaded(t time.Time) {
	s.mu.Lock()
	s.loadedAt = t.UTC()
	s.mu.Unlock()
}

// rejectedEvent notes the refusal ev, its reason as its policy/reject
// record has it (server.PolicyEventReason: strictly scrubbed, the digests
// it names whole; TestPolicyStatusReasonIsTheRecords).
func (s *policyState) rejectedEvent(ev policy.Event) {
	r := &PolicyRejection{At: ev.Time.UTC(), Class: policyRejectClass(ev.Err), Reason: server.PolicyEventReason(ev),
		CandidateDigest: ev.CandidateDigest, CandidateRevision: ev.CandidateRevision,
		CandidateSequence: ev.CandidateSequence, CandidateKeyID: ev.CandidateKeyID}
	s.mu.Lock()
	s.rejected = r
	s.mu.Unlock()
}

// PolicyStatus returns the policy in force and the last candidate refused.
func (a *App) PolicyStatus() PolicyStatus {
	st := PolicyStatus{Source: "builtin", Revision: a.policy.Revision()}
	switch {
	case a.o.Policy.Dir != "":
		st.Source, st.Path = "dir", a.o.Policy.Dir
	case a.o.Policy.Bundle != "":
		st.Source, st.Path = "bundle", a.o.Policy.Bundle
	}
	if a.reload != nil {
		e := a.reload.Current()
		st.Revision, st.BundleDigest, st.Sequence, st.KeyID = e.Revision(), e.BundleDigest(), e.BundleSequence(), e.BundleKeyID()
	}
	a.polState.mu.Lock()
	defer a.polState.mu.Unlock()
	st.LoadedAt = a.polState.loadedAt
	if r := a.polState.rejected; r != nil {
		c := *r
		st.LastRejection, st.Pending = &c, !c.At.Before(st.LoadedAt)
	}
	return st
}
