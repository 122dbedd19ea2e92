package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/internal/regularfile"
)

// MaxFileSize bounds a configuration file; a larger one is refused unread.
const MaxFileSize = 1 << 20

// Load reads and parses the configuration file at path. Problems name the
// file as path.
func Load(path string) (*File, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

func readFile(path string) ([]byte, error) {
	// Only a regular file: a FIFO would block the open forever (config
	// check then gave no answer at all).
	fh, err := regularfile.Open(path, os.O_RDONLY, 0, regularfile.FollowLinks)
	if err != nil {
		return nil, Problems{{File: path, Message: fileError(err), unread: true}}
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return nil, Problems{{File: path, Message: fileError(err), unread: true}}
	}
	if len(data) > MaxFileSize {
		return nil, Problems{{File: path, Message: fmt.Sprintf("larger than %d bytes", MaxFileSize)}}
	}
	return data, nil
}

// fileError says why a file could not be used, without the path (the
// Problem names it).
func fileError(err error) string { return "file " + app.StatError(err) }

// Parse parses a configuration file strictly. name is used in Problems. It
// returns either a whole File or Problems listing everything wrong: syntax,
// unknown fields (with a suggestion), duplicate keys, wrong types, and
// secrets. An empty file is valid and sets nothing.
func Parse(name string, data []byte) (*File, error) {
	f, err := parse(name, data)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Inspect reads a configuration file like Load and, when it is invalid,
// also returns what could be decoded of it (leaving out every field whose
// value looked like a secret), so that a report can list the problems
// validation finds as well. Never serve from a File that came with an
// error.
func Inspect(path string) (*File, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return parse(path, data)
}

func parse(name string, data []byte) (*File, error) {
	p := &parser{name: name, lines: map[string]int{}, bad: map[string]bool{}}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return &File{name: name, lines: p.lines}, nil
		}
		return nil, Problems{p.yamlError(err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			return nil, Problems{p.yamlError(err)}
		}
		return nil, Problems{{File: name, Line: line, Message: "more than one YAML document: a configuration file holds exactly one"}}
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind == yaml.ScalarNode && doc.Tag == "!!null" {
		return &File{name: name, lines: p.lines}, nil
	}
	// Anchors and aliases are refused before anything follows them: they
	// can form cycles, and a security-relevant value should be written out
	// where it applies.
	if p.noAliases(doc) {
		return nil, p.problems
	}
	p.section(doc, reflect.TypeOf(File{}), "")
	if len(p.problems) > 0 {
		return p.partial(data), p.problems
	}
	// The structure is known good; decode strictly into a temporary (the
	// walk above and yaml's KnownFields must agree) and return it whole.
	var f File
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(&f); err != nil {
		return nil, Problems{p.yamlError(err)}
	}
	f.name, f.lines = name, p.lines
	return &f, nil
}

// partial decodes what it can of an invalid file, for reports only: yaml
// goes on past fields it cannot use, and every field whose value looked like
// a secret or did not decode is cleared (so validation neither repeats a
// secret nor reports a made-up value).
func (p *parser) partial(data []byte) *File {
	var f File
	_ = yaml.Unmarshal(data, &f) // errors are already among the problems
	for _, fd := range schema() {
		if p.bad[fd.Path] {
			v := fd.value(&f)
			v.Set(reflect.Zero(v.Type()))
		}
	}
	f.name, f.lines = p.name, p.lines
	return &f
}

type parser struct {
	bad      map[string]bool // paths whose value looked like a secret or did not decode
	name     string
	lines    map[string]int // dotted path -> line of its key
	problems Problems
}

// addBad reports a value of a leaf that cannot be used.
func (p *parser) addBad(line int, leaf, path, msg string) {
	p.bad[leaf] = true
	p.add(line, path, msg)
}

func (p *parser) add(line int, path, msg string) {
	pr := Problem{File: p.name, Line: line, Field: path, Message: msg}
	if fl, ok := FlagFor(path); ok {
		pr.Flag = "--" + fl
	}
	p.problems = append(p.problems, pr)
}

var (
	lineRE     = regexp.MustCompile(`line (\d+)`)
	backtickRE = regexp.MustCompile("`[^`]*`")
)

// yamlError turns a yaml error into a Problem with its line, and without any
// quoted value (which could be a secret).
func (p *parser) yamlError(err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = backtickRE.ReplaceAllString(msg, "a value")
	pr := Problem{File: p.name, Message: msg}
	if m := lineRE.FindStringSubmatchIndex(msg); m != nil {
		pr.Line, _ = strconv.Atoi(msg[m[2]:m[3]])
		rest := strings.TrimLeft(msg[m[1]:], ": ")
		pr.Message = rest
	}
	return pr
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// section checks a mapping node against struct type t.
func (p *parser) section(n *yaml.Node, t reflect.Type, prefix string) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, prefix, fmt.Sprintf("want a mapping of fields (%s), not %s", strings.Join(knownKeys(t), ", "), kindName(n)))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.add(k.Line, prefix, "a key must be a plain name")
			continue
		}
		path := join(prefix, k.Value)
		if first, dup := seen[k.Value]; dup {
			p.add(k.Line, path, fmt.Sprintf("defined twice (first on line %d)", first))
			continue
		}
		seen[k.Value] = k.Line
		p.lines[path] = k.Line
		sf, ok := fieldByKey(t, k.Value)
		if !ok {
			if looksLikeSecretKey(k.Value) {
				p.add(k.Line, path, "secrets never go in the configuration file: the Vault token is read from $VAULT_TOKEN only, AppRole ids from vault.approle.role_id_file and vault.approle.secret_id_file, dev tokens are stored hashed in http.tokens_file")
			} else {
				p.add(k.Line, path, unknownField(k.Value, t))
				p.secretValues(v, path) // a secret under an unknown key is still refused
			}
			continue
		}
		if sf.Tag.Get("flag") == "" && sf.Type.Kind() == reflect.Struct {
			p.section(v, sf.Type, path)
			continue
		}
		p.leaf(v, sf.Type, path)
	}
}

// leaf checks one value against its Go type: secrets first, then the type.
func (p *parser) leaf(n *yaml.Node, t reflect.Type, path string) {
	n = resolve(n)
	if p.secretValues(n, path) {
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if t == reflect.TypeOf([]PolicyKey(nil)) {
		p.policyKeys(n, path)
		return
	}
	if t == reflect.TypeOf([]string(nil)) {
		p.stringList(n, path)
		return
	}
	if n.Kind != yaml.ScalarNode {
		p.addBad(n.Line, path, path, fmt.Sprintf("want %s, not %s", typeName(t), kindName(n)))
		return
	}
	target := reflect.New(t)
	if err := n.Decode(target.Interface()); err != nil {
		p.addBad(n.Line, path, path, fmt.Sprintf("want %s", typeName(t)))
		return
	}
	// A bare number is not a duration (30 would be 30ns).
	if t.Elem() == reflect.TypeOf(time.Duration(0)) {
		if _, err := time.ParseDuration(n.Value); err != nil {
			p.addBad(n.Line, path, path, fmt.Sprintf("want %s", typeName(t)))
		}
	}
}

func (p *parser) policyKeys(n *yaml.Node, path string) {
	if n.Kind != yaml.SequenceNode {
		p.addBad(n.Line, path, path, "want a list of {id, file}, not "+kindName(n))
		return
	}
	t := reflect.TypeOf(PolicyKey{})
	for i, item := range n.Content {
		item = resolve(item)
		ipath := fmt.Sprintf("%s[%d]", path, i)
		if item.Kind != yaml.MappingNode {
			p.addBad(item.Line, path, ipath, "want {id: ID, file: PEMFILE}, not "+kindName(item))
			continue
		}
		seen := map[string]bool{}
		for j := 0; j+1 < len(item.Content); j += 2 {
			k, v := item.Content[j], resolve(item.Content[j+1])
			kpath := ipath + "." + k.Value
			p.lines[kpath] = k.Line
			if _, ok := fieldByKey(t, k.Value); !ok {
				p.addBad(k.Line, path, kpath, unknownField(k.Value, t))
				continue
			}
			if seen[k.Value] {
				p.addBad(k.Line, path, kpath, "defined twice")
				continue
			}
			seen[k.Value] = true
			if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
				p.addBad(v.Line, path, kpath, "want a string")
			}
		}
	}
}

// stringList checks a list of strings.
func (p *parser) stringList(n *yaml.Node, path string) {
	if n.Kind != yaml.SequenceNode {
		p.addBad(n.Line, path, path, "want a list of strings, not "+kindName(n))
		return
	}
	for i, item := range n.Content {
		item = resolve(item)
		if item.Kind != yaml.ScalarNode || item.Tag != "!!str" {
			p.addBad(item.Line, path, fmt.Sprintf("%s[%d]", path, i), "want a string, not "+kindName(item))
		}
	}
}

// secretValues refuses every scalar under n that looks like a secret,
// without repeating it, and reports whether it found one.
func (p *parser) secretValues(n *yaml.Node, path string) bool {
	n = resolve(n)
	found := false
	switch n.Kind {
	case yaml.ScalarNode:
		if what := secretLooking(n.Value); what != "" {
			p.bad[path] = true
			p.add(n.Line, path, fmt.Sprintf("the value looks like %s; secrets never go in the configuration file (the value is not shown)", what))
			return true
		}
	case yaml.SequenceNode, yaml.MappingNode:
		for _, c := range n.Content {
			if p.secretValues(c, path) {
				found = true
			}
		}
	}
	return found
}

var (
	vaultTokenRE = regexp.MustCompile(`^(hv[sbr]\.[A-Za-z0-9_-]{20,}|s\.[A-Za-z0-9]{24})$`)
	jwtRE        = regexp.MustCompile(`^eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$`)
	userinfoRE   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://[^/@\s]*:[^/@\s]*@`)
)

// secretLooking names what s looks like if it looks like a secret, or "".
func secretLooking(s string) string {
	s = strings.TrimSpace(s)
	switch {
	case vaultTokenRE.MatchString(s):
		return "a Vault token"
	case strings.Contains(s, "-----BEGIN"):
		return "inline PEM (name the file instead)"
	case jwtRE.MatchString(s):
		return "a bearer token (JWT)"
	case userinfoRE.MatchString(s):
		return "a URL carrying credentials"
	}
	return ""
}

// looksLikeSecretKey reports whether an unknown key names a secret value
// (not a file holding one).
func looksLikeSecretKey(k string) bool {
	k = strings.ToLower(k)
	if strings.HasSuffix(k, "_file") || strings.HasSuffix(k, "-file") {
		return false
	}
	for _, s := range []string{"token", "password", "passwd", "secret", "private_key", "privatekey", "api_key", "apikey", "credential", "role_id", "roleid"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// unknownField explains an unknown key, suggesting the closest known one.
func unknownField(k string, t reflect.Type) string {
	known := knownKeys(t)
	best, bestD := "", 3
	for _, c := range known {
		if d := editDistance(strings.ToLower(k), c); d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown field %q (did you mean %q?)", k, best)
	}
	return fmt.Sprintf("unknown field %q (known here: %s)", k, strings.Join(known, ", "))
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// noAliases reports every anchor, alias and merge key in the tree under n
// (following Content only, never an alias), and whether there was one.
func (p *parser) noAliases(n *yaml.Node) bool {
	found := false
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch {
		case n.Kind == yaml.AliasNode || n.Anchor != "":
			p.add(n.Line, "", "YAML anchors and aliases (&name, *name) are not supported: write each value out where it applies")
			found = true
		case n.Kind == yaml.ScalarNode && n.Tag == "!!merge":
			p.add(n.Line, "", "YAML merge keys (<<) are not supported: write each value out where it applies")
			found = true
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return found
}

// resolve is the identity: aliases are refused before the walk
// (noAliases), so every node is what it seems.
func resolve(n *yaml.Node) *yaml.Node { return n }

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return "a single value"
	}
	return "an unsupported node"
}

// typeName says what a leaf of type t accepts.
func typeName(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeOf(time.Duration(0)) {
		return "a Go duration such as 500ms, 30s, 5m or 1h"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	}
	return t.String()
}
