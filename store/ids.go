package store

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"strings"

	"github.com/google/uuid"
)

// idNamespace is the fixed namespace UUID of keyed resource ids. Changing it
// renames every imported resource.
var idNamespace = uuid.MustParse("6d1f0c4e-2b7a-4c35-9e58-3f0a1d2c4b6e")

// MinIDKeySize is the shortest resource id key NewNamer accepts, in bytes.
const MinIDKeySize = 16

// ResourceID is the opaque id of the source resource (tenant, typ, sourceID)
// under the resource id key: a UUID of version 8,
//
//	uuid.NewHash(HMAC-SHA256(key, ·), idNamespace, tenant 0x00 typ 0x00 sourceID, 8)
//	= HMAC-SHA256(key, idNamespace || tenant || 0x00 || typ || 0x00 || sourceID)[:16]
//	  with the version nibble set to 8 and the RFC 9562 variant bits,
//
// in canonical lowercase form. typ is the FHIR resourceType spelling
// ("Patient", "Observation") or "Attachment". The patient segment of a URI
// is ResourceID(key, tenant, "Patient", source patient id). Without the key
// the id says nothing about the source id; with it, the same source
// resource always gets the same id, so a re-import updates the same URI.
// Pure: no I/O.
func ResourceID(key []byte, tenant, typ, sourceID string) string {
	data := make([]byte, 0, len(tenant)+len(typ)+len(sourceID)+2)
	data = append(data, tenant...)
	data = append(data, 0)
	data = append(data, typ...)
	data = append(data, 0)
	data = append(data, sourceID...)
	return uuid.NewHash(hmac.New(sha256.New, key), idNamespace, data, 8).String()
}

// HasKeyedIDForm reports whether s has the form of every ResourceID: a
// canonical UUID of version 8 with the RFC 9562 variant. A patient segment
// without that form was not made by a streaming import, so it names the
// patient itself (labels.patient); one with it may or may not be keyed.
// Pure: no I/O.
func HasKeyedIDForm(s string) bool {
	return IsCanonicalUUID(s) && s[14] == '8' && strings.IndexByte("89ab", s[19]) >= 0
}

// TypeAttachmentSource is the Entry.Type of an attachment lifted out of the
// resource that carried it; a Binary (Entry.Type "Binary") is an attachment
// too.
const TypeAttachmentSource = "Attachment"

// Namer maps source resources of one tenant to their custos URIs under the
// resource id key. It is safe for concurrent use; the key never leaves it.
type Namer struct {
	tenant string
	key    []byte
	keyID  string
}

// NewNamer returns the Namer of tenant under the resource id key (bytes and
// the id of its version, e.g. "secret/custos/id-key@1", recorded in the
// catalog; see ErrIDKeyChanged).
func NewNamer(tenant string, key []byte, keyID string) (*Namer, error) {
	switch {
	case !validTenant(tenant):
		return nil, errors.New("store: tenant is not valid (want [a-z0-9][a-z0-9-]{0,62})")
	case len(key) < MinIDKeySize:
		return nil, errors.New("store: resource id key is too short")
	case keyID == "":
		return nil, errors.New("store: resource id key has no id")
	}
	return &Namer{tenant: tenant, key: append([]byte(nil), key...), keyID: keyID}, nil
}

// Tenant returns the tenant n names resources of.
func (n *Namer) Tenant() string { return n.tenant }

// URI returns the custos URI of the source resource typ/id of source patient
// patient ("" for tenant-level reference data):
//
//	typ "Attachment" or "Binary": attachment://{tenant}[/patients/{P}]/attachments/{ResourceID(typ, id)}
//	typ "Patient":                fhir://{tenant}/patients/{P}/patient/{P}, P = ResourceID("Patient", id)
//	any other R4 type:            fhir://{tenant}[/patients/{P}]/{lowercase typ}/{ResourceID(typ, id)}
//
// with P = ResourceID("Patient", patient). A Patient's patient is its own id
// (patient must be "" or id). Errors name what is wrong, never the ids.
func (n *Namer) URI(typ, id, patient string) (URI, error) {
	if id == "" {
		return URI{}, errors.New("store: resource has no id")
	}
	u := URI{Tenant: n.tenant}
	switch typ {
	case TypeAttachmentSource, "Binary":
		u.Scheme, u.Type = SchemeAttachment, TypeAttachment
	default:
		lower := strings.ToLower(typ)
		if fhirTypes[lower] != typ || typ == "" {
			return URI{}, errors.New("store: not a FHIR R4 resource type")
		}
		u.Scheme, u.Type = SchemeFHIR, lower
		if typ == "Patient" {
			if patient != "" && patient != id {
				return URI{}, errors.New("store: a Patient's patient must be the Patient itself")
			}
			patient = id
		}
	}
	if patient != "" {
		u.Patient = ResourceID(n.key, n.tenant, "Patient", patient)
	}
	u.ID = ResourceID(n.key, n.tenant, typ, id)
	return u, nil
}

// Link returns the URI string of URI(typ, id, patient), or "" if it has
// none. It is the callback that lets a reader point a link (an attachment
// lifted out of a resource) at its custos URI without holding the key.
func (n *Namer) Link(typ, id, patient string) string {
	u, err := n.URI(typ, id, patient)
	if err != nil {
		return ""
	}
	return u.String()
}

// Referencer names source resources by the keyed ids their URIs carry
// (ResourceID), for a reader of a catalog a streaming import named: what
// the serve path needs to rename a resource's id and its references in a
// view (minimize's pseudonymize obligation, minimize.Options.KeyID)
// without the source's ids, which may be national numbers. It names a
// reference whether or not the catalog holds its target, so that a view
// never tells a resource the caller may not read (or that was retired)
// from one that does not exist: a keyed id names nothing without the
// key. It is safe for concurrent use; the key never leaves it. Pure: no
// I/O.
type Referencer struct {
	key []byte
}

// NewReferencer returns the Referencer under the resource id key (the one
// the catalog's streaming imports named under).
func NewReferencer(key []byte) (*Referencer, error) {
	if len(key) < MinIDKeySize {
		return nil, errors.New("store: resource id key is too short")
	}
	return &Referencer{key: append([]byte(nil), key...)}, nil
}

// KeyedID returns ResourceID(key, tenant, typ, sourceID): the id of the
// URI that a streaming import gives (or would give) the source resource
// typ/sourceID of tenant, typ an R4 resourceType ("Binary" included, whose
// URI is an attachment's); ok is false for another type, an invalid tenant
// or an empty id.
func (r *Referencer) KeyedID(tenant, typ, sourceID string) (string, bool) {
	want := strings.ToLower(typ)
	if typ != "Binary" && (typ == "" || fhirTypes[want] != typ) || !validTenant(tenant) || sourceID == "" {
		return "", false
	}
	return ResourceID(r.key, tenant, typ, sourceID), true
}
