package fhirin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The plain reading: how the reader read heads and took Bundles apart with
// encoding/json alone until the walk (walk.go) replaced it, kept as the
// reference the walk must agree with.

// plainHeadOf is headOf by json.Unmarshal, as unit (isBundle, then the
// head) and bundle.index read them: checked changes nothing.
func plainHeadOf(raw []byte, _, full bool) (head, error) {
	var h struct {
		ResourceType string          `json:"resourceType"`
		ID           string          `json:"id"`
		Identifier   json.RawMessage `json:"identifier"`
	}
	if full {
		err := json.Unmarshal(raw, &h)
		return head{h.ResourceType, h.ID, h.Identifier}, err
	}
	var t struct {
		ResourceType string `json:"resourceType"`
	}
	err := json.Unmarshal(raw, &t)
	return head{typ: t.ResourceType}, err
}

// plainSplitBundle is splitBundle by a json.Decoder's tokens: each
// entry's resource decoded as a json.RawMessage (a copy), every other
// member as a value, numbers as json.Number.
func plainSplitBundle(raw []byte, line int) (map[string]any, []*entry, error) {
	var entries []*entry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	envelope := map[string]any{}
	var envEntries []any
	lineAt, counted := line, 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		key, _ := tok.(string)
		if key != "entry" {
			var v any
			if err := dec.Decode(&v); err != nil {
				return nil, nil, err
			}
			envelope[key] = v
			continue
		}
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		if t != json.Delim('[') {
			envelope[key] = t
			if err := plainSkipOpened(dec, t); err != nil {
				return nil, nil, err
			}
			continue
		}
		for dec.More() {
			e, env, start, err := plainReadEntry(dec)
			if err != nil {
				return nil, nil, err
			}
			lineAt += bytes.Count(raw[counted:start], []byte{'\n'})
			counted = start
			e.line = lineAt
			entries = append(entries, e)
			envEntries = append(envEntries, env)
		}
		if _, err := dec.Token(); err != nil {
			return nil, nil, err
		}
		envelope[key] = envEntries
	}
	return envelope, entries, nil
}

// plainReadEntry is readEntry from dec, with the offset the entry starts at.
func plainReadEntry(dec *json.Decoder) (*entry, any, int, error) {
	e := &entry{}
	tok, err := dec.Token()
	start := int(dec.InputOffset()) - 1 // its '{', when it is an object
	if err != nil {
		return nil, nil, 0, err
	}
	if tok != json.Delim('{') {
		return e, tok, start, plainSkipOpened(dec, tok)
	}
	env := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, 0, err
		}
		key, _ := tok.(string)
		if key == "resource" {
			var r json.RawMessage
			if err := dec.Decode(&r); err != nil {
				return nil, nil, 0, err
			}
			if r[0] == '{' {
				e.Resource, env[key] = r, placeholder
				continue
			}
			var v any
			_ = json.Unmarshal(r, &v)
			env[key] = v
			continue
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, nil, 0, err
		}
		env[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, 0, err
	}
	e.fromEnvelope(env)
	return e, env, start, nil
}

// plainSkipOpened consumes the rest of the JSON value that tok starts.
func plainSkipOpened(dec *json.Decoder, tok json.Token) error {
	if tok == json.Delim('{') || tok == json.Delim('[') {
		return skipRest(dec, 1)
	}
	return nil
}

// withPlainReading runs fn with the plain reading in the walk's place.
// The plain reading reads a JSON file through a json.Decoder, as Read did
// before readJSONFile, never releasing its buffer.
func withPlainReading(fn func()) {
	saved, whole, release := bundleReading, readWhole, releaseAfter
	bundleReading.head, bundleReading.split = plainHeadOf, plainSplitBundle
	readWhole, releaseAfter = false, math.MaxInt
	defer func() { bundleReading, readWhole, releaseAfter = saved, whole, release }()
	fn()
}

// withDecoderReleased runs fn with every JSON file read through the
// decoder (readJSON, not readJSONFile), releasing its buffer after every
// top-level value.
func withDecoderReleased(fn func()) {
	whole, release := readWhole, releaseAfter
	readWhole, releaseAfter = false, 0
	defer func() { readWhole, releaseAfter = whole, release }()
	fn()
}

// readResult is what one Read gives: its items, the entries it skipped
// (Options.Skipped) and its error's text.
type readResult struct {
	items   []Item
	skipped Skipped
	err     string
}

// readResult reads path as readAll does, counting what it skips.
func readResultOf(t testing.TB, path string) readResult {
	t.Helper()
	var r readResult
	err := Read(context.Background(), path, Options{Link: testLink, Skipped: &r.skipped}, func(it Item) error {
		r.items = append(r.items, it)
		return nil
	})
	if err != nil {
		r.err = err.Error()
	}
	return r
}

// readBothAgree reads path with the walk (a JSON file read whole,
// readJSONFile), with the walk through a decoder released after every
// top-level value (readJSON, release) and with the plain reading (a
// decoder never released), and fails unless all give the same items
// (bodies, labels, places), skip the same entries (Options.Skipped) and
// give the same error, text included. It returns
// the walk's.
func readBothAgree(t testing.TB, path string) readResult {
	t.Helper()
	got := readResultOf(t, path)
	var want, released readResult
	withPlainReading(func() { want = readResultOf(t, path) })
	withDecoderReleased(func() { released = readResultOf(t, path) })
	for _, r := range []struct {
		name string
		got  readResult
	}{{"the walk", got}, {"the walk through a released decoder", released}} {
		if r.got.err != want.err {
			t.Fatalf("%s: %s's error\n  %s\nthe plain reading's\n  %s", path, r.name, r.got.err, want.err)
		}
		if r.got.skipped != want.skipped {
			t.Fatalf("%s: %s skipped %+v, the plain reading %+v", path, r.name, r.got.skipped, want.skipped)
		}
		if len(r.got.items) != len(want.items) {
			t.Fatalf("%s: %s read %d items, the plain reading %d", path, r.name, len(r.got.items), len(want.items))
		}
		for i := range r.got.items {
			if !reflect.DeepEqual(r.got.items[i], want.items[i]) {
				t.Fatalf("%s: item %d: %s read\n  %+v\nthe plain reading\n  %+v", path, i, r.name, r.got.items[i], want.items[i])
			}
		}
	}
	return got
}

// repositoryBundles are the files of the repository's FHIR fixtures that
// hold a Bundle.
func repositoryBundles(t testing.TB) []string {
	t.Helper()
	var paths []string
	for _, root := range []string{"testdata", "../minimize/testdata", "../testdata"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "fuzz" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".json") && !strings.HasSuffix(p, ".ndjson") {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if bytes.Contains(data, []byte(`"Bundle"`)) {
				paths = append(paths, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(paths) < 12 {
		t.Fatalf("found %d Bundle files in the repository's fixtures, want at least 12: %v", len(paths), paths)
	}
	return paths
}

// bundleVariants are rewrites of a Bundle's text that the plain reading
// reads in a particular way (each first occurrence of old replaced): case-
// folded, escaped and repeated member names, members of the wrong JSON
// kind, entries that are no objects, and the Bundle on one line.
var bundleVariants = [][2]string{
	{`"resourceType"`, `"ResourceType"`},
	{`"resourceType"`, `"resourcetype"`},
	{`"resourceType"`, `"re\u017fourceType"`}, // ſ folds to s
	{`"resourceType"`, `"resource\u0054ype"`},
	{`"resourceType":`, `"resourceType":null,"resourceType":`},
	{`"resourceType":`, `"resourceType":"Patient","resourceType":`},
	{`"resourceType":`, `"resourceType":7,"resourceType":`},
	{`"type":`, `"type":7,"type":`},
	{`"entry":`, `"entry":{},"entry":`},
	{`"entry":`, `"entry":7,"entry":`},
	{`"entry":`, `"entry":[{"resource":{"resourceType":"Patient","id":"p0"}}],"entry":`},
	{`"entry":[`, `"entry":["x",[1],null,`},
	{`"entry":[`, `"entry":[{"resource":null},{"resource":[]},{"resource":"x"},{"resource":1.50},`},
	{`"resource":`, `"resource":{"resourceType":"Patient","id":"p9"},"resource":`},
	{`"resource":`, `"resource":7,"resource":`},
	{`"resource":`, `"resourc\u0065":`},
	{`"resource":`, `"Resource":`},
	{`"fullUrl":`, `"fullUrl":1e2,"fullUrl":`},
	{`"fullUrl":"`, `"fullUrl":"\u0068`},
	{`"fullUrl"`, `"fullURL"`},
	{`"request":`, `"request":{"method":5,"url":"Patient/1"},"request":`},
	{`"method":`, `"method":"GET","method":`},
	{`"method":`, `"Method":"GET","method":`},
	{`"url":"`, `"url":"\u0050`},
	{`"mode":`, `"mode":"outcome","mode":`},
	{`"id":`, `"id":null,"id":`},
	{`"id":`, `"id":5,"id":`},
	{`"id":`, `"ID":`},
	{`"id":"`, `"id":"\u0070`},
	{`"identifier":`, `"identifier":null,"identifier":`},
	{`"identifier":`, `"Identifier":`},
	{`"system":`, `"sy\"stem":1,"system":`},
	{`"value":"`, `"value":"\\\"\ud800`},
	{`{`, "{\n\t"},
	{`"meta":`, `"meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-Confidentiality","code":"R"}]},"meta2":`},
}

// TestBundleReadingAgreesWithPlain reads every Bundle of the repository's
// fixtures (fhirin/testdata, minimize/testdata, testdata), each alone and
// their directories whole, as written, on one line and rewritten
// (bundleVariants), with the walk and with the plain reading it replaced,
// and requires the same items, the same entries skipped (Options.Skipped:
// testdata/skipped-entries.json skips some of each kind) and the same
// errors, text included.
func TestBundleReadingAgreesWithPlain(t *testing.T) {
	dirs := map[string]bool{}
	read, failed, skipped := 0, 0, 0
	for _, p := range repositoryBundles(t) {
		dirs[filepath.Dir(p)] = true
		if r := readBothAgree(t, p); r.err == "" {
			read += len(r.items)
			skipped += r.skipped.Reads + r.skipped.Outcomes
		} else {
			failed++
		}
		if strings.HasSuffix(p, ".ndjson") {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, data); err != nil {
			t.Fatal(err)
		}
		// The Bundle twice in a file, and followed by JSON that breaks
		// off: the second value is read by a released decoder (its lines,
		// the offset of a syntax error), the file not read whole.
		texts := [][]byte{compact.Bytes(), slices.Concat(data, []byte("\n\n"), data), slices.Concat(data, []byte("\n {\"a\": ]"))}
		for _, v := range bundleVariants {
			for _, text := range [][]byte{data, compact.Bytes()} {
				if bytes.Contains(text, []byte(v[0])) {
					texts = append(texts, bytes.Replace(text, []byte(v[0]), []byte(v[1]), 1))
				}
			}
		}
		for i, text := range texts {
			q := filepath.Join(t.TempDir(), fmt.Sprintf("v%d-%s", i, filepath.Base(p)))
			if err := os.WriteFile(q, text, 0o644); err != nil {
				t.Fatal(err)
			}
			if r := readBothAgree(t, q); r.err == "" {
				read += len(r.items)
				skipped += r.skipped.Reads + r.skipped.Outcomes
			} else {
				failed++
			}
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		readBothAgree(t, d)
	}
	// The comparison means something only when both read and refuse.
	t.Logf("read %d items, %d refusals, %d entries skipped", read, failed, skipped)
	if read == 0 || failed == 0 || skipped == 0 {
		t.Errorf("the readings agreed on %d items read, %d refusals and %d entries skipped: the comparison needs all three", read, failed, skipped)
	}
	if read < 500 || failed < 200 {
		t.Errorf("read %d items and %d refusals from the Bundles and their variants: too few to compare", read, failed)
	}
}

// TestHeadOfAgreesWithUnmarshal holds headOf, and splitBundle, against
// the plain reading on values of every kind the reader meets, each as a
// checked value and as an NDJSON line.
func TestHeadOfAgreesWithUnmarshal(t *testing.T) {
	for _, raw := range []string{
		`{"resourceType":"Bundle"}`, ` {"resourceType" : "Bundle" } `, `{"ResourceType":"Bundle"}`,
		`{"re\u017fourceType":"Bundle"}`, `{"resourceType":"Bun\u0064le"}`, `{"resourceType":null}`,
		`{"resourceType":"Bundle","resourcetype":null}`, `{"resourceType":"Bundle","RESOURCETYPE":"Patient"}`,
		`{"resourceType":1}`, `{"resourceType":"Bundle","resourceType":{}}`, `{"resourceType":["Bundle"]}`,
		`{"resourceType":"Bundle","id":7}`, `{"resourceType":"Patient","Id":"a","identifier":{"value":"x"}}`,
		`{"resourceType":"Patient","id":"\ud800"}`, "{\"resourceType\":\"Bund\xffle\"}", "{\"resource\xffType\":\"Bundle\"}",
		`{"a":"\\\"","resourceType":"Bundle","b":[{"c":"]}"}]}`, `[]`, `null`, `"Bundle"`, `7`, `{}`,
		`{"resourceType":"Bundle"`, `{"resourceType":"Bundle"}{}`, `{"resourceType":"Bundle",}`,
	} {
		for _, full := range []bool{false, true} {
			for _, checked := range []bool{false, true} {
				if checked && !json.Valid([]byte(raw)) {
					continue
				}
				got, gotErr := headOf([]byte(raw), checked, full)
				want, wantErr := plainHeadOf([]byte(raw), checked, full)
				if !reflect.DeepEqual(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Errorf("headOf(%s, checked %v, full %v) = %+v, %v; json.Unmarshal gives %+v, %v", raw, checked, full, got, gotErr, want, wantErr)
				}
			}
		}
	}
}

// FuzzBundleReading holds the walk against the plain reading on any
// input: headOf and splitBundle against theirs on valid JSON, and Read of
// the input as a JSON file, items and error text. Seeds: the repository's
// Bundles and their variants (bundleVariants).
func FuzzBundleReading(f *testing.F) {
	for _, p := range repositoryBundles(f) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		for _, v := range bundleVariants {
			if bytes.Contains(data, []byte(v[0])) {
				f.Add(bytes.Replace(data, []byte(v[0]), []byte(v[1]), 1))
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if json.Valid(data) {
			for _, full := range []bool{false, true} {
				got, gotErr := headOf(data, true, full)
				want, wantErr := plainHeadOf(data, true, full)
				if !reflect.DeepEqual(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Fatalf("headOf (full %v) = %+v, %v; json.Unmarshal gives %+v, %v", full, got, gotErr, want, wantErr)
				}
			}
			if v := bytes.TrimLeft(data, " \t\r\n"); v[0] == '{' {
				env, entries, err := splitBundle(data, 1)
				wantEnv, wantEntries, wantErr := plainSplitBundle(data, 1)
				if (err == nil) != (wantErr == nil) || !reflect.DeepEqual(env, wantEnv) || !reflect.DeepEqual(entries, wantEntries) {
					t.Fatalf("splitBundle differs from the plain reading: %v, %v\n%#v\n%#v", err, wantErr, env, wantEnv)
				}
			}
		}
		p := filepath.Join(t.TempDir(), "x.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		readBothAgree(t, p)
	})
}

// plainEachObject is eachObject as it was: each object's names sorted in a
// new slice, and its path built as strings, member by member.
func plainEachObject(v any, fn func(obj map[string]any, path []string) error) error {
	var stack []string
	var walk func(v any) error
	walk = func(v any) error {
		switch v := v.(type) {
		case map[string]any:
			if err := fn(v, stack); err != nil {
				return err
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				stack = append(stack, "."+elementName(k))
				if err := walk(v[k]); err != nil {
					return err
				}
				stack = stack[:len(stack)-1]
			}
		case []any:
			for i, c := range v {
				stack = append(stack, "["+itoa(i)+"]")
				if err := walk(c); err != nil {
					return err
				}
				stack = stack[:len(stack)-1]
			}
		}
		return nil
	}
	return walk(v)
}

// TestEachObjectAgreesWithPlain walks every JSON value of the
// repository's FHIR fixtures (each NDJSON line, each JSON file) with
// eachObject and with the plain walk, and requires the same objects in the
// same order at the same paths, and the same stop at an error.
func TestEachObjectAgreesWithPlain(t *testing.T) {
	type visit struct {
		obj  uintptr
		path string
	}
	var values []any
	for _, root := range []string{"testdata", "../minimize/testdata", "../testdata"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") && !strings.HasSuffix(p, ".ndjson") {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.UseNumber()
			for {
				var v any
				if dec.Decode(&v) != nil {
					return nil
				}
				values = append(values, v)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Names elementName writes as "?", and arrays of arrays.
	var odd any
	if err := json.Unmarshal([]byte(`{"":{"a":{}},"a b":[{},[{"z":{}},{}]],"_x":{"y":[1,{"k":{}}]},"Z":{},"ñ":{},"1a":{"b":[[[{}]]]}}`), &odd); err != nil {
		t.Fatal(err)
	}
	values = append(values, odd)
	if len(values) < 100 {
		t.Fatalf("read %d JSON values from the fixtures, want at least 100", len(values))
	}
	visits := 0
	for _, v := range values {
		for _, stopAt := range []int{-1, 7} { // walk it all; stop at the seventh object
			var got, want []visit
			record := func(into *[]visit, obj map[string]any, path string) error {
				*into = append(*into, visit{reflect.ValueOf(obj).Pointer(), path})
				if len(*into) == stopAt {
					return errTooMany
				}
				return nil
			}
			gotErr := eachObject(v, func(obj map[string]any, path objectPath) error { return record(&got, obj, path.String()) })
			wantErr := plainEachObject(v, func(obj map[string]any, path []string) error { return record(&want, obj, strings.Join(path, "")) })
			if !slices.Equal(got, want) || gotErr != wantErr {
				t.Fatalf("eachObject visited %v (%v), the plain walk %v (%v)", got, gotErr, want, wantErr)
			}
			visits += len(got)
		}
	}
	t.Logf("%d values, %d objects visited", len(values), visits)
	if visits == 0 {
		t.Error("no object visited: the walks were compared on nothing")
	}
}

// FuzzWalkOnAnyBytes: the walk reads only JSON encoding/json has checked,
// but it must not index past the end of bytes that are not JSON (a caller
// that one day skips the check would crash an import, or a sync inside
// serve): on any input, headOf (unchecked), splitBundle and readEntry
// return, with an error or without.
func FuzzWalkOnAnyBytes(f *testing.F) {
	for _, s := range []string{`{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Patient"}}]}`,
		`{"entry":[{"resource":`, `{"entry":[{"`, `{"`, `{"a":`, `{"entry":[,]}`, `[`, `"`, ``, `{"entry":[{"request":{"method":}}]}`,
		`{"entry"`, `{"entry":`, `{"a":{"b"`, `{"a":{"b":`, `{"entry":[{"resource"`, `{"entry":[{"a":{"b":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = headOf(b, false, true)
		_, _, _ = splitBundle(b, 1)
		_, _, _ = readEntry(b)
	})
}
