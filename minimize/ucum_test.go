package minimize

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"testing"
)

var updateUCUM = flag.Bool("update-ucum", false, "rewrite ucum_gen.go from @lhncbc/ucum-lhc")

// ucumDefs is where `make validators` installs NLM's UCUM library's
// definitions (@lhncbc/ucum-lhc, pinned in e2e/validators/package.json).
const ucumDefs = "../e2e/validators/node_modules/@lhncbc/ucum-lhc/data/ucumDefs.min.json"

// TestUCUMTable regenerates UCUM's atoms and prefixes (ucum_gen.go) from
// @lhncbc/ucum-lhc's ucumDefs.min.json and checks that the file holds
// them; with -update-ucum it writes the file. A missing install skips the
// test, or fails it under CI=true.
func TestUCUMTable(t *testing.T) {
	src, err := genUCUM(ucumDefs)
	checkGenerated(t, "ucum_gen.go", "@lhncbc/ucum-lhc", src, err, *updateUCUM, "-run TestUCUMTable -args -update-ucum")
}

// genUCUM renders ucum_gen.go from ucumDefs.min.json at path: its tables
// are a config (the field names) and rows of values in that order. The
// units of source "UCUM" that are base units or metric take a prefix, the
// others none; the prefixes are listed as the file lists them.
func genUCUM(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pkg, err := os.ReadFile(filepath.Join(filepath.Dir(path), "..", "package.json"))
	if err != nil {
		return nil, err
	}
	var meta struct{ Version string }
	if err := json.Unmarshal(pkg, &meta); err != nil || meta.Version == "" {
		return nil, fmt.Errorf("%s: no version in package.json: %v", path, err)
	}
	var defs struct {
		Prefixes, Units struct {
			Config []any   `json:"config"`
			Data   [][]any `json:"data"`
		}
	}
	if err := json.Unmarshal(raw, &defs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	field := func(config []any, name string) (int, error) {
		for i, c := range config {
			if c == name {
				return i, nil
			}
		}
		return 0, fmt.Errorf("%s: no field %q in the config", path, name)
	}
	var idx [5]int
	for i, f := range []struct {
		config []any
		name   string
	}{{defs.Units.Config, "csCode_"}, {defs.Units.Config, "source_"}, {defs.Units.Config, "isBase_"}, {defs.Units.Config, "isMetric_"}, {defs.Prefixes.Config, "code_"}} {
		if idx[i], err = field(f.config, f.name); err != nil {
			return nil, err
		}
	}
	var metric, other, prefixes []string
	for _, u := range defs.Units.Data {
		code, _ := u[idx[0]].(string)
		if u[idx[1]] != "UCUM" || code == "" {
			continue
		}
		if u[idx[2]] == true || u[idx[3]] == true {
			metric = append(metric, code)
		} else {
			other = append(other, code)
		}
	}
	for _, p := range defs.Prefixes.Data {
		code, _ := p[idx[4]].(string)
		prefixes = append(prefixes, code)
	}
	if len(metric) == 0 || len(other) == 0 || len(prefixes) == 0 {
		return nil, fmt.Errorf("%s: %d metric atoms, %d others, %d prefixes", path, len(metric), len(other), len(prefixes))
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `// Code generated from UCUM's atoms and prefixes; DO NOT EDIT.
//
// Source: the units of source "UCUM" and the prefixes of
// data/ucumDefs.min.json in @lhncbc/ucum-lhc %s (the U.S. National
// Library of Medicine's UCUM library, generated from ucum-essence.xml):
// the base units (metric in UCUM) and the units it marks metric take a
// prefix, the others none.

package minimize
`, meta.Version)
	for _, set := range []struct {
		comment, name string
		codes         []string
	}{
		{"ucumMetricAtoms are UCUM's metric atoms (a prefix may precede them).", "ucumMetricAtoms", metric},
		{"ucumOtherAtoms are UCUM's atoms that take no prefix.", "ucumOtherAtoms", other},
		{"ucumPrefixes are UCUM's prefixes.", "ucumPrefixes", prefixes},
	} {
		fmt.Fprintf(&b, "\n// %s\nvar %s = setOf(\n", set.comment, set.name)
		for _, c := range set.codes {
			fmt.Fprintf(&b, "\t%q,\n", c)
		}
		b.WriteString(")\n")
	}
	return format.Source(b.Bytes())
}
