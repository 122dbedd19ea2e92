package fhirsync

import (
	"errors"
	"mime"
	"strings"
	"sync"

	"golang.org/x/text/encoding/ianaindex"

	"github.com/custos-mcp/custos/minimize"
)

// credentials are the secrets one sync has held — the access tokens it
// fetched and the client assertions it signed — so that whatever a server
// or proxy echoes of them (in a Content-Type, a malformed header line
// Go's transport quotes, a manifest's output type, X-Progress) never
// leaves the sync in a message: its error (stderr, the sync/end audit
// record), a log line or a progress report.
type credentials struct {
	mu sync.Mutex
	v  []string
}

// add remembers a credential; nil-safe.
func (c *credentials) add(s string) {
	if c == nil || s == "" {
		return
	}
	c.mu.Lock()
	c.v = append(c.v, s)
	c.mu.Unlock()
}

// redacted stands where a credential was.
const redacted = "[redacted]"

// redact replaces every credential in s with [redacted]; nil-safe.
func (c *credentials) redact(s string) string {
	if c == nil {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.v {
		s = strings.ReplaceAll(s, v, redacted)
	}
	return s
}

// redactedError is an error whose message held a credential: the message
// is redacted; errors.Is and errors.As still see the cause.
type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactErr is err with every credential redacted from its message.
func (c *credentials) redactErr(err error) error {
	if err == nil {
		return nil
	}
	if msg := c.redact(err.Error()); msg != err.Error() {
		return &redactedError{err: err, msg: msg}
	}
	return err
}

// quietErr is err with its message scrubbed (minimize.ScrubString): what
// a sync returns becomes its sync/end audit record's reason, stderr and
// the scheduler's log line, and parts of it are the server's (a path, an
// id, a transport's quote of a malformed answer), which may hold a
// telephone number, a record number or a date. Scrubbing finds patterns,
// not names: the server's free text itself (an OperationOutcome's
// diagnostics, a body, a Content-Type's parameters, a header line, a
// query) is never put in a message (TestRemoteTextNeverInMessages).
// errors.Is and errors.As still see the cause.
func quietErr(err error) error {
	if err == nil {
		return nil
	}
	if msg := minimize.ScrubString(err.Error()); msg != err.Error() {
		return &redactedError{err: err, msg: msg}
	}
	return err
}

// quiet is s scrubbed, for a log line or a progress report that holds a
// server's text (quietErr).
func quiet(s string) string { return minimize.ScrubString(s) }

// errMalformedAnswer stands for a transport error that quotes the server's
// answer (Go's HTTP client quotes a malformed status line or header line).
var errMalformedAnswer = errors.New("the answer is not well-formed HTTP (its text is not repeated here)")

// namedCharset is cs, an answer's charset parameter, if it is a name or
// an alias of a charset IANA registers (so that it can be named in a
// message), or "": any other is the server's text.
func namedCharset(cs string) string {
	if _, err := ianaindex.IANA.Encoding(cs); err != nil {
		return ""
	}
	return cs
}

// fhirMediaTypes are the media types of FHIR's formats, which Go's MIME
// table does not list.
var fhirMediaTypes = map[string]bool{
	"application/fhir+json": true, "application/json+fhir": true, "application/fhir+xml": true,
	"application/xml+fhir": true, "application/fhir+ndjson": true, "application/ndjson": true,
	"application/x-ndjson": true,
}

// namedMediaType is mt, a media type from a server's answer or a
// resource, if it is one of FHIR's or one Go's MIME table (and the
// system's) knows a file extension for, so that it can be named in a
// message; "" for any other: its text is the server's ("jane/doe").
func namedMediaType(mt string) string {
	mt = strings.ToLower(strings.TrimSpace(mt))
	if fhirMediaTypes[mt] {
		return mt
	}
	if exts, err := mime.ExtensionsByType(mt); err == nil && len(exts) > 0 {
		return mt
	}
	return ""
}

// orUnnamed is named, or instead when it is "" (a value not named).
func orUnnamed(named, instead string) string {
	if named == "" {
		return instead
	}
	return named
}
