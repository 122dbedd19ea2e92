package app

import (
	"reflect"
	"testing"

	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/store"
)

// TestEntryOfCopiesEveryField: fhirin.Item and store.Entry are mirrors
// (the reader does not depend on the store). A field added to one and not
// to the other, or not copied by entryOf, would be dropped silently on
// import; this fails instead.
func TestEntryOfCopiesEveryField(t *testing.T) {
	it, et := reflect.TypeOf(fhirin.Item{}), reflect.TypeOf(store.Entry{})
	// The mirrors are the exported fields: store.Entry's unexported one
	// is the store's own (what EntryOptions.Preparer makes ahead).
	exported := func(t reflect.Type) (n int) {
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				n++
			}
		}
		return n
	}
	if exported(it) != exported(et) || it.NumField() != exported(it) {
		t.Fatalf("fhirin.Item has %d fields, store.Entry %d exported", it.NumField(), exported(et))
	}
	// An item with every field set to a non-zero value.
	var item fhirin.Item
	v := reflect.ValueOf(&item).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if _, ok := et.FieldByName(it.Field(i).Name); !ok {
			t.Fatalf("store.Entry has no field %s", it.Field(i).Name)
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
			if e := f.Index(0); e.Kind() == reflect.String {
				e.SetString("x")
			} else if e.Kind() == reflect.Uint8 {
				e.SetUint(1)
			}
		case reflect.Struct:
			if f.Type() == reflect.TypeOf(fhirin.Carrier{}) {
				f.Set(reflect.ValueOf(fhirin.Carrier{Type: "T", ID: "i"}))
			} else {
				f.Set(reflect.ValueOf(item.LastUpdated.AddDate(2026, 0, 0)))
			}
		default:
			t.Fatalf("field %s of kind %s: extend this test", it.Field(i).Name, f.Kind())
		}
	}
	e := reflect.ValueOf(entryOf(item))
	for i := range e.NumField() {
		if et.Field(i).IsExported() && e.Field(i).IsZero() {
			t.Errorf("entryOf leaves store.Entry.%s zero", et.Field(i).Name)
		}
	}
}
