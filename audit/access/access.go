package access

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/backup"
	"github.com/custos-mcp/custos/minimize"
)

// Actions of access records: what was read, one per operation.
const (
	ActionVerify           = "audit/verify"
	ActionExport           = "audit/export"
	ActionReport           = "audit/report"
	ActionProve            = "audit/prove"
	ActionHash             = "audit/hash"
	ActionPolicyImpact     = "policy/impact"
	ActionComplianceReport = "compliance/report"
	ActionBackup           = backup.ActionBackup
)

// DefaultVerifyPurpose is the purpose of use of a verification that names
// none: integrity checking is health care operations. Every operation that
// outputs record contents requires the caller to name its purpose.
const DefaultVerifyPurpose = "HOPERAT"

// ClientID is the principal's client_id in every access record.
const ClientID = "custos-cli"

// The package's error vocabulary. Transports map each to a stable code
// (Code); callers branch with errors.Is.
var (
	// ErrBadRequest: the request is malformed or incomplete (unknown
	// operation or field, missing or malformed purpose, bad range). Nothing
	// was read; fix the request. What the request alone shows to be wrong,
	// and a seq or seq range past the record its access record would be
	// (the head's number, known before appending), is refused before
	// anything is recorded; what only the records can show (a time range
	// the log holds no record of) is refused after the access record,
	// which stays: the caller did look (docs/audit-access.md).
	ErrBadRequest = errors.New("access: bad request")
	// ErrNotRecorded: the access record could not be made durable, so
	// nothing was read (fail closed). Retry once the audit log accepts
	// appends again.
	ErrNotRecorded = errors.New("access: the access record could not be written; nothing was read")
	// ErrNotFound: what the request names does not exist (a seq beyond the
	// view, no checkpoint yet). The access record was written.
	ErrNotFound = errors.New("access: not found")
	// ErrNoRoom: the export bundle being assembled in the data directory
	// (on the audit volume) did not fit: it would have taken the volume
	// into its reserve (Service.LimitSpace), or the volume is full. What
	// was written of it is removed; the access record stays. Free space
	// on the audit volume, or export a shorter range.
	ErrNoRoom = errors.New("access: no room on the audit volume to assemble the bundle")
)

// Code is the stable error code of err for transports: "bad_request",
// "not_recorded", "not_found", "no_checkpoint", "checkpoint_mismatch",
// "not_empty", "no_room", "export_damaged" (an export written whole whose
// records do not all verify: audit.ErrExportDamaged), "corrupt" or
// "internal".
func Code(err error) string {
	switch {
	case errors.Is(err, ErrBadRequest), errors.Is(err, bundle.ErrBadRange):
		return "bad_request"
	case errors.Is(err, ErrNotRecorded):
		return "not_recorded"
	case errors.Is(err, ErrNotFound), errors.Is(err, audit.ErrOutOfRange):
		return "not_found"
	case errors.Is(err, errNoCheckpoint):
		return "no_checkpoint"
	case errors.Is(err, errCheckpointMismatch):
		return "checkpoint_mismatch"
	case errors.Is(err, errNotEmpty):
		return "not_empty"
	case errors.Is(err, ErrNoRoom):
		return "no_room"
	case errors.Is(err, audit.ErrExportDamaged):
		// Before corrupt, which it also is: the output is complete.
		return "export_damaged"
	case errors.Is(err, audit.ErrCorrupt):
		return "corrupt"
	}
	return "internal"
}

// Ask is what every request carries about the access: the purpose of use
// (an HL7 ActReason code, required except for verify), an optional --by
// (the person the operator acts for, a claim recorded as given), and an
// optional Action replacing the operation's own among those it allows
// (compliance/report for export bundles and verification).
type Ask struct {
	Action  string `json:"action,omitempty"`
	By      string `json:"by,omitempty"`
	Purpose string `json:"purpose,omitempty"`
}

// Caller is who asked, as the transport established it: Account is the OS
// account ("os:uid=1000(alice)") and Source how it reached the writer
// ("admin.sock", "local"). It is never read from a request.
type Caller struct {
	Account string
	Source  string
}

// Account renders an OS account as "os:uid=N(name)", or "os:uid=N" when
// the uid has no name on this host.
func Account(uid uint32) string {
	s := "os:uid=" + strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil && u.Username != "" {
		s += "(" + u.Username + ")"
	}
	return s
}

// Self is the Caller of an in-process command: this process's real uid.
func Self() Caller { return Caller{Account: Account(uint32(os.Getuid())), Source: "local"} }

var (
	purposeRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{1,31}$`)
	byRE      = regexp.MustCompile(`^[A-Za-z0-9._@+:-]{1,128}$`)
	lookupRE  = regexp.MustCompile(`^hk[0-9]+-[0-9a-f]{32}$`) // audit.Pseudonym
)

// Validate checks a as the operation that records action would (a
// purpose of use, which verify may leave out, and --by), without a log:
// a command calls it before it opens anything, so that bad usage is
// refused with nothing opened or recorded. Its errors wrap ErrBadRequest.
func (a Ask) Validate(action string) error {
	a.Action = ""
	_, err := a.check(action)
	return err
}

// check validates a against the op's default and allowed actions and
// returns the action to record.
func (a *Ask) check(own string, allowed ...string) (string, error) {
	if a.Purpose == "" && own == ActionVerify {
		a.Purpose = DefaultVerifyPurpose
	}
	if a.Purpose == "" {
		return "", fmt.Errorf("%w: a purpose of use is required (--purpose, an HL7 ActReason code such as HOPERAT, or PATRQT for a patient's accounting request)", ErrBadRequest)
	}
	if !purposeRE.MatchString(a.Purpose) {
		return "", fmt.Errorf("%w: purpose of use must be an HL7 ActReason code (A-Z, 0-9, _), e.g. HOPERAT", ErrBadRequest)
	}
	if !minimize.IsActReasonCode(a.Purpose) {
		// Recorded for good in the access record: a typo (HOPRAT) would
		// stand there as a purpose nobody has.
		return "", fmt.Errorf("%w: purpose of use %s is not an HL7 v3 ActReason code; e.g. HOPERAT (operations), HLEGAL (legal), PATRQT (a patient's request), HSYSADMIN", ErrBadRequest, a.Purpose)
	}
	if a.By != "" && !byRE.MatchString(a.By) {
		return "", fmt.Errorf("%w: --by must be 1-128 of A-Z a-z 0-9 . _ @ + : -", ErrBadRequest)
	}
	if a.Action == "" || a.Action == own {
		return own, nil
	}
	if !slices.Contains(allowed, a.Action) {
		return "", fmt.Errorf("%w: action %q is not one this operation records", ErrBadRequest, a.Action)
	}
	return a.Action, nil
}

// subject builds an access record's reason: "key=value" pairs separated by
// spaces, values quoted when they hold a space, a quote or '='.
type subject []string

func (s *subject) add(key, val string) {
	if val == "" {
		return
	}
	if strings.ContainsAny(val, " \"=\t\n") {
		val = strconv.Quote(val)
	}
	*s = append(*s, key+"="+val)
}

func (s *subject) time(key string, t time.Time) {
	if !t.IsZero() {
		s.add(key, t.UTC().Format(time.RFC3339Nano))
	}
}

func (s *subject) uint(key string, v uint64) {
	if v != 0 {
		s.add(key, strconv.FormatUint(v, 10))
	}
}

func (s *subject) flag(key string, v bool) {
	if v {
		*s = append(*s, key)
	}
}

// Appender appends a record durably (an *audit.Log, or the server's log
// that also notifies its checkpointer).
type Appender interface {
	Append(ctx context.Context, e audit.Entry) (audit.Record, error)
}

// record appends the access record and returns it. Patients are lookup
// values (keyed hashes) and keys the key versions they were computed
// under.
func record(ctx context.Context, app Appender, c Caller, action string, a Ask, reason subject, patients, keys []string) (audit.Record, error) {
	if c.Account == "" {
		return audit.Record{}, fmt.Errorf("%w: the caller is not identified", ErrNotRecorded)
	}
	for _, p := range patients {
		if !lookupRE.MatchString(p) {
			return audit.Record{}, fmt.Errorf("%w: a patient must be given as its lookup value (custos audit hash), not an id", ErrBadRequest)
		}
	}
	if a.By != "" {
		reason = append(subject{"by=" + a.By}, reason...)
	}
	rec, err := app.Append(ctx, audit.Entry{
		Action:       action,
		Outcome:      audit.OutcomeAllow,
		Reason:       strings.Join(reason, " "),
		Principal:    audit.Principal{Sub: c.Account, Roles: []string{}, ClientID: ClientID},
		PurposeOfUse: a.Purpose,
		Source:       c.Source,
		Patients:     patients,
		Keys:         keys,
		// A lookup value computed under a development key is a dev
		// artifact, marked as every record naming such a key is
		// (docs/audit-format.md, section 16).
		Dev: slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, "=dev:") }),
	})
	if err != nil {
		if errors.Is(err, audit.ErrBadEntry) {
			return audit.Record{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
		}
		return audit.Record{}, fmt.Errorf("%w: %v", ErrNotRecorded, err)
	}
	return rec, nil
}

// Error is an operation's error as a transport carries it: its Code and
// message. errors.Is matches it against the sentinel of its code (for
// example ErrNotRecorded, ErrBadRequest, bundle.ErrNoCheckpoint).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Is reports whether target's code is e's (never for "internal").
func (e *Error) Is(target error) bool {
	if _, ok := target.(*Error); ok {
		return false
	}
	c := Code(target)
	return c != "internal" && c == e.Code
}
