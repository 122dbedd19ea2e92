package policy

import "slices"

// Reasons that [Enforce] adds to an allow it turns into a denial.
const (
	// ReasonTenantBoundary: the resource is of another tenant than the
	// caller's (or the caller has no tenant).
	ReasonTenantBoundary = "tenant_boundary"
	// ReasonBinaryNotMinimizable: the decision demands minimization of a
	// binary resource, which is released whole or not at all.
	ReasonBinaryNotMinimizable = "binary_cannot_be_minimized"
)

// Enforce applies the server's own rules, which hold whatever policy is
// loaded, to a decision about one resource, and returns the decision the
// server enforces. It only ever turns an allow into a denial:
//
//   - the tenant boundary: a resource is released only to a caller of its
//     tenant (callerTenant is never ""), else deny with
//     [ReasonTenantBoundary];
//   - binaries: an allow that demands minimization of a binary resource
//     (binary reports the resource's media type is not minimizable) is a
//     denial with [ReasonBinaryNotMinimizable].
//
// The server applies it to every list, read and completion decision, and
// policy impact to every replayed decision, so that a candidate is judged
// as the server would enforce it. Pure: d's slices are not written.
func Enforce(d Decision, callerTenant, resourceTenant string, binary bool) Decision {
	if !d.Allow {
		return d
	}
	if callerTenant == "" || resourceTenant != callerTenant {
		d.Allow, d.Obligations = false, nil
		d.Reasons = append(slices.Clip(d.Reasons), ReasonTenantBoundary)
		return d
	}
	if len(d.Obligations) > 0 && binary {
		d.Allow = false
		d.Reasons = append(slices.Clip(d.Reasons), ReasonBinaryNotMinimizable)
	}
	return d
}
