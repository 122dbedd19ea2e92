package minimize

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Obligation is one minimization operation demanded by a policy decision.
//
// It is the obligation vocabulary of custos: the policy emits it, the audit
// log records its [Obligation.String] form, and [Apply] enforces it.
type Obligation struct {
	// Op is one of OpRemove, OpMask, OpGeneralize, OpScrub, OpAllow,
	// OpDeidentify, OpPseudonymize.
	Op string `json:"op"`
	// Path is an RFC 6901 JSON pointer into the payload. A segment "*"
	// selects every element of an array. "" means the whole document; it is
	// the only path valid for text payloads (scrub) and is invalid for remove.
	// For allow it selects the value(s) the allow-list is applied to,
	// usually "" (the whole resource).
	Path string `json:"path"`
	// Fn selects the op-specific function:
	//   remove:     "" only.
	//   mask:       "" ("***") or "last4" ("***" + last four characters).
	//   generalize: "year", "zip3", "age90" or "birthyear90" (required).
	//   scrub:      "" (all classes) or a comma list of phone,email,ssn,mrn,date,url,id.
	//   allow:      a comma list of one or more JSON pointers, relative to
	//               Path, naming the elements kept (required), e.g.
	//               "/gender,/birthDate,/address/*/state".
	//   deidentify: "safeharbor" (required).
	//   pseudonymize: "keyedid" (required).
	Fn string `json:"fn,omitempty"`
}

// Obligation ops.
const (
	OpRemove     = "remove"     // delete the value (HL7 REDACT)
	OpMask       = "mask"       // replace the value with asterisks (HL7 MASK)
	OpGeneralize = "generalize" // coarsen the value (HL7 DEID)
	OpScrub      = "scrub"      // replace identifier patterns in text (HL7 DEID)
	OpAllow      = "allow"      // keep only the listed elements (HL7 MINEC)
	// OpDeidentify de-identifies a whole FHIR R4 resource by walking every
	// element by its data type (HL7 DEID); see deidentify.go.
	OpDeidentify = "deidentify"
	// OpPseudonymize rewrites a whole FHIR R4 resource's id and literal
	// references to the ids the caller names those resources by
	// ([Options.KeyID]; HL7 PSEUD); see pseudonymize.go.
	OpPseudonymize = "pseudonymize"
)

// Pseudonymize functions.
const (
	// PseudonymizeKeyedID names resources by the keyed ids of their custos
	// URIs (docs/policy.md, "billing, source ids").
	PseudonymizeKeyedID = "keyedid"
)

// Deidentify functions.
const (
	// DeidentifySafeHarbor is HIPAA Safe Harbor (45 CFR 164.514(b)(2)) for
	// any FHIR R4 resource, valid FHIR R4 out (docs/policy.md, "Research
	// view").
	DeidentifySafeHarbor = "safeharbor"
)

// HL7 v3 ObligationPolicy codes (code system [HL7CodeSystem]) that the ops
// implement; see [Obligation.HL7Code].
const (
	// HL7CodeSystem is the FHIR URI of the HL7 v3 ActCode code system, of
	// which ObligationPolicy (OID 2.16.840.1.113883.1.11.20445) is a part.
	HL7CodeSystem = "http://terminology.hl7.org/CodeSystem/v3-ActCode"

	HL7Redact = "REDACT" // remove information the user is not authorized to see
	HL7Mask   = "MASK"   // render information unreadable
	HL7DeID   = "DEID"   // strip data that would identify the information subject
	HL7MinEC  = "MINEC"  // limit disclosure to the minimum necessary for the purpose of use
	HL7Pseud  = "PSEUD"  // create pseudonymized information
)

// Mask functions.
const (
	MaskFull  = ""      // "***"
	MaskLast4 = "last4" // "***" + last four characters of a string of five or more
)

// Generalize functions.
const (
	GeneralizeYear        = "year"        // FHIR date/dateTime/instant -> "YYYY"
	GeneralizeZIP3        = "zip3"        // US ZIP -> first three digits, "000" if restricted
	GeneralizeAge90       = "age90"       // age > 89 -> "90+"
	GeneralizeBirthYear90 = "birthyear90" // birth date -> "YYYY", "90+" if age > 89 at Options.Now
)

// Scrub identifier classes, usable in a comma-separated scrub Fn.
const (
	ScrubPhone = "phone"
	ScrubEmail = "email"
	ScrubSSN   = "ssn"
	ScrubMRN   = "mrn"
	ScrubDate  = "date"
)

// Options carries the inputs of minimization that are not in the payload.
//
// The zero value is valid for every obligation except generalize:birthyear90
// and deidentify, which need Now and fail with ErrNoReferenceTime without it.
type Options struct {
	// Now is the reference instant for age computations. The caller passes
	// it so that minimization stays a pure function. Its UTC date is used.
	Now time.Time
	// Alias, if not nil, is the name under which the caller knows a patient
	// (its research alias): the deidentify obligation rewrites a reference
	// "Patient/<id>" to "Patient/<Alias(id)>". It must be a pure function
	// returning a FHIR id; a result that is not one drops the reference.
	// Nil: deidentify drops every reference to a patient. Other obligations
	// ignore it.
	Alias func(id string) string
	// Subject is the id of the patient the resource is about (its
	// compartment's, as references name it; "" when unknown). deidentify
	// aliases references to the resource's own patient only — this one,
	// the Patient its subject (patient, beneficiary) element names, and a
	// Patient resource itself: a reference to any other patient (a spouse
	// as a Coverage's subscriber, another record in Patient.link) would let
	// a study join a relative's records to this patient's, and is dropped.
	// Other obligations ignore it.
	Subject string
	// KeyID is the name under which the caller names the resource typ/id
	// (typ an R4 resourceType, id the source's id): the id its custos URI
	// carries, a keyed id (store.ResourceID). ok is false for a resource
	// it cannot name so. The pseudonymize
	// obligation rewrites a resource's id and every literal reference
	// "Type/id" with it; it must be a pure function returning a FHIR id (a
	// result that is not one counts as false). pseudonymize fails with
	// ErrNoKeyer without it; other obligations ignore it.
	KeyID func(typ, id string) (keyed string, ok bool)
}

// String returns the stable compact form used in the audit log:
// op ":" path, followed by ":" fn when fn is not empty, e.g. "remove:/name",
// "generalize:/birthDate:birthyear90", "scrub:".
func (o Obligation) String() string {
	if o.Fn == "" {
		return o.Op + ":" + o.Path
	}
	return o.Op + ":" + o.Path + ":" + o.Fn
}

// Validate reports whether o is a well-formed obligation. It returns an error
// wrapping ErrUnknownOp, ErrBadPath or ErrBadFn; the message names the
// obligation.
func (o Obligation) Validate() error {
	switch o.Op {
	case OpRemove, OpMask, OpGeneralize, OpScrub, OpAllow, OpDeidentify, OpPseudonymize:
	default:
		return o.errorf(ErrUnknownOp)
	}
	if _, err := parsePointer(o.Path); err != nil {
		return o.errorf(ErrBadPath)
	}
	if o.Op == OpRemove && o.Path == "" {
		return o.errorf(ErrBadPath)
	}
	switch o.Op {
	case OpRemove:
		if o.Fn != "" {
			return o.errorf(ErrBadFn)
		}
	case OpMask:
		if o.Fn != MaskFull && o.Fn != MaskLast4 {
			return o.errorf(ErrBadFn)
		}
	case OpGeneralize:
		switch o.Fn {
		case GeneralizeYear, GeneralizeZIP3, GeneralizeAge90, GeneralizeBirthYear90:
		default:
			return o.errorf(ErrBadFn)
		}
	case OpScrub:
		if _, err := parseScrubFn(o.Fn); err != nil {
			return o.errorf(ErrBadFn)
		}
	case OpAllow:
		if !validAllowFn(o.Fn) {
			return o.errorf(ErrBadFn)
		}
	case OpDeidentify:
		if o.Path != "" {
			return o.errorf(ErrBadPath)
		}
		if o.Fn != DeidentifySafeHarbor {
			return o.errorf(ErrBadFn)
		}
	case OpPseudonymize:
		if o.Path != "" {
			return o.errorf(ErrBadPath)
		}
		if o.Fn != PseudonymizeKeyedID {
			return o.errorf(ErrBadFn)
		}
	}
	return nil
}

// HL7Code returns the HL7 v3 ObligationPolicy code (code system
// [HL7CodeSystem]) that o implements:
//
//	remove     -> REDACT  (redact)
//	mask       -> MASK    (mask)
//	generalize -> DEID    (deidentify)
//	scrub      -> DEID    (deidentify)
//	deidentify -> DEID    (deidentify)
//	allow      -> MINEC   (minimum necessary)
//	pseudonymize -> PSEUD (pseudonymize)
//
// It returns "" for an op outside the vocabulary (such an obligation does not
// validate). The code depends only on Op.
func (o Obligation) HL7Code() string {
	switch o.Op {
	case OpRemove:
		return HL7Redact
	case OpMask:
		return HL7Mask
	case OpGeneralize, OpScrub, OpDeidentify:
		return HL7DeID
	case OpAllow:
		return HL7MinEC
	case OpPseudonymize:
		return HL7Pseud
	}
	return ""
}

// errorf wraps sentinel with the obligation's (policy-authored, never
// payload-derived) compact form, quoted so it cannot forge log lines.
func (o Obligation) errorf(sentinel error) error {
	return fmt.Errorf("%w: %q", sentinel, o.String())
}

// ValidateAll validates every obligation and reports every problem found,
// joined with errors.Join and prefixed with the obligation's index. It returns
// nil when all are valid (including for an empty list). errors.Is works on the
// result for each sentinel present.
func ValidateAll(obs []Obligation) error {
	var errs []error
	for i, o := range obs {
		if err := o.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("obligation %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// parsePointer splits an RFC 6901 JSON pointer into unescaped reference
// tokens. "" is the whole document (no tokens). Any other pointer must start
// with "/", and "~" must be followed by "0" (for "~") or "1" (for "/").
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, ErrBadPath
	}
	raw := strings.Split(p[1:], "/")
	segs := make([]string, len(raw))
	for i, s := range raw {
		if !strings.Contains(s, "~") {
			segs[i] = s
			continue
		}
		var b strings.Builder
		for j := 0; j < len(s); j++ {
			if s[j] != '~' {
				b.WriteByte(s[j])
				continue
			}
			if j+1 >= len(s) {
				return nil, ErrBadPath
			}
			switch s[j+1] {
			case '0':
				b.WriteByte('~')
			case '1':
				b.WriteByte('/')
			default:
				return nil, ErrBadPath
			}
			j++
		}
		segs[i] = b.String()
	}
	return segs, nil
}

// arrayIndex parses an RFC 6901 array index: "0" or a decimal number without
// leading zeros. It reports false for anything else (including "-", which
// names the nonexistent element after the last one).
func arrayIndex(seg string, n int) (int, bool) {
	if seg == "" || len(seg) > 1 && seg[0] == '0' || len(seg) > 18 {
		return 0, false
	}
	i := 0
	for _, c := range []byte(seg) {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int(c-'0')
	}
	if i >= n {
		return 0, false
	}
	return i, true
}
