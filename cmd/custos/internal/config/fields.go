package config

import (
	"reflect"
	"sort"
	"strings"
	"sync"
)

// Field describes one leaf of the schema: its dotted YAML path and the serve
// flag it stands for.
type Field struct {
	Path string // e.g. "tls.cert_file"
	Flag string // e.g. "tls-cert" (without dashes)

	index []int
	typ   reflect.Type
}

var (
	fieldsOnce sync.Once
	fieldList  []Field
	byPath     map[string]*Field
	byFlag     map[string]*Field
)

func schema() []Field {
	fieldsOnce.Do(func() {
		walkType(reflect.TypeOf(File{}), "", nil)
		byPath, byFlag = map[string]*Field{}, map[string]*Field{}
		for i := range fieldList {
			byPath[fieldList[i].Path] = &fieldList[i]
			byFlag[fieldList[i].Flag] = &fieldList[i]
		}
	})
	return fieldList
}

func walkType(t reflect.Type, prefix string, index []int) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name := yamlName(sf)
		idx := append(append([]int(nil), index...), i)
		if flag := sf.Tag.Get("flag"); flag != "" {
			fieldList = append(fieldList, Field{Path: prefix + name, Flag: flag, index: idx, typ: sf.Type})
			continue
		}
		if sf.Type.Kind() == reflect.Struct {
			walkType(sf.Type, prefix+name+".", idx)
		}
	}
}

func yamlName(sf reflect.StructField) string {
	name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
	return name
}

// Fields lists every leaf of the schema in schema order.
func Fields() []Field { return append([]Field(nil), schema()...) }

// FlagFor returns the serve flag (without dashes) of a dotted field path.
func FlagFor(path string) (string, bool) {
	schema()
	f, ok := byPath[path]
	if !ok {
		return "", false
	}
	return f.Flag, true
}

// FieldFor returns the dotted field path that stands for a serve flag.
func FieldFor(flag string) (string, bool) {
	schema()
	f, ok := byFlag[flag]
	if !ok {
		return "", false
	}
	return f.Path, true
}

// value is the field's reflect.Value inside f (addressable).
func (fd *Field) value(f *File) reflect.Value {
	return reflect.ValueOf(f).Elem().FieldByIndex(fd.index)
}

// isSet reports whether the file sets the field.
func (fd *Field) isSet(f *File) bool {
	v := fd.value(f)
	return !v.IsNil() // pointers and slices
}

// knownKeys lists the YAML keys of struct type t, sorted.
func knownKeys(t reflect.Type) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).IsExported() {
			keys = append(keys, yamlName(t.Field(i)))
		}
	}
	sort.Strings(keys)
	return keys
}

// fieldByKey finds the struct field of t with YAML key k.
func fieldByKey(t reflect.Type, k string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).IsExported() && yamlName(t.Field(i)) == k {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}
