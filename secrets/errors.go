package secrets

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	vault "github.com/hashicorp/vault/api"
)

// ErrUnavailable is returned when a key cannot be supplied (the source is
// unreachable or the key is missing). Callers must fail closed: release
// nothing that the key would have protected.
var ErrUnavailable = errors.New("secrets: key unavailable")

// ErrBadConfig is returned when a provider's configuration is unusable
// (missing address or credentials, malformed paths). Nothing was contacted.
var ErrBadConfig = errors.New("secrets: bad configuration")

// ErrMissing is returned when a key custos needs is absent from Vault or is
// not what custos requires (wrong type, exportable, malformed value). The
// error names the Vault path and how an administrator creates it.
var ErrMissing = errors.New("secrets: key missing or unusable")

// ErrPermission is returned when Vault denies a call (HTTP 403). The error
// names the path and the ACL rule of the custos-server policy that grants it.
var ErrPermission = errors.New("secrets: permission denied by Vault")

// ErrStale is returned when the keys held have not been refreshed from
// Vault within the staleness limit. Callers must refuse the request: an
// outage never falls back to older, plaintext or dev keys. It is wrapped by
// *StaleError, which also matches ErrUnavailable.
var ErrStale = errors.New("secrets: keys are stale")

// StaleError is the evidence of ErrStale: how old the keys are, the limit,
// and the last refresh error (which never holds a secret). Kind is the
// cause's class in a fixed phrase naming no host, path or Vault message
// ("Vault is sealed", "custos cannot log in to Vault (AppRole)", ...): what
// /readyz may show to whoever can reach it.
type StaleError struct {
	Age, Limit time.Duration
	Cause      string
	Kind       string
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("secrets: keys are stale: last refreshed from Vault %s ago, limit %s (%s)",
		e.Age.Round(time.Second), e.Limit, e.Cause)
}

// Is makes a *StaleError match ErrStale and ErrUnavailable.
func (e *StaleError) Is(target error) bool { return target == ErrStale || target == ErrUnavailable }

// vaultErr turns a Vault client error into one of this package's errors:
// 403 → ErrPermission with the ACL rule that grants the call (or, for a
// token Vault no longer accepts, saying so); 404 →
// ErrMissing; anything else (network, timeout, 5xx, sealed) →
// ErrUnavailable. hint, when not empty, is added for 400/401 responses.
// The Vault client's errors carry the URL and Vault's messages, never the
// token. The client's error is kept (vaultCause) for failureKind to
// classify by its type, but is not unwrapped: what callers can match
// (errors.Is, errors.As) is this package's vocabulary only, as before.
func vaultErr(op, api string, err error, hint string) error {
	return vaultCause{vaultErrOf(op, api, err, hint), err}
}

// vaultErrOf is vaultErr's error without the client's error kept.
func vaultErrOf(op, api string, err error, hint string) error {
	var re *vault.ResponseError
	if errors.As(err, &re) {
		switch re.StatusCode {
		case http.StatusForbidden:
			if strings.Contains(strings.Join(re.Errors, "\n"), "invalid token") {
				// Vault answers 403 "permission denied" with "invalid
				// token" for a token it no longer knows: not a policy
				// problem, so no ACL rule to name.
				return tokenRejected{fmt.Errorf("%w: %s %s: Vault no longer accepts the token (expired or revoked); with AppRole custos logs in again by itself, "+
					"a token given in $VAULT_TOKEN must be replaced", ErrPermission, op, api)}
			}
			capability := "update"
			if op == "read" {
				capability = "read"
			}
			if hint != "" {
				return fmt.Errorf("%w: %s %s: %s", ErrPermission, op, api, hint)
			}
			return ruleErr(op, api, capability)
		case http.StatusNotFound:
			return fmt.Errorf("%w: %s %s: not found (docs/vault.md)", ErrMissing, op, api)
		case http.StatusBadRequest, http.StatusUnauthorized:
			if hint != "" {
				return fmt.Errorf("%w: %s %s: %s (HTTP %d)", ErrPermission, op, api, hint, re.StatusCode)
			}
		}
		return fmt.Errorf("%w: %s %s: Vault answered HTTP %d: %s", ErrUnavailable, op, api, re.StatusCode, strings.Join(re.Errors, "; "))
	}
	return fmt.Errorf("%w: %s %s: %v", ErrUnavailable, op, api, err)
}

// vaultCause is err, the error vaultErr made of a Vault client's error,
// with cause, that client error, kept beside it: its message and its
// chain are err's; failureKind finds cause with errors.As and looks at
// its type (the HTTP status of a *vault.ResponseError, a TLS or x509
// error, a network error), which err's message only describes.
type vaultCause struct{ err, cause error }

func (e vaultCause) Error() string { return e.err.Error() }
func (e vaultCause) Unwrap() error { return e.err }

// ruleErr is the error of a call the token's policies do not allow: it
// names the rule of policy custos-server that grants it.
func ruleErr(op, api, capability string) error {
	return fmt.Errorf("%w: %s %s: the token's policies do not allow it; custos needs the rule "+
		"path %q { capabilities = [%q] } of policy %q (docs/vault.md)", ErrPermission, op, api, api, capability, PolicyName)
}

// tokenRejected marks an ErrPermission that Vault answered because it no
// longer knows the token (revoked, expired): logging in again cures it; a
// policy that denies a call is not cured by a new token of the same role.
type tokenRejected struct{ error }

func (e tokenRejected) Unwrap() error { return e.error }

// isTokenRejected reports whether err is Vault no longer accepting the token.
func isTokenRejected(err error) bool {
	var tr tokenRejected
	return errors.As(err, &tr)
}
