package policy

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/open-policy-agent/opa/v1/bundle"
)

// Rollback protection. A bundle's signature says who made it, not that it is
// the newest; the ordering claim is a sequence number in the bundle's
// manifest,
//
//	.manifest: {"revision": ..., "metadata": {"custos": {"sequence": N}}}
//
// with N a whole number from 1 to MaxSequence. The manifest is one of the
// files whose SHA-256 digest the bundle signature lists, so the claim is
// signed: by `custos policy bundle --sequence N` and `custos policy sign
// --sequence N`, and by `opa build --signing-key` (or `opa sign`) of a
// directory holding such a .manifest. A changed claim fails verification
// (ErrSignature).
//
// The server keeps a high-water mark (the claim and digest of the last bundle
// loaded; custos derives it from the audit log's last policy/load of a
// bundle) and refuses a bundle that does not advance it: see
// [CheckSequence]. A new audit log has no mark, so its first bundle would
// load whatever it claims; an operator closes that gap with a floor, the
// lowest claim the server accepts (policy.min_sequence): see
// [CheckMinSequence].

// MaxSequence is the largest sequence claim accepted: 2^53-1, the largest
// integer every JSON implementation (OPA's and jq's included) reads exactly.
const MaxSequence = 1<<53 - 1

// HighWater is the rollback high-water mark: the sequence claim of the last
// bundle loaded (0 when none had a claim) and that bundle's digest.
type HighWater struct {
	Sequence uint64
	Digest   string // "sha256:" + hex of the bundle file
}

// CheckSequence decides whether a bundle whose claim is seq (0: none) and
// whose file digest is digest may load after hw. It returns nil when hw
// has no claim (nothing signed orders the bundles yet: a deployment
// migrating to claims), or when seq is above hw.Sequence, or equal to it
// with the same digest (the same bundle loaded again). Otherwise it returns
// a [*RollbackError]: seq lower than the mark, equal with another digest
// (two bundles signed with one sequence), or absent.
func CheckSequence(hw HighWater, seq uint64, digest string) error {
	switch {
	case hw.Sequence == 0:
		return nil
	case seq > hw.Sequence:
		return nil
	case seq == hw.Sequence && digest == hw.Digest:
		return nil
	}
	return &RollbackError{HighWater: hw, Sequence: seq, Digest: digest}
}

// CheckMinSequence decides whether a bundle whose claim is seq (0: none) and
// whose file digest is digest may load under the floor min, the lowest
// claim the operator accepts (0: no floor). It returns nil when min is 0
// or seq is at least min; otherwise a [*RollbackError] with MinSequence
// set: a claim below the floor, or none. Unlike the high-water mark, the
// floor is the operator's own setting, so no override lowers it but a
// changed setting.
func CheckMinSequence(min, seq uint64, digest string) error {
	if min == 0 || seq >= min {
		return nil
	}
	return &RollbackError{MinSequence: min, Sequence: seq, Digest: digest}
}

// manifestSequence returns the sequence claim of m: 0 when m's metadata has
// no "custos" object or that object no "sequence". A claim that is present
// but not a whole number from 1 to MaxSequence is an error (the bundle is
// refused, not treated as unclaimed).
func manifestSequence(m bundle.Manifest) (uint64, error) {
	c, ok := m.Metadata["custos"]
	if !ok {
		return 0, nil
	}
	obj, ok := c.(map[string]any)
	if !ok {
		return 0, fmt.Errorf("manifest metadata.custos is a %T, want an object", c)
	}
	v, ok := obj["sequence"]
	if !ok {
		return 0, nil
	}
	// OPA decodes numbers as json.Number; a bundle built in memory may hold
	// any integer type. Their JSON text is compared, not a float64.
	text, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("manifest metadata.custos.sequence: %w", err)
	}
	n, err := strconv.ParseUint(string(text), 10, 64)
	if err != nil || n < 1 || n > MaxSequence || strconv.FormatUint(n, 10) != string(text) {
		return 0, fmt.Errorf("manifest metadata.custos.sequence is %.40s, want a whole number from 1 to %d", text, uint64(MaxSequence))
	}
	return n, nil
}

// SetBundleSequence sets the sequence claim of b's manifest
// (metadata.custos.sequence) to seq, from 1 to MaxSequence, keeping its other
// metadata. Sign b after it ([SignBundle]): the claim is signed as part of
// the manifest.
func SetBundleSequence(b *bundle.Bundle, seq uint64) error {
	if seq < 1 || seq > MaxSequence {
		return fmt.Errorf("%w: sequence %d: want a whole number from 1 to %d", ErrBundle, seq, uint64(MaxSequence))
	}
	md := make(map[string]any, len(b.Manifest.Metadata)+1)
	for k, v := range b.Manifest.Metadata {
		md[k] = v
	}
	c := map[string]any{}
	if old, ok := md["custos"].(map[string]any); ok {
		for k, v := range old {
			c[k] = v
		}
	}
	c["sequence"] = json.Number(strconv.FormatUint(seq, 10))
	md["custos"] = c
	b.Manifest.Metadata = md
	return nil
}

// BundleSequence returns the sequence claim of b's manifest (0: none), or
// an ErrBundle error when the claim is malformed. It does not verify b's
// signature.
func BundleSequence(b *bundle.Bundle) (uint64, error) {
	n, err := manifestSequence(b.Manifest)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	return n, nil
}
