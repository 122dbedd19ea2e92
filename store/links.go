package store

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// The link index (docs/import.md, "Labels"): which live resources of the
// streaming imports link or mention each Binary, so that a label a Binary
// gains in one import reaches the resources of earlier imports that name
// it, and the labels of a resource naming a Binary reach the Binary and,
// through it, its other carriers and mentioners, to a fixed point, in the
// same all-or-nothing import (propagateLinks).

// bucketLinks lists, per live resource of a streaming import, the Binaries
// it names: keyed id of the resource (16 bytes) || keyed id of a Binary
// (16 bytes) -> empty. bucketLinkedBy is its transpose: Binary || resource.
var (
	bucketLinks    = []byte("links")
	bucketLinkedBy = []byte("linkedby")
)

// touchedSet is the set of Binaries (keyed ids) an import must settle:
// every Binary it wrote or relabelled, and every Binary named by a resource
// it wrote or whose links it changed; propagateLinks settles them. It is
// held in memory, 16 bytes a Binary (the reader holds more per Binary):
// a scratch bucket cost three random-key bbolt writes per link, about a
// quarter of the import's CPU on an input where a fifth of the resources
// named a Binary.
type touchedSet map[[16]byte]struct{}

// linkIDs are the keyed ids of the Binaries e names (Entry.Links), without
// repeats; the problem if one cannot be named.
func linkIDs(namer *Namer, e *Entry) ([][16]byte, string) {
	var out [][16]byte
	for _, id := range e.Links {
		u, err := namer.URI("Binary", id, "")
		if err != nil {
			return nil, "links: " + strings.TrimPrefix(err.Error(), "store: ")
		}
		k := [16]byte(uuid.MustParse(u.ID))
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, ""
}

// linkIndex is what a write transaction of an import uses of the link
// index: both directions and the set of Binaries to settle.
type linkIndex struct {
	fwd, rev *bolt.Bucket
	touched  touchedSet
}

func (imp *entryImport) linksOf(tx *bolt.Tx) linkIndex {
	if imp.touched == nil {
		imp.touched = touchedSet{}
	}
	return linkIndex{tx.Bucket(bucketLinks), tx.Bucket(bucketLinkedBy), imp.touched}
}

// set makes the Binaries resource r names exactly links, in both
// directions. With touch it queues each named Binary to be settled (the
// resource was written); else only those of pairs it adds.
func (x linkIndex) set(r []byte, links [][16]byte, touch bool) error {
	var old [][]byte
	c := x.fwd.Cursor()
	for k, _ := c.Seek(r); k != nil && bytes.HasPrefix(k, r); k, _ = c.Next() {
		old = append(old, bytes.Clone(k[len(r):]))
	}
	for _, b := range old {
		if slices.ContainsFunc(links, func(l [16]byte) bool { return bytes.Equal(l[:], b) }) {
			continue
		}
		if err := x.fwd.Delete(append(slices.Clone(r), b...)); err != nil {
			return fmt.Errorf("store: delete link: %w", err)
		}
		if err := x.rev.Delete(append(slices.Clone(b), r...)); err != nil {
			return fmt.Errorf("store: delete link: %w", err)
		}
	}
	for _, l := range links {
		had := slices.ContainsFunc(old, func(b []byte) bool { return bytes.Equal(l[:], b) })
		if touch || !had {
			x.touch(l[:])
		}
		if had {
			continue
		}
		if err := x.fwd.Put(append(slices.Clone(r), l[:]...), nil); err != nil {
			return fmt.Errorf("store: put link: %w", err)
		}
		if err := x.rev.Put(append(slices.Clone(l[:]), r...), nil); err != nil {
			return fmt.Errorf("store: put link: %w", err)
		}
	}
	return nil
}

// touch queues Binary b to be settled.
func (x linkIndex) touch(b []byte) { x.touched[[16]byte(b)] = struct{}{} }

// forget removes what the resource at uri names from the index: it is
// retired (deleted, moved, not carried, not mentioned by a full import).
func (x linkIndex) forget(uri string) error {
	u, err := ParseURI(uri)
	if err != nil {
		return fmt.Errorf("%w: stored uri does not parse", ErrCorrupt)
	}
	if u.Scheme != SchemeFHIR {
		return nil
	}
	id := uuid.MustParse(u.ID)
	return x.set(id[:], nil, false)
}

// linkVisits bounds how many Binaries propagateLinks settles per
// transaction (a variable so that a test can make it small).
var linkVisits = 96

// onLinkRound, if set (by a test), is called each time propagateLinks
// takes the queued Binaries, with how many it took.
var onLinkRound func(queued int)

// propagateLinks ends an import's label work (after the last batch and the
// retirements, before the opt-out relabelling): every Binary queued in
// imp.touched is settled (settle), which may queue others, until none is
// left. It works in rounds: each takes the queued Binaries once, sorted
// (key order), and settles them in transactions of at most linkVisits
// Binaries, releasing the mapping after each; a Binary queued again before
// its turn in the round is settled once then, one queued after it waits
// for the next round. (Taking the queue again after each transaction
// sorted the whole remaining set T/linkVisits times: quadratic in the
// number T of Binaries an import touched.)
func (imp *entryImport) propagateLinks(ctx context.Context) error {
	for len(imp.touched) > 0 {
		round := make([][16]byte, 0, len(imp.touched))
		for b := range imp.touched {
			round = append(round, b)
		}
		clear(imp.touched)
		slices.SortFunc(round, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
		if onLinkRound != nil {
			onLinkRound(len(round))
		}
		for len(round) > 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			queued := round[:min(len(round), linkVisits)]
			round = round[len(queued):]
			err := imp.s.update(func(tx *bolt.Tx) error {
				x := imp.linksOf(tx)
				for _, b := range queued {
					delete(imp.touched, b) // settled now, with what queued it again
					if err := imp.settle(tx, x, b[:]); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			imp.s.release()
		}
	}
	return nil
}

// member is a live item of a Binary's component: the Binary, or a live
// resource of its compartment that names it.
type member struct {
	id [16]byte
	r  Resource
}

// settle gives the live Binary b and every live resource of its
// compartment (same tenant, same patient: the URIs' segments) that links
// or mentions it the union of their sensitivity labels: each member that
// lacks one gets a new version (Relabelled) with the union, and the
// consent label as the opt-out index says; a relabelled resource's lifted
// attachments (bucketCarried) get the labels it gained, and the other
// Binaries it names are queued, so that the labels reach a fixed point
// over the whole catalog. A Binary that is not live (retired, never
// imported) settles nothing; a resource naming it from another
// compartment is not a member (the same whether the Binary is there or
// nowhere).
func (imp *entryImport) settle(tx *bolt.Tx, x linkIndex, b []byte) error {
	ids, res, vers, carried := tx.Bucket(bucketIDs), tx.Bucket(bucketResources), tx.Bucket(bucketVersions), tx.Bucket(bucketCarried)
	optout := imp.patientIndex(tx)
	live := func(id []byte) (*Resource, URI, error) {
		uri := ids.Get(id)
		if uri == nil {
			return nil, URI{}, nil
		}
		v := res.Get(uri)
		if v == nil {
			return nil, URI{}, nil
		}
		u, err := ParseURI(string(uri))
		if err != nil {
			return nil, URI{}, fmt.Errorf("%w: stored uri does not parse", ErrCorrupt)
		}
		var r Resource
		if err := decodeResource(v, &r); err != nil {
			return nil, URI{}, err
		}
		return &r, u, nil
	}
	bin, bu, err := live(b)
	if err != nil || bin == nil {
		return err
	}
	members := []member{{[16]byte(b), *bin}}
	union := slices.Clone(bin.OwnSensitivity())
	c := x.rev.Cursor()
	for k, _ := c.Seek(b); k != nil && bytes.HasPrefix(k, b); k, _ = c.Next() {
		r, ru, err := live(k[len(b):])
		if err != nil {
			return err
		}
		if r == nil || ru.Tenant != bu.Tenant || ru.Patient != bu.Patient {
			continue
		}
		members = append(members, member{[16]byte(k[len(b):]), *r})
		union = append(union, r.OwnSensitivity()...)
	}
	slices.Sort(union)
	union = slices.Compact(union)
	for i, m := range members {
		gained, err := imp.addLabels(res, vers, optout, m.r, union)
		if err != nil || !gained || i == 0 {
			if err != nil {
				return err
			}
			continue
		}
		// A resource that gained labels: its lifted attachments have its
		// labels, and its other Binaries its labels too.
		cc := carried.Cursor()
		for k, _ := cc.Seek(m.id[:]); k != nil && bytes.HasPrefix(k, m.id[:]); k, _ = cc.Next() {
			a, _, err := live(k[16:])
			if err != nil {
				return err
			}
			if a != nil {
				if _, err := imp.addLabels(res, vers, optout, *a, union); err != nil {
					return err
				}
			}
		}
		fc := x.fwd.Cursor()
		for k, _ := fc.Seek(m.id[:]); k != nil && bytes.HasPrefix(k, m.id[:]); k, _ = fc.Next() {
			if other := k[16:]; !bytes.Equal(other, b) {
				x.touch(other)
			}
		}
	}
	return nil
}

// addLabels gives the live item r the sensitivity labels of add it lacks
// on its own account (OwnSensitivity), as a new version (Relabelled), with
// its patient-wide labels as the indexes say (as writeStored does); a
// Patient that gains "vip" so enters the vip index. False if it lacks
// none.
func (imp *entryImport) addLabels(res, vers *bolt.Bucket, optout patientIndex, r Resource, add []string) (bool, error) {
	own := r.OwnSensitivity()
	missing := false
	for _, l := range add {
		if !slices.Contains(own, l) {
			missing = true
			break
		}
	}
	if !missing {
		return false, nil
	}
	old := r
	r.Labels.Sensitivity, r.PatientWide = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(own), add...)))), nil
	u, err := ParseURI(r.URI)
	if err != nil {
		return false, fmt.Errorf("%w: stored uri does not parse", ErrCorrupt)
	}
	if key, ok := vipKey(u); ok && slices.Contains(r.Labels.Sensitivity, SensitivityVIP) {
		// A Patient that gains vip from its Binary component (a photo of
		// it labelled so) is a VIP's: every label of a Patient counts.
		if err := optout.set(optout.vip, key, true, u.Tenant); err != nil {
			return false, err
		}
	}
	if err := optout.asIndexed(&r); err != nil {
		return false, err
	}
	r.Version++
	if err := putLive(res, vers, r); err != nil {
		return false, err
	}
	imp.delta.note(&old, &r)
	imp.rep.Relabelled++
	return true, nil
}

// fillLinks builds the link index of a catalog written before it (begin
// found no bucketLinks): for every live FHIR resource of a streaming
// import, of every tenant (the index is built once; the catalog's one id
// key names every tenant's resources), the Binaries its stored body names
// (bodyLinks; a lifted attachment it carries is not a Binary and is left
// out), every one of them queued to be settled, so that this import
// brings the whole catalog to the fixed point. Bodies are read with Blob
// (decrypted with the catalog's keys) outside any transaction, a page at
// a time.
func (imp *entryImport) fillLinks(ctx context.Context) error {
	namers := map[string]*Namer{imp.opts.Namer.tenant: imp.opts.Namer}
	namer := func(tenant string) (*Namer, error) {
		if n := namers[tenant]; n != nil {
			return n, nil
		}
		n, err := NewNamer(tenant, imp.opts.Namer.key, imp.opts.Namer.keyID)
		if err != nil {
			return nil, fmt.Errorf("%w: a stored resource's tenant is not valid", ErrCorrupt)
		}
		namers[tenant] = n
		return n, nil
	}
	return imp.eachStoredPage(ctx, func(page []Resource) error {
		type named struct {
			id    [16]byte
			links [][16]byte
		}
		var found []named
		for _, r := range page {
			if r.Source == "" {
				continue
			}
			u, err := ParseURI(r.URI)
			if err != nil {
				return fmt.Errorf("%w: stored uri does not parse", ErrCorrupt)
			}
			if u.Scheme != SchemeFHIR {
				continue
			}
			n, err := namer(u.Tenant)
			if err != nil {
				return err
			}
			body, err := imp.s.Blob(ctx, r.Digest)
			if err != nil {
				return err
			}
			if links := bodyLinks(body, n); len(links) > 0 {
				found = append(found, named{[16]byte(uuid.MustParse(u.ID)), links})
			}
		}
		return imp.s.update(func(tx *bolt.Tx) error {
			x, carried := imp.linksOf(tx), tx.Bucket(bucketCarried)
			for _, n := range found {
				links := slices.DeleteFunc(n.links, func(l [16]byte) bool {
					return carried.Get(append(slices.Clone(n.id[:]), l[:]...)) != nil
				})
				if err := x.set(n.id[:], links, true); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// bodyLinks are the keyed ids of the Binaries a stored FHIR body names in
// a url or reference member, anywhere in it: a custos attachment URI (a
// lifted link, which may also name a lifted attachment) or a relative
// Binary/<id>, or Binary/<id>/_history/<v> (a mention as the reader keeps
// it). An absolute URL is not read: which server it names is not known
// once stored. Not JSON: none.
func bodyLinks(body []byte, n *Namer) [][16]byte {
	if !MayNameBinary(body) && !bytes.Contains(body, []byte(SchemeAttachment+"://")) {
		return nil
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	var out [][16]byte
	add := func(s string) {
		var id string
		if u, err := ParseURI(s); err == nil {
			if u.Scheme != SchemeAttachment || u.Tenant != n.tenant {
				return
			}
			id = u.ID
		} else if rest, ok := strings.CutPrefix(s, "Binary/"); ok && validSourceID(unversioned(rest)) {
			rest = unversioned(rest)
			u, err := n.URI("Binary", rest, "")
			if err != nil {
				return
			}
			id = u.ID
		} else {
			return
		}
		if k := [16]byte(uuid.MustParse(id)); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	EachNaming(v, add)
	return out
}

// EachNaming calls f with every string a decoded FHIR JSON value v holds
// in a "url" or "reference" member, anywhere in it: the places where a
// resource can name a Binary. It is the one definition of where a link or
// mention is looked for, shared by the reader (fhirin's mentions) and the
// link index's build from stored bodies (bodyLinks), which must agree.
func EachNaming(v any, f func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range [...]string{"url", "reference"} {
			if s, ok := v[k].(string); ok {
				f(s)
			}
		}
		for _, c := range v {
			EachNaming(c, f)
		}
	case []any:
		for _, c := range v {
			EachNaming(c, f)
		}
	}
}

// unversioned is id/_history/<v> without the version part (a version-
// specific reference names the resource, as fhirin's parseLiteral reads
// it: v is anything without a slash); anything else as it is.
func unversioned(s string) string {
	if id, v, ok := strings.Cut(s, "/_history/"); ok && !strings.Contains(v, "/") {
		return id
	}
	return s
}

// validSourceID reports whether s is a FHIR id: [A-Za-z0-9.-]{1,64}.
func validSourceID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	return strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-") == ""
}

// MayNameBinary reports whether the JSON text raw may hold a string
// "Binary/..." (a url or reference naming a Binary), however it is
// escaped: false only if raw holds neither the bytes Binary/, nor an
// escaped slash (\/, which PHP's json_encode writes for every slash), nor
// a \u escape of one of the characters of "Binary/". It is the shortcut
// before a body is walked for the Binaries it names (bodyLinks,
// fhirin's mentionedBinaries): a plain bytes.Contains(raw, "Binary/")
// missed "Binary\/b1", and the resource naming b1 lost b1's labels.
func MayNameBinary(raw []byte) bool {
	if bytes.Contains(raw, []byte("Binary/")) || bytes.Contains(raw, []byte(`\/`)) {
		return true
	}
	for rest := raw; ; {
		i := bytes.Index(rest, []byte(`\u`))
		if i < 0 {
			return false
		}
		rest = rest[i+2:]
		var c [2]byte
		if len(rest) >= 4 {
			if _, err := hex.Decode(c[:], rest[:4]); err == nil && c[0] == 0 && strings.IndexByte("Binary/", c[1]) >= 0 {
				return true
			}
		}
	}
}
