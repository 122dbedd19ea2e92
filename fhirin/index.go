package fhirin

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/custos-mcp/custos/store"
)

// index is what the first pass learns: per Binary, where it is and who
// links to it; the patients who opted out and those who are VIPs. It holds
// ids and labels only.
type index struct {
	optOut   map[string]bool // source Patient ids with an active deny Consent
	vip      map[string]bool // source Patient ids whose Patient is labelled vip
	binaries map[string]*binaryInfo
	// nodes are the label components (join, settle): one node per
	// (patient, Binary id) that a resource of that patient's compartment
	// names, or where a Binary of the import is.
	nodes map[nodeKey]*node
	// settled: settle has run; comp answers from the components.
	settled bool
	// ctxTargets are the resources ("Type/id") other than Patients that a
	// Binary's securityContext names, with the ids of those Binaries.
	ctxTargets map[string][]string
	// ctxFound are the ctxTargets the import holds (ctxTarget).
	ctxFound map[string]bool
	// ctxBinaries are the Binaries whose securityContext names a Binary:
	// {the Binary, the Binary it names} (ctxBinaryChains).
	ctxBinaries [][2]string
	// dataLinks are the links of attachments with data and a url naming a
	// Binary, by Binary id: each links the Binary only if it is in the
	// import or live in the catalog in the carrier's compartment (check,
	// linkData); otherwise the data is the content and the url becomes the
	// Attachment's link, as for data alone.
	dataLinks map[string][]dataLink
}

// dataLink is one link of dataLinks: the carrier's compartment, labels and
// the place of the url.
type dataLink struct {
	patient, where, path, entry string
	carrier                     Carrier
	labels                      []string
}

// nodeKey names a Binary in a compartment: a resource of patient's
// compartment naming Binary id names this node, whether or not the Binary
// is there.
type nodeKey struct{ patient, id string }

// node is a union-find node of the label components: every resource that
// names two Binaries joins their nodes, and a component's labels are the
// union of those of its members (resources naming a node, the Binary at
// it, its live version's when kept).
type node struct {
	parent *node
	labels []string
	// elsewhere: the Binary of the import with this id is in another
	// compartment; a resource naming it here still takes its labels (as
	// before components), but the Binary takes none of this component's.
	elsewhere bool
}

func (n *node) root() *node {
	for n.parent != nil {
		if n.parent.parent != nil {
			n.parent = n.parent.parent
		}
		n = n.parent
	}
	return n
}

type binaryInfo struct {
	present    bool
	where      string // of the Binary
	entry      string // and its Bundle entry (resource.entry)
	ctxPatient string // from securityContext
	ctx        string // the securityContext as JSON ("null": none), to tell a repeat
	hasCtx     bool
	linked     bool
	patient    string // of the resources that link to it
	linkWhere  string // of the first link, and its path
	linkPath   string
	linkEntry  string
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
	return &index{optOut: map[string]bool{}, vip: map[string]bool{}, binaries: map[string]*binaryInfo{}, nodes: map[nodeKey]*node{}}
}

func (x *index) node(patient, id string) *node {
	k := nodeKey{patient, id}
	n := x.nodes[k]
	if n == nil {
		n = &node{}
		x.nodes[k] = n
	}
	return n
}

// join records, in the first pass, that a resource of patient's
// compartment with labels names the Binaries ids (links or mentions them):
// they join one component, which gets the labels.
func (x *index) join(patient string, ids []string, labels []string) {
	if len(ids) == 0 {
		return
	}
	first := x.node(patient, ids[0]).root()
	first.labels = union(first.labels, labels)
	for _, id := range ids[1:] {
		if r := x.node(patient, id).root(); r != first {
			r.parent = first
			first.labels = union(first.labels, r.labels)
			r.labels = nil
		}
	}
}

// settle ends the first pass after check: each Binary of the import
// (present or stored) adds its labels (all) to its node in its
// compartment; a node where no Binary of the import is gets those of the
// Binary live there in the catalog (stored, as mentionedLabels did), or,
// if the import holds the Binary in another compartment, that Binary's
// component's (elsewhere). Then every member of a component has the
// component's labels (comp): the fixed point of "a Binary has the labels
// of every resource linking or mentioning it, and such a resource those
// of the Binary", within the import. stored's error is returned as it is.
func (x *index) settle(stored func(id, patient string) ([]string, bool, error)) error {
	x.ctxBinaryJoin()
	for id, b := range x.binaries {
		if b.present || b.stored {
			r := x.node(b.patient, id).root()
			r.labels = union(r.labels, b.all())
		}
	}
	keys := make([]nodeKey, 0, len(x.nodes))
	for k := range x.nodes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b nodeKey) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return strings.Compare(a.patient, b.patient)
	})
	var elsewhere []nodeKey
	for _, k := range keys {
		if b := x.binaries[k.id]; b != nil && (b.present || b.stored) {
			if b.patient != k.patient {
				x.nodes[k].elsewhere = true
				elsewhere = append(elsewhere, k)
			}
			continue
		}
		if stored == nil {
			continue
		}
		labels, live, err := stored(k.id, k.patient)
		if err != nil {
			return err
		}
		if live {
			r := x.nodes[k].root()
			r.labels = union(r.labels, normalize(labels))
		}
	}
	// A resource naming a Binary of another compartment takes that
	// component's labels: until nothing changes (components may name each
	// other's Binaries).
	for changed := true; changed; {
		changed = false
		for _, k := range elsewhere {
			r, o := x.nodes[k].root(), x.node(x.binaries[k.id].patient, k.id).root()
			if u := union(r.labels, o.labels); len(u) != len(r.labels) {
				r.labels, changed = u, true
			}
		}
	}
	x.settled = true
	return nil
}

// comp are the labels of the component of Binary id in patient's
// compartment, and whether the first pass saw a resource or Binary there.
func (x *index) comp(patient, id string) ([]string, bool) {
	n := x.nodes[nodeKey{patient, id}]
	if n == nil || !x.settled {
		return nil, false
	}
	return n.root().labels, true
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

// patientWide is Item.PatientWide for a patient.
func (x *index) patientWide(patient string) []string {
	if patient != "" && x.vip[patient] {
		return []string{store.SensitivityVIP}
	}
	return nil
}

// indexResource is the first pass over one resource.
func (rd *reader) indexResource(r *resource, patient string, labels []string) error {
	x := rd.idx
	if r.typ != "Binary" {
		x.join(patient, r.mentionedBinaries(), labels)
	}
	if r.typ == "Patient" && patient != "" && slices.Contains(labels, store.SensitivityVIP) {
		x.vip[patient] = true
	}
	switch r.typ {
	case "Consent":
		if patient != "" && store.ConsentOptsOut(r.m) {
			x.optOut[patient] = true
		}
	case "Binary":
		b := x.binary(r.id)
		ctx, _ := json.Marshal(r.m["securityContext"])
		if b.present {
			// The same Binary again (one Bundle given twice, a re-sent
			// hand-off): what the index holds of it is the same, and the
			// store imports it once when its bytes are the same too
			// (Repeated) and refuses other bytes, naming both places, as
			// for any resource repeated in an input. Until 2026-12-06 any
			// second Binary of an id was refused.
			if slices.Equal(normalize(b.own), normalize(labels)) && b.ctx == string(ctx) {
				return nil
			}
			return r.errf("Binary.id", ErrConflict, "a second Binary of this id, with other labels or securityContext (the first at %s), which decide its compartment and labels: one id names one Binary", entryPlace(b.where, b.entry))
		}
		b.present, b.where, b.entry, b.own, b.ctx = true, r.where, r.entry, labels, string(ctx)
		if sc, ok := r.m["securityContext"].(map[string]any); ok {
			id, isPatient, err := r.patientRef(sc)
			if err != nil {
				return r.errf("Binary.securityContext", ErrCompartment, "%v", err)
			}
			if isPatient {
				b.ctxPatient, b.hasCtx = id, true
			} else if t, ok := r.securityContextTarget(sc); ok {
				if x.ctxTargets == nil {
					x.ctxTargets = map[string][]string{}
				}
				x.ctxTargets[t] = append(x.ctxTargets[t], r.id)
				if id, ok := strings.CutPrefix(t, "Binary/"); ok {
					x.ctxBinaries = append(x.ctxBinaries, [2]string{r.id, id})
				}
			}
		}
	default:
		return r.eachAttachment(func(att map[string]any, path string) error {
			binID, ok, err := r.binaryURL(att, path)
			if err != nil || !ok {
				return err
			}
			if _, hasData := att["data"]; hasData {
				// Decided once the input is read (linkData).
				if x.dataLinks == nil {
					x.dataLinks = map[string][]dataLink{}
				}
				x.dataLinks[binID] = append(x.dataLinks[binID], dataLink{patient, r.where, path + ".url", r.entry, Carrier{r.typ, r.id}, labels})
				return nil
			}
			b := x.binary(binID)
			if b.linked && b.patient != patient {
				return r.errf(path+".url", ErrCompartment, "links a Binary that a resource of another compartment links too (at %s)", entryPlace(b.linkWhere, b.linkEntry))
			}
			if !b.linked {
				b.linked, b.patient, b.linkWhere, b.linkPath, b.linkEntry = true, patient, r.where, path+".url", r.entry
				b.carrier = Carrier{r.typ, r.id}
			}
			b.labels = union(b.labels, labels)
			return nil
		})
	}
	return nil
}

// securityContextTarget is the "Type/id" of the resource other than a
// Patient that a Binary's securityContext names in this import: a
// relative reference (a Bundle entry's fullUrl is rewritten to one before
// this), or an absolute one on the Binary's own server. ok is false for
// anything else (a reference to another server, a conditional or logical
// one), which names nothing the import holds.
func (r *resource) securityContextTarget(sc map[string]any) (string, bool) {
	s, _ := sc["reference"].(string)
	t, ok := parseLiteral(s)
	if !ok || t.typ == "Patient" || strings.Contains(s, "://") && (r.base == "" || restBase(s) != r.base) {
		return "", false
	}
	return t.typ + "/" + t.id, true
}

// ctxTarget records, between the passes, the compartment and labels of a
// resource that a Binary's securityContext names: R4 makes that resource
// "a proxy of the security sensitivity to use when deciding and enforcing
// access control rules for the Binary". Each such Binary gets its labels
// as its own, and its compartment as a securityContext Patient gives one
// (placed there when nothing links it; refused by check when a resource of
// another compartment links it); the resource joins the Binary's label
// component there, as a resource naming the Binary would. Before, the
// reference was ignored, and a Binary whose securityContext named an
// HIV-labelled DocumentReference was imported without hiv.
func (x *index) ctxTarget(r *resource, patient string, labels []string) {
	key := r.typ + "/" + r.id
	if _, ok := x.ctxTargets[key]; !ok {
		return
	}
	if x.ctxFound == nil {
		x.ctxFound = map[string]bool{}
	}
	x.ctxFound[key] = true
	x.ctxGive(key, r.mentionedBinaries(), patient, labels)
}

// ctxKept is ctxTarget for a resource a conditional create keeps
// (resource: its kept branch): its compartment and its labels in the
// catalog (Found.Labels); what it mentions is the catalog's, not read.
func (x *index) ctxKept(key, patient string, labels []string) {
	if _, ok := x.ctxTargets[key]; !ok || x.ctxFound[key] {
		return
	}
	if x.ctxFound == nil {
		x.ctxFound = map[string]bool{}
	}
	x.ctxFound[key] = true
	x.ctxGive(key, nil, patient, labels)
}

// ctxGive gives the Binaries whose securityContext names key the
// compartment (patient) and labels of that resource, which names the
// Binaries mentioned.
func (x *index) ctxGive(key string, mentioned []string, patient string, labels []string) {
	for _, id := range x.ctxTargets[key] {
		b := x.binary(id)
		b.own = union(b.own, labels)
		if patient != "" && !b.hasCtx {
			b.ctxPatient, b.hasCtx = patient, true
		}
		x.join(patient, append(slices.Clone(mentioned), id), labels)
	}
}

// ctxStored asks place (Options.PlaceContext) about each resource a
// Binary's securityContext names that the import does not hold, in order:
// one live in the catalog gives its compartment and labels as one of the
// import does (ctxGive). Before, such a reference counted for nothing, and
// a new Binary naming an HIV-labelled DocumentReference of an earlier
// import was imported without hiv (h-review21). place's error is returned
// as it is.
func (x *index) ctxStored(place func(typ, id string) (string, []string, bool, error)) error {
	if place == nil {
		return nil
	}
	keys := make([]string, 0, len(x.ctxTargets))
	for k := range x.ctxTargets {
		if !x.ctxFound[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		typ, id, _ := strings.Cut(k, "/")
		patient, labels, live, err := place(typ, id)
		if err != nil {
			return err
		}
		if live {
			x.ctxGive(k, nil, patient, normalize(labels))
		}
	}
	return nil
}

// ctxBinaryCompartments gives, before check, a Binary whose
// securityContext names a Binary the compartment of that Binary, as
// ctxTarget gives one of another resource's: its securityContext
// Patient's (or that of its own securityContext's resource), or else that
// of the resources linking it; through chains of any length (until
// nothing changes); never tenant-level. ctxTarget gave only the named Binary's own
// meta.security and the compartment a Binary has from its own
// securityContext (none when that names a resource other than a Patient),
// so a Binary naming a Binary that an HIV-labelled DocumentReference's
// Binary named was imported without hiv (h-review21). The labels come
// with the component (ctxBinaryJoin).
func (x *index) ctxBinaryCompartments() {
	for changed := true; changed; {
		changed = false
		for _, e := range x.ctxBinaries {
			a, b := x.binaries[e[0]], x.binaries[e[1]]
			if a == nil || b == nil || a.hasCtx {
				continue
			}
			switch {
			case b.hasCtx:
				a.ctxPatient, a.hasCtx, changed = b.ctxPatient, true, true
			case b.linked && b.patient != "":
				// Not tenant-level by a securityContext: a Binary is
				// made tenant-level only by a tenant-level resource
				// linking it, as ctxTarget gives no compartment "".
				a.ctxPatient, a.hasCtx, changed = b.patient, true, true
			}
		}
	}
}

// ctxBinaryJoin, after check (every Binary's compartment known), joins a
// Binary whose securityContext names a Binary to the named Binary's node
// in its compartment, as a resource naming the Binary joins it: the
// component then has every label of the named Binary's (settle; a named
// Binary of another compartment gives its component's labels, and one not
// in the import those of its live version there, as for any node).
func (x *index) ctxBinaryJoin() {
	for _, e := range x.ctxBinaries {
		if a := x.binaries[e[0]]; a != nil {
			x.join(a.patient, []string{e[0], e[1]}, nil)
		}
	}
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
	errs, err := x.linkData(stored)
	if err != nil {
		return nil, err
	}
	x.ctxBinaryCompartments()
	ids := make([]string, 0, len(x.binaries))
	for id := range x.binaries {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		b := x.binaries[id]
		switch {
		case !b.present && stored == nil:
			errs = append(errs, atEntry(b.linkEntry, newError(b.linkWhere, b.linkPath, ErrDangling, "an attachment url to a Binary that is not in the import")))
		case !b.present:
			labels, live, err := stored(id, b.patient)
			if err != nil {
				return nil, err
			}
			if !live {
				// The same words whether the Binary exists elsewhere
				// (another patient, another tenant, retired) or nowhere.
				errs = append(errs, atEntry(b.linkEntry, newError(b.linkWhere, b.linkPath, ErrDangling, "an attachment url to a Binary that is neither in the import nor live in the catalog in the compartment of the resource linking it")))
				continue
			}
			b.stored, b.storedLabels = true, normalize(labels)
		case b.linked && b.hasCtx && b.ctxPatient != b.patient:
			errs = append(errs, atEntry(b.entry, newError(b.where, "Binary.securityContext", ErrCompartment, "names another patient than the resource that links the Binary (at %s)", entryPlace(b.linkWhere, b.linkEntry))))
		case !b.linked && !b.hasCtx:
			// Its compartment is where an earlier import's resource
			// linking it placed it, if it is live there: a Binary
			// without securityContext changed on the server comes
			// alone in the next incremental import or sync.
			if place == nil {
				errs = append(errs, atEntry(b.entry, newError(b.where, "Binary", ErrCompartment, "a Binary that no resource of the import links and whose securityContext names no Patient cannot be placed")))
				continue
			}
			patient, labels, live, err := place(id)
			if err != nil {
				return nil, err
			}
			if !live {
				// The same words whether the Binary is live elsewhere
				// (another tenant) or was retired or never imported.
				errs = append(errs, atEntry(b.entry, newError(b.where, "Binary", ErrCompartment, "a Binary that no resource of the import links, whose securityContext names no Patient and that is not live in the catalog cannot be placed")))
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

// linkData makes each of dataLinks a link of its Binary, as a url alone
// is, when the Binary is in the import or (stored) live in the catalog in
// the carrier's compartment; a link to a Binary that neither holds is
// dropped, not an error: the data is the content (R4: a url beside data
// SHALL point to the same content), and the carrier's url becomes the
// Attachment's link (linksBinary). A Binary linked from two compartments
// is an error, as for urls alone.
func (x *index) linkData(stored func(id, patient string) ([]string, bool, error)) ([]error, error) {
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(x.dataLinks)) {
		for _, l := range x.dataLinks[id] {
			if b := x.binaries[id]; b == nil || !b.present && !b.linked {
				if stored == nil {
					continue
				}
				_, live, err := stored(id, l.patient)
				if err != nil {
					return nil, err
				}
				if !live {
					continue
				}
			}
			b := x.binary(id)
			if b.linked && b.patient != l.patient {
				errs = append(errs, atEntry(l.entry, newError(l.where, l.path, ErrCompartment, "links a Binary that a resource of another compartment links too (at %s)", entryPlace(b.linkWhere, b.linkEntry))))
				continue
			}
			if !b.linked {
				b.linked, b.patient, b.linkWhere, b.linkPath, b.linkEntry, b.carrier = true, l.patient, l.where, l.path, l.entry, l.carrier
			}
			b.labels = union(b.labels, l.labels)
		}
	}
	return errs, nil
}

// linksBinary reports whether a resource of patient's compartment with an
// attachment of data and a url naming Binary id links it (linkData).
func (x *index) linksBinary(id, patient string) bool {
	b := x.binaries[id]
	return b != nil && b.linked && b.patient == patient
}

// mentionedBinaries are the ids of the Binaries the resource names in a
// url member (an Attachment) or a reference member (a Reference) of any
// object, anywhere in it (contained resources included): a valueAttachment
// of a QuestionnaireResponse, a Consent.sourceAttachment, a
// DocumentReference contained in a List, a List entry's item, a
// Provenance target; the lifted elements' urls too. Such a url or
// reference is not lifted and keeps the source's Binary/<id>, but it names
// the Binary and, usually beside a title or display, describes it, and
// the Binary may be the content of what the resource says (an answer's
// attachment): the resource joins the Binary's label component
// (index.join), so both have its labels (linkedLabels). A mention does not
// place the Binary: a Binary no lifted element links is placed by its own
// securityContext (or Options.PlaceBinary). A url or reference is read as
// binaryURL reads a url (Binary/<id>, or an absolute URL on the resource's
// own server), without its errors; a Bundle fullUrl in either was made
// Binary/<id> by rewriteRefs.
func (r *resource) mentionedBinaries() []string {
	if !r.modified && !store.MayNameBinary(r.raw) {
		return nil // r.m is r.raw, which names no Binary (a Bundle's rewritten references are only in r.m)
	}
	var out []string
	store.EachNaming(r.m, func(u string) {
		if id, ok := r.binaryID(u); ok && !slices.Contains(out, id) {
			out = append(out, id)
		}
	})
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
			labels, _ := x.comp(b.patient, id)
			out = append(out, Item{Type: "Binary", ID: id, Patient: b.patient, Sensitivity: union(b.all(), labels),
				Consent: x.consent(b.patient), PatientWide: x.patientWide(b.patient), Carrier: b.carrier, Where: b.linkWhere, Stored: true})
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

// mayNameBinary reports whether a resource's raw JSON (outside a Bundle)
// may name a Binary in a url or reference (mentionedBinaries): as
// Binary/<id>, relative or absolute (bundle.mayNameBinary adds a Binary
// entry's fullUrl). The first pass reads a resource of a type that cannot
// link (indexedTypes) only then.
func mayNameBinary(raw []byte) bool {
	return store.MayNameBinary(raw)
}

// atEntry sets e's Entry (the Bundle entry of a place the index kept).
func atEntry(entry string, e *Error) *Error {
	e.Entry = entry
	return e
}

// entryPlace is where, with the Bundle entry when where's line does not
// name it alone ("b.json:1, Bundle.entry[3]"), for a message naming
// another place of the input.
func entryPlace(where, entry string) string {
	if entry == "" {
		return where
	}
	return where + ", " + entry
}
