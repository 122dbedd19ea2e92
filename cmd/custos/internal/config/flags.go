package config

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Precedence, highest first:
//  1. a flag given on the command line;
//  2. the configuration file;
//  3. the environment ($VAULT_ADDR, $VAULT_CACERT, $CUSTOS_PRINCIPAL_FILE),
//     for the few settings that read it when neither of the above is set;
//  4. the flag's built-in default.
// A list (policy.keys) is replaced, never merged: one --policy-key on the
// command line drops every key of the file.

// Apply sets, for every field the file sets, the serve flag it stands for,
// unless that flag was given on the command line. It returns the effective
// settings: every flag not at its default, as a File whose Problems name the
// flag for a value from the command line, and the file's field and line for
// the others. f may be nil (no file).
func Apply(fs *pflag.FlagSet, f *File) (*File, error) {
	cli := map[string]bool{}
	fs.Visit(func(fl *pflag.Flag) { cli[fl.Name] = true })
	if f != nil {
		var ps Problems
		for _, fd := range schema() {
			if !fd.isSet(f) || cli[fd.Flag] || fs.Lookup(fd.Flag) == nil {
				continue
			}
			vals, err := fd.flagStrings(f)
			if err != nil {
				ps = append(ps, Problem{File: f.name, Line: f.lines[fd.Path], Field: fd.Path, Flag: "--" + fd.Flag, Message: err.Error()})
				continue
			}
			for _, s := range vals {
				if err := fs.Set(fd.Flag, s); err != nil {
					ps = append(ps, Problem{File: f.name, Line: f.lines[fd.Path], Field: fd.Path, Flag: "--" + fd.Flag, Message: "not a valid value"})
					break
				}
			}
		}
		eff, err := effective(fs, f, cli)
		if err != nil {
			ps = append(ps, err.(Problems)...)
		}
		return eff, ps.orNil()
	}
	return effective(fs, f, cli)
}

func effective(fs *pflag.FlagSet, from *File, cli map[string]bool) (*File, error) {
	eff := &File{fromFlag: map[string]bool{}, lines: map[string]int{}}
	if from != nil {
		eff.name = from.name
		for k, v := range from.lines {
			eff.lines[k] = v
		}
	}
	var ps Problems
	for _, fd := range schema() {
		fl := fs.Lookup(fd.Flag)
		if fl == nil || !fl.Changed {
			continue
		}
		if err := fd.setFromFlag(eff, fs, fl); err != nil {
			ps = append(ps, Problem{Field: fd.Path, Flag: "--" + fd.Flag, Message: err.Error(), fromFlag: true})
			continue
		}
		if cli[fd.Flag] {
			eff.fromFlag[fd.Path] = true
		}
	}
	return eff, ps.orNil()
}

var (
	durationT = reflect.TypeOf(time.Duration(0))
	keysT     = reflect.TypeOf([]PolicyKey(nil))
	stringsT  = reflect.TypeOf([]string(nil)) // a repeatable flag, one value each
)

// flagStrings renders a set field as the flag value(s) it stands for; it
// refuses what the flag could not carry back unchanged.
func (fd *Field) flagStrings(f *File) ([]string, error) {
	v := fd.value(f)
	switch {
	case fd.Flag == "tls12":
		switch mv := v.Elem().String(); mv {
		case "1.2", "1.3":
			return []string{strconv.FormatBool(mv == "1.2")}, nil
		}
		return nil, errors.New(`want "1.3" (default) or "1.2"`)
	case fd.typ == keysT:
		out := []string{}
		for i, k := range v.Interface().([]PolicyKey) {
			if k.ID == "" || k.File == "" || strings.ContainsAny(k.ID, "= \t") {
				return nil, fmt.Errorf("key %d: want an id without '=' or spaces, and a file", i)
			}
			out = append(out, k.ID+"="+k.File)
		}
		return out, nil
	case fd.typ == stringsT:
		out := []string{}
		for i, s := range v.Interface().([]string) {
			if strings.TrimSpace(s) == "" {
				return nil, fmt.Errorf("item %d: want a value, not an empty string", i)
			}
			out = append(out, s)
		}
		return out, nil
	}
	e := v.Elem()
	switch {
	case e.Type() == durationT:
		return []string{time.Duration(e.Int()).String()}, nil
	case e.Kind() == reflect.String:
		return []string{e.String()}, nil
	case e.Kind() == reflect.Bool:
		return []string{strconv.FormatBool(e.Bool())}, nil
	case e.Kind() == reflect.Int || e.Kind() == reflect.Int64:
		return []string{strconv.FormatInt(e.Int(), 10)}, nil
	case e.Kind() == reflect.Float64:
		return []string{strconv.FormatFloat(e.Float(), 'g', -1, 64)}, nil
	}
	panic("config: unsupported field type " + e.Type().String())
}

// setFromFlag sets the field of f from the flag's current value.
func (fd *Field) setFromFlag(f *File, fs *pflag.FlagSet, fl *pflag.Flag) error {
	v := fd.value(f)
	if fd.Flag == "tls12" {
		mv := "1.3"
		if fl.Value.String() == "true" {
			mv = "1.2"
		}
		v.Set(reflect.ValueOf(&mv))
		return nil
	}
	if fd.typ == keysT {
		vals, err := fs.GetStringArray(fd.Flag)
		if err != nil {
			return err
		}
		keys := []PolicyKey{}
		for _, kv := range vals {
			id, file, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("want ID=PEMFILE")
			}
			keys = append(keys, PolicyKey{ID: id, File: file})
		}
		v.Set(reflect.ValueOf(keys))
		return nil
	}
	if fd.typ == stringsT {
		vals, err := fs.GetStringArray(fd.Flag)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(append([]string{}, vals...)))
		return nil
	}
	s := fl.Value.String()
	p := reflect.New(fd.typ.Elem())
	e := p.Elem()
	switch {
	case e.Type() == durationT:
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		e.SetInt(int64(d))
	case e.Kind() == reflect.String:
		e.SetString(s)
	case e.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		e.SetBool(b)
	case e.Kind() == reflect.Int || e.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		e.SetInt(n)
	case e.Kind() == reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		e.SetFloat(x)
	default:
		return fmt.Errorf("unsupported type %s", e.Type())
	}
	v.Set(p)
	return nil
}

// Setting is one effective setting, for a summary: never a secret (the
// schema has no secret fields, and URLs are shown without credentials).
type Setting struct {
	Field  string `json:"field"`
	Flag   string `json:"flag"`
	Value  string `json:"value"`
	Source string `json:"source"` // "flag", "file", "environment ($NAME)" or "default"
}

// envFallback names the environment variable a field falls back to.
var envFallback = map[string]string{
	"vault.address":        "VAULT_ADDR",
	"vault.ca_cert_file":   "VAULT_CACERT",
	"stdio.principal_file": "CUSTOS_PRINCIPAL_FILE",
}

// Settings lists every field's effective value in schema order: the flag's
// value in fs, with where it came from according to eff (from Apply).
// getenv reads the environment fallbacks (nil: none).
func Settings(fs *pflag.FlagSet, eff *File, getenv func(string) string) []Setting {
	var out []Setting
	for _, fd := range schema() {
		fl := fs.Lookup(fd.Flag)
		if fl == nil {
			continue
		}
		s := Setting{Field: fd.Path, Flag: "--" + fd.Flag, Source: "default", Value: fl.Value.String()}
		switch {
		case fd.Flag == "tls12":
			s.Value = "1.3"
			if fl.Value.String() == "true" {
				s.Value = "1.2"
			}
		case fd.typ == keysT, fd.typ == stringsT:
			vals, _ := fs.GetStringArray(fd.Flag)
			s.Value = strings.Join(vals, ",")
		}
		switch {
		case fl.Changed && eff != nil && eff.fromFlag[fd.Path]:
			s.Source = "flag"
		case fl.Changed:
			s.Source = "file"
		case getenv != nil && envFallback[fd.Path] != "" && getenv(envFallback[fd.Path]) != "":
			s.Source = "environment ($" + envFallback[fd.Path] + ")"
			s.Value = getenv(envFallback[fd.Path])
		}
		s.Value = redactURL(s.Value)
		out = append(out, s)
	}
	return out
}

// redactURL drops credentials from a URL-looking value.
func redactURL(s string) string {
	if !strings.Contains(s, "://") || !strings.Contains(s, "@") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(not shown: unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	return u.String()
}
