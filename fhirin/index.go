package fhirin

import (
	"bytes"
	"slices"
	"strings"

	"github.com/custos-mcp/custos/store"
)

// index is what the first pass learns: per Binary, where it is and who
// links to it; the patients who opted out. It holds ids and labels only.
type index struct {
	optOut   map[string]bool // source Patient ids with an active deny Consent
	binaries map[string]*binaryInfo
}

type binaryInfo struct {
	present    bool
	where      string // of the Binary
	ctxPatient string // from securityContext
	hasCtx     bool
	linked     bool
	patient    string // of the resources that link to it
	linkWhere  string // of the first link, and its path
	linkPath   string
	carrier    Carrier
	own        []string // the Binary's own labels
	labels     []string // of every linking resource
	// stored: the Binary is not in the import but live in the catalog in
	// the linking resources' compartment (Options.StoredBinary).
	stored bool
	// storedLabels are the labels of its live version in the catalog, for
	// a stored Binary and for one in the import that nothing here links or
	// whose other linking resources may be elsewhere (not Complete).
	storedLabels []string
}

// all are a Binary's labels: its own, those of every resource that links
// it, and those its live version in the catalog has when nothing in the
// import can renew them (storedLabels).
func (b *binaryInfo) all() []string { return union(union(b.own, b.labels), b.storedLabels) }

func newIndex() *index {
	return &index{optOut: map[string]bool{}, binaries: map[string]*binaryInfo{}}
}

func (x *index) binary(id string) *binaryInfo {
	b := x.binaries[id]
	if b == nil {
		b = &binaryInfo{}
		x.binaries[id] = b
	}
	return b
}

// consent is Item.Consent for a patient.
func (x *index) consent(patient string) []string {
	if patient != "" && x.optOut[patient] {
		return []string{"opt-out"}
	}
	return nil
}

// indexResource is the first pass over one resource.
func (rd *reader) indexResource(r *resource, patient string, labels []string) error {
	x := rd.idx
	switch r.typ {
	case "Consent":
		if patient != "" && store.ConsentOptsOut(r.m) {
			x.optOut[patient] = true
		}
	case "Binary":
		b := x.binary(r.id)
		if b.present {
			return r.errf("Binary.id", ErrID, "a second Binary with the same id (the first at %s)", b.where)
		}
		b.present, b.where, b.own = true, r.where, labels
		if sc, ok := r.m["securityContext"].(map[string]any); ok {
			id, isPatient, err := r.patientRef(sc)
			if err != nil {
				return r.errf("Binary.securityContext", ErrCompartment, "%v", err)
			}
			if isPatient {
				b.ctxPatient, b.hasCtx = id, true
			}
		}
	default:
		return r.eachAttachment(func(att map[string]any, path string) error {
			if _, hasData := att["data"]; hasData {
				return nil
			}
			binID, ok, err := r.binaryURL(att, path)
			if err != nil || !ok {
				return err
			}
			b := x.binary(binID)
			if b.linked && b.patient != patient {
				return r.errf(path+".url", ErrCompartment, "links a Binary that a resource of another compartment links too (at %s)", b.linkWhere)
			}
			if !b.linked {
				b.linked, b.patient, b.linkWhere, b.linkPath = true, patient, r.where, path+".url"
				b.carrier = Carrier{r.typ, r.id}
			}
			b.labels = union(b.labels, labels)
			return nil
		})
	}
	return nil
}

// check ends the first pass: every linked Binary is present (or, with
// stored, live in the catalog in the linking compartment), and every
// Binary has exactly one patient (or is linked from tenant-level data). A
// Binary present that nothing in the import links and whose
// securityContext names no Patient is placed, with place, where it is live
// in the catalog (Options.PlaceBinary). A Binary present keeps the labels
// stored (or place) reports for it when nothing in the import links it or
// the input is not complete (Options.Complete). It returns every problem,
// in Binary id order, or stored's or place's error.
func (x *index) check(stored func(id, patient string) ([]string, bool, error), place func(id string) (string, []string, bool, error), complete bool) ([]error, error) {
	ids := make([]string, 0, len(x.binaries))
	for id := range x.binaries {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var errs []error
	for _, id := range ids {
		b := x.binaries[id]
		switch {
		case !b.present && stored == nil:
			errs = append(errs, newError(b.linkWhere, b.linkPath, ErrDangling, "an attachment url to a Binary that is not in the import"))
		case !b.present:
			labels, live, err := stored(id, b.patient)
			if err != nil {
				return nil, err
			}
			if !live {
				// The same words whether the Binary exists elsewhere
				// (another patient, another tenant, retired) or nowhere.
				errs = append(errs, newError(b.linkWhere, b.linkPath, ErrDangling, "an attachment url to a Binary that is neither in the import nor live in the catalog in the compartment of the resource linking it"))
				continue
			}
			b.stored, b.storedLabels = true, normalize(labels)
		case b.linked && b.hasCtx && b.ctxPatient != b.patient:
			errs = append(errs, newError(b.where, "Binary.securityContext", ErrCompartment, "names another patient than the resource that links the Binary (at %s)", b.linkWhere))
		case !b.linked && !b.hasCtx:
			// Its compartment is where an earlier import's resource
			// linking it placed it, if it is live there: a Binary
			// without securityContext changed on the server comes
			// alone in the next incremental import or sync.
			if place == nil {
				errs = append(errs, newError(b.where, "Binary", ErrCompartment, "a Binary that no resource of the import links and whose securityContext names no Patient cannot be placed"))
				continue
			}
			patient, labels, live, err := place(id)
			if err != nil {
				return nil, err
			}
			if !live {
				// The same words whether the Binary is live elsewhere
				// (another tenant) or was retired or never imported.
				errs = append(errs, newError(b.where, "Binary", ErrCompartment, "a Binary that no resource of the import links, whose securityContext names no Patient and that is not live in the catalog cannot be placed"))
				continue
			}
			b.patient, b.storedLabels = patient, normalize(labels)
		case !b.linked || !complete:
			if !b.linked {
				b.patient = b.ctxPatient
			}
			if stored == nil {
				continue
			}
			// The labels the resources linking it gave it in earlier
			// imports: a resource that links it and is not here (none
			// is, or the input is not complete) cannot give them again,
			// and losing one would open the Binary to callers kept from
			// it.
			labels, live, err := stored(id, b.patient)
			if err != nil {
				return nil, err
			}
			if live {
				b.storedLabels = normalize(labels)
			}
		}
	}
	return errs, nil
}

// mentionedBinaries are the ids of the Binaries the resource names in a
// url member (an Attachment) or a reference member (a Reference) of any
// object, anywhere in it (contained resources included): a valueAttachment
// of a QuestionnaireResponse, a Consent.sourceAttachment, a
// DocumentReference contained in a List, a List entry's item, a
// Provenance target. Such a url or reference is not lifted and keeps the
// source's Binary/<id>, but it names the Binary and, usually beside a
// title or display, describes it, so the resource takes
// the labels of a Binary the import holds or links, or else of the one
// Options.StoredBinary reports live in its compartment (linkedLabels,
// mentionedLabels). The
// Binary does not take the resource's in turn: the first pass reads only
// the types that can link (indexedTypes), and a Binary no lifted element
// links is placed by its own securityContext (or Options.PlaceBinary) and
// labelled by its own meta.security. A url or reference is read as binaryURL reads a url
// (Binary/<id>, or an absolute URL on the resource's own server), without
// its errors; a Bundle fullUrl in a url is not resolved (a reference's
// is: rewriteRefs made it Binary/<id>).
func (r *resource) mentionedBinaries() []string {
	if !r.modified && !bytes.Contains(r.raw, []byte("Binary/")) {
		return nil // r.m is r.raw, which names no Binary (a Bundle's rewritten references are only in r.m)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range [...]string{"url", "reference"} {
				if u, ok := v[k].(string); ok {
					if id, ok := r.binaryID(u); ok && !slices.Contains(out, id) {
						out = append(out, id)
					}
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(r.m)
	return out
}

// binaryID is the id of the Binary u names (see binaryURL), if any.
func (r *resource) binaryID(u string) (string, bool) {
	if strings.Contains(u, "://") && (r.base == "" || restBase(u) != r.base) {
		return "", false
	}
	t, ok := parseLiteral(u)
	if !ok || t.typ != "Binary" {
		return "", false
	}
	return t.id, true
}

// normalize is labels sorted and without duplicates.
func normalize(labels []string) []string {
	out := slices.Clone(labels)
	slices.Sort(out)
	return slices.Compact(out)
}

// storedItems are the Items of the Binaries the import links but does not
// hold (stored), in id order: each with every label it must have.
func (x *index) storedItems() []Item {
	var out []Item
	for id, b := range x.binaries {
		if b.stored {
			out = append(out, Item{Type: "Binary", ID: id, Patient: b.patient, Sensitivity: b.all(),
				Consent: x.consent(b.patient), Carrier: b.carrier, Where: b.linkWhere, Stored: true})
		}
	}
	slices.SortFunc(out, func(a, b Item) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// attachmentPaths are the Attachment elements lifted out of their carrier.
var attachmentPaths = map[string]string{
	"DocumentReference": "content.attachment",
	"DiagnosticReport":  "presentedForm",
	"Media":             "content",
}

// eachAttachment calls fn for every liftable Attachment of the resource.
func (r *resource) eachAttachment(fn func(att map[string]any, path string) error) error {
	p, ok := attachmentPaths[r.typ]
	if !ok {
		return nil
	}
	return r.eachAt(p, fn)
}

// binaryURL reads an attachment url that names a Binary: "Binary/id", an
// absolute URL ending so on the server the resource came from (r.base), or
// (rewritten before) a Bundle entry's fullUrl. A url to anything else (an
// outside document, a Binary on another server) is left alone: another
// server's Binary/b1 is not this import's Binary b1.
func (r *resource) binaryURL(att map[string]any, path string) (string, bool, error) {
	u, _ := att["url"].(string)
	if u == "" {
		return "", false, nil
	}
	if strings.Contains(u, "://") && (r.base == "" || restBase(u) != r.base) {
		return "", false, nil
	}
	t, ok := parseLiteral(u)
	if !ok {
		if strings.HasPrefix(u, "urn:uuid:") {
			return "", false, r.errf(path+".url", ErrDangling, "a urn:uuid url to no entry of the Bundle")
		}
		return "", false, nil
	}
	if t.typ != "Binary" {
		return "", false, r.errf(path+".url", ErrValue, "an attachment url names a %s, not a Binary", t.typ)
	}
	return t.id, true, nil
}
