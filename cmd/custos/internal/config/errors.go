package config

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every Problems value: the file or the
// effective settings are not usable, and serve must not start. The caller
// shows the Problems, which name each field; it should not retry.
var ErrInvalid = errors.New("config: invalid configuration")

// Problem is one thing wrong with a configuration, located as precisely as
// the parser knows: the file and line when the value came from the file, the
// field's dotted YAML path, and the serve flag it stands for.
type Problem struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Field   string `json:"field,omitempty"` // e.g. "tls.cert_file"; empty for the whole file
	Flag    string `json:"flag,omitempty"`  // e.g. "--tls-cert"
	Message string `json:"message"`         // never holds a configured value that could be a secret
	// fromFlag reports that the value was given on the command line: the
	// problem is then shown under the flag's name.
	fromFlag bool
	// missing reports a required field left unset.
	missing bool
	// unread reports that the file itself could not be read (Unread).
	unread bool
}

// Unread reports that the problem is the configuration file itself could
// not be read (not found, permission denied, a directory): nothing in it
// was checked, so 'config check' reaches no verdict on it.
func (p Problem) Unread() bool { return p.unread }

// String is "FILE: line N: FIELD: MESSAGE", or "--flag: MESSAGE" for a value
// given on the command line or when there is no file ("--flag is required
// ..." for a required one).
func (p Problem) String() string {
	var b strings.Builder
	switch {
	case p.fromFlag && p.Flag != "":
		fmt.Fprintf(&b, "%s: %s", p.Flag, p.Message)
		return b.String()
	case p.File == "" && p.Flag != "" && p.missing:
		// No configuration file: a required setting is named by its flag.
		fmt.Fprintf(&b, "%s is %s", p.Flag, p.Message)
		return b.String()
	case p.File == "" && p.Flag != "":
		fmt.Fprintf(&b, "%s: %s", p.Flag, p.Message)
		return b.String()
	}
	if p.File != "" {
		b.WriteString(p.File + ": ")
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Problems is every problem found; it is the error Parse, Validate and Load
// return. It matches ErrInvalid.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	if len(ps) == 1 {
		return lines[0]
	}
	return fmt.Sprintf("%d configuration problems:\n  %s", len(ps), strings.Join(lines, "\n  "))
}

// Is makes errors.Is(ps, ErrInvalid) true.
func (ps Problems) Is(target error) bool { return target == ErrInvalid }

// orNil returns ps as an error, or nil when there is no problem.
func (ps Problems) orNil() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}
