package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// A StructureDefinition's snapshot, as this package's tests generate it
// for the complex extensions of docs/fhir: the StructureDefinition's own
// differential laid over R4's Extension (its snapshot, from HL7's
// profiles-types.json). Tools that validate against a profile without
// generating snapshots themselves (Medplum) need it; HL7's validator can
// generate it, and would arrive at the same elements.
//
// The differential must be that of a complex extension: the root, the
// slicing of Extension.extension, then for each sub-extension its slice
// (Extension.extension:NAME) and the slice's own extension, url and
// value[x]; Extension.url; Extension.value[x]. The snapshot lists, in that
// order, every element of R4's Extension (and of each slice) with the
// differential's constraints applied: an element takes the base element's
// definition (less the base's own extensions, which describe the base, and
// a slice less the base's slicing) and then every property the
// differential sets.

// elementOrder is the order of ElementDefinition's properties in R4 (a
// [x] property as its prefix).
var elementOrder = []string{"id", "extension", "modifierExtension", "path", "representation", "sliceName",
	"sliceIsConstraining", "label", "code", "slicing", "short", "definition", "comment", "requirements", "alias",
	"min", "max", "base", "contentReference", "type", "defaultValue", "meaningWhenMissing", "orderMeaning", "fixed",
	"pattern", "example", "minValue", "maxValue", "maxLength", "condition", "constraint", "mustSupport", "isModifier",
	"isModifierReason", "isSummary", "binding", "mapping"}

type element = map[string]json.RawMessage

// snapshotFile returns the StructureDefinition file sd with its snapshot
// generated from its differential over base (R4's Extension
// StructureDefinition), members in the file's order (the snapshot before
// the differential), elements in R4's property order, indented by two
// spaces.
func snapshotFile(sd, base []byte) ([]byte, error) {
	top, err := orderedObject(sd)
	if err != nil {
		return nil, err
	}
	var diff, baseSnap struct {
		Element []element `json:"element"`
	}
	var b struct {
		Snapshot *struct {
			Element []element `json:"element"`
		} `json:"snapshot"`
	}
	if err := json.Unmarshal(base, &b); err != nil || b.Snapshot == nil {
		return nil, fmt.Errorf("the base has no snapshot (%v)", err)
	}
	baseSnap.Element = b.Snapshot.Element
	i := slices.IndexFunc(top, func(m member) bool { return m.key == "differential" })
	if i < 0 {
		return nil, fmt.Errorf("no differential")
	}
	if err := json.Unmarshal(top[i].value, &diff); err != nil {
		return nil, fmt.Errorf("differential: %v", err)
	}
	snap, err := extensionSnapshot(baseSnap.Element, diff.Element)
	if err != nil {
		return nil, err
	}
	encode := func(elems []element) (json.RawMessage, error) {
		var out bytes.Buffer
		out.WriteString(`{"element":[`)
		for i, e := range elems {
			if i > 0 {
				out.WriteByte(',')
			}
			b, err := encodeElement(e)
			if err != nil {
				return nil, err
			}
			out.Write(b)
		}
		out.WriteString("]}")
		return out.Bytes(), nil
	}
	if top[i].value, err = encode(diff.Element); err != nil {
		return nil, err
	}
	s, err := encode(snap)
	if err != nil {
		return nil, err
	}
	if j := slices.IndexFunc(top, func(m member) bool { return m.key == "snapshot" }); j >= 0 {
		top[j].value = s
	} else {
		top = slices.Insert(top, i, member{"snapshot", s})
	}
	var compact bytes.Buffer
	compact.WriteByte('{')
	for i, m := range top {
		if i > 0 {
			compact.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		compact.Write(k)
		compact.WriteByte(':')
		if err := json.Compact(&compact, m.value); err != nil {
			return nil, fmt.Errorf("%s: %v", m.key, err)
		}
	}
	compact.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// extensionSnapshot lays the differential diff of a complex extension over
// base, the snapshot of R4's Extension.
func extensionSnapshot(base, diff []element) ([]element, error) {
	byPath := map[string]element{}
	for _, e := range base {
		byPath[str(e["path"])] = e
	}
	byID := map[string]element{}
	for _, e := range diff {
		id := str(e["id"])
		if _, dup := byID[id]; dup {
			return nil, fmt.Errorf("differential: element %s twice", id)
		}
		byID[id] = e
	}
	used := map[string]bool{}
	// derive is the element id at path: the base element basePath with the
	// differential's element id applied.
	derive := func(id, path, basePath string, dropSlicing bool) (element, error) {
		b, ok := byPath[basePath]
		if !ok {
			return nil, fmt.Errorf("the base has no element %s", basePath)
		}
		e := element{}
		for k, v := range b {
			if k != "extension" && !(dropSlicing && k == "slicing") {
				e[k] = v
			}
		}
		e["id"], e["path"] = quote(id), quote(path)
		if d, ok := byID[id]; ok {
			used[id] = true
			if str(d["path"]) != path {
				return nil, fmt.Errorf("differential: element %s has path %s, want %s", id, str(d["path"]), path)
			}
			for k, v := range d {
				e[k] = v
			}
		}
		return e, nil
	}
	var out []element
	add := func(id, path, basePath string, dropSlicing bool) error {
		e, err := derive(id, path, basePath, dropSlicing)
		out = append(out, e)
		return err
	}
	for _, p := range []string{"Extension", "Extension.id", "Extension.extension"} {
		if err := add(p, p, p, false); err != nil {
			return nil, err
		}
	}
	for _, d := range diff {
		name := str(d["sliceName"])
		if name == "" {
			continue
		}
		if str(d["path"]) != "Extension.extension" {
			return nil, fmt.Errorf("differential: slice %s of %s: only sub-extensions are supported", name, str(d["path"]))
		}
		slice := "Extension.extension:" + name
		if err := add(slice, "Extension.extension", "Extension.extension", true); err != nil {
			return nil, err
		}
		for _, child := range []string{"id", "extension", "url", "value[x]"} {
			if err := add(slice+"."+child, "Extension.extension."+child, "Extension."+child, false); err != nil {
				return nil, err
			}
		}
	}
	for _, p := range []string{"Extension.url", "Extension.value[x]"} {
		if err := add(p, p, p, false); err != nil {
			return nil, err
		}
	}
	for _, d := range diff {
		if id := str(d["id"]); !used[id] {
			return nil, fmt.Errorf("differential: element %s is not one of a complex extension's", id)
		}
	}
	return out, nil
}

// encodeElement encodes e compactly with its properties in elementOrder.
func encodeElement(e element) ([]byte, error) {
	rank := func(k string) int {
		for i, o := range elementOrder {
			if k == o || (strings.HasPrefix(k, o) && slices.Contains([]string{"defaultValue", "fixed", "pattern", "minValue", "maxValue"}, o)) {
				return i
			}
		}
		return -1
	}
	keys := make([]string, 0, len(e))
	for k := range e {
		if rank(k) < 0 {
			return nil, fmt.Errorf("element %s: unknown property %q", str(e["id"]), k)
		}
		keys = append(keys, k)
	}
	slices.SortStableFunc(keys, func(a, b string) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var out bytes.Buffer
	out.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			out.WriteByte(',')
		}
		out.Write(quote(k))
		out.WriteByte(':')
		out.Write(e[k])
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

// member is one member of a JSON object, in the object's order.
type member struct {
	key   string
	value json.RawMessage
}

// orderedObject decodes a JSON object keeping its members' order.
func orderedObject(b []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object (%v)", err)
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{t.(string), v})
	}
	return out, nil
}

func str(v json.RawMessage) string {
	var s string
	json.Unmarshal(v, &s)
	return s
}

func quote(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
