package rego_test

import (
	"bytes"
	"regexp"

	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/store"
	"github.com/custos-mcp/custos/store/synth"
)

// viewKey is the resource id key of the views these tests make: the
// server names a view's resources by the keyed ids of their URIs
// (pseudonymize:keyedid), and these tests, which hold no catalog, name
// every resource as if the catalog held it.
var viewKey = bytes.Repeat([]byte{0x42}, 32)

// viewOptions are the minimize options the server passes, at the
// synthetic data set's instant.
func viewOptions() minimize.Options {
	return minimize.Options{Now: synth.DefaultNow, KeyID: func(typ, id string) (string, bool) { return keyedID(typ, id), true }}
}

// keyedID is the keyed id viewOptions names typ/id by.
func keyedID(typ, id string) string { return store.ResourceID(viewKey, synth.DefaultTenant, typ, id) }

// keyedRef is the reference typ/id as a view names it.
func keyedRef(typ, id string) string { return typ + "/" + keyedID(typ, id) }

// sourceRef is a literal reference "reference":"Type/id" in an expected
// fragment of a view, written with the source's id.
var sourceRef = regexp.MustCompile(`"reference":"([A-Z][A-Za-z]+)/([A-Za-z0-9\-.]{1,64})"`)

// keyedRefs is an expected fragment written with source ids as the
// view writes it: every "reference":"Type/id" as keyedRef names it.
func keyedRefs(s string) string {
	return sourceRef.ReplaceAllStringFunc(s, func(m string) string {
		p := sourceRef.FindStringSubmatch(m)
		return `"reference":"` + keyedRef(p[1], p[2]) + `"`
	})
}
