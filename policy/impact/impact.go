package impact

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"slices"
	"strings"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store"
)

// Decider is the candidate policy (a *policy.Engine). A non-nil error means
// it could not decide; the server would deny.
type Decider interface {
	Decide(ctx context.Context, in policy.Input) (policy.Decision, error)
}

// InputSource is the audit log being replayed (*audit.Log implements it; a
// log opened read-only is enough).
type InputSource interface {
	// Head returns the seq of the last record.
	Head() (seq uint64, hash string)
	// Records calls fn with the canonical bytes of records from..to, in order.
	Records(ctx context.Context, from, to uint64, fn func(seq uint64, canonical []byte) error) error
	// Inputs calls fn with the stored decision inputs of records from..to,
	// in order, skipping records without one.
	Inputs(ctx context.Context, from, to uint64, fn func(seq uint64, input []byte) error) error
}

// Options selects what is replayed. The zero value replays everything.
type Options struct {
	// Since and Until bound the record times replayed: [Since, Until). Zero
	// means unbounded.
	Since, Until time.Time
	// Progress, if not nil, is called with the number of records examined
	// so far and the total (the head), after each window of records; when
	// Replay succeeds its last call has done == total, also when it stopped
	// early at Until.
	Progress func(done, total int)
}

// Change classifies one replayed decision.
type Change string

// Changes, from the point of view of the candidate.
const (
	ChangeAllowToDeny Change = "allow_to_deny"       // allowed before, the candidate denies
	ChangeDenyToAllow Change = "deny_to_allow"       // denied (or failed) before, the candidate allows
	ChangeObligations Change = "obligations_changed" // allowed by both, with different obligations
	ChangeNone        Change = "unchanged"           // same outcome and, when allowed, same obligations
	ChangeReplayError Change = "replay_error"        // the candidate could not decide: a denial
)

// Outcomes as the report states them.
const (
	Allow = "allow"
	Deny  = "deny"
)

// Row is one replayed decision whose outcome or obligations would change
// (or which the candidate could not decide).
type Row struct {
	Seq               uint64    `json:"seq"`
	Time              time.Time `json:"time"`
	User              string    `json:"user"`
	PurposeOfUse      string    `json:"purpose_of_use"`
	Action            string    `json:"action"`
	ResourceType      string    `json:"resource_type"` // "" for templates
	Change            Change    `json:"change"`
	Before            string    `json:"before"` // Allow or Deny (a recorded error is a denial)
	After             string    `json:"after"`
	ReasonsBefore     []string  `json:"reasons_before"`
	ReasonsAfter      []string  `json:"reasons_after"`
	ObligationsBefore []string  `json:"obligations_before"` // compact form, "remove:/name"
	ObligationsAfter  []string  `json:"obligations_after"`
	Error             string    `json:"error,omitempty"` // the candidate's error (no input values)
}

// Counts are the number of replayed decisions in each class.
type Counts struct {
	AllowToDeny        int `json:"allow_to_deny"`
	DenyToAllow        int `json:"deny_to_allow"`
	ObligationsChanged int `json:"obligations_changed"`
	Unchanged          int `json:"unchanged"`
	ReplayError        int `json:"replay_error"`
}

// Report is the outcome of Replay.
type Report struct {
	Since    time.Time `json:"since,omitzero"`
	Until    time.Time `json:"until,omitzero"`
	Examined uint64    `json:"examined"` // records in the log up to the head at the start
	InRange  int       `json:"in_range"` // records within [Since, Until)
	Replayed int       `json:"replayed"` // decisions replayed (records in range with a stored input)
	Skipped  int       `json:"skipped"`  // records in range without a stored input (lists, refusals, ...)
	Counts   Counts    `json:"counts"`
	Rows     []Row     `json:"rows"` // every replayed decision that is not unchanged, in seq order
}

// Changed reports whether any replayed decision would change or fail.
func (r *Report) Changed() bool { return len(r.Rows) > 0 }

// window is how many records Replay reads per step: the recorded side of a
// window is kept in memory while its inputs are replayed.
const window = 1024

// recorded is what Replay keeps of a record while its input is replayed.
type recorded struct {
	time        time.Time
	user        string
	purpose     string
	action      string
	outcome     string
	reason      string
	obligations []string
}

// Replay re-decides, with candidate, every audited decision in range whose
// input was stored, and compares the result with the recorded one. It reads
// the log up to its head at the start.
func Replay(ctx context.Context, candidate Decider, src InputSource, opts Options) (Report, error) {
	rep := Report{Since: opts.Since, Until: opts.Until, Rows: []Row{}}
	head, _ := src.Head()
	rep.Examined = head
	progress := opts.Progress
	if progress == nil {
		progress = func(int, int) {}
	}
	var done uint64 // records reported examined
	for from := uint64(1); from <= head; from += window {
		to := min(head, from+window-1)
		recs := make(map[uint64]recorded, window)
		past := false // records are in time order: stop after Until
		err := src.Records(ctx, from, to, func(seq uint64, canonical []byte) error {
			r, err := audit.Decode(canonical)
			if err != nil {
				return fmt.Errorf("%w: record %d does not decode: %w", ErrRecord, seq, err)
			}
			if !opts.Until.IsZero() && !r.Time.Before(opts.Until) {
				past = true
				return nil
			}
			if !opts.Since.IsZero() && r.Time.Before(opts.Since) {
				return nil
			}
			recs[seq] = recorded{
				time: r.Time, user: r.Principal.Sub, purpose: r.PurposeOfUse, action: r.Action,
				outcome: r.Outcome, reason: r.Reason, obligations: r.Obligations,
			}
			return nil
		})
		if err != nil {
			return rep, err
		}
		rep.InRange += len(recs)
		err = src.Inputs(ctx, from, to, func(seq uint64, raw []byte) error {
			rec, ok := recs[seq]
			if !ok {
				return nil // out of the time range
			}
			var in policy.Input
			if err := json.Unmarshal(raw, &in); err != nil {
				return fmt.Errorf("%w: the input of record %d is not a policy input", ErrRecord, seq)
			}
			rep.Replayed++
			row := compare(ctx, candidate, seq, rec, in)
			switch row.Change {
			case ChangeAllowToDeny:
				rep.Counts.AllowToDeny++
			case ChangeDenyToAllow:
				rep.Counts.DenyToAllow++
			case ChangeObligations:
				rep.Counts.ObligationsChanged++
			case ChangeReplayError:
				rep.Counts.ReplayError++
			default:
				rep.Counts.Unchanged++
				return nil
			}
			rep.Rows = append(rep.Rows, row)
			return nil
		})
		if err != nil {
			return rep, err
		}
		progress(int(to), int(head))
		done = to
		if past {
			break
		}
	}
	rep.Skipped = rep.InRange - rep.Replayed
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	if done < head {
		// Stopped at Until: the records after it are all past it.
		progress(int(head), int(head))
	}
	return rep, nil
}

// compare replays in with candidate and classifies the result against rec.
func compare(ctx context.Context, candidate Decider, seq uint64, rec recorded, in policy.Input) Row {
	row := Row{
		Seq: seq, Time: rec.time.UTC(), User: rec.user, PurposeOfUse: rec.purpose, Action: rec.action,
		Before:            Deny,
		ReasonsBefore:     splitReasons(rec.reason),
		ObligationsBefore: nonNil(rec.obligations),
		ReasonsAfter:      []string{},
		ObligationsAfter:  []string{},
	}
	if in.Resource != nil {
		row.ResourceType = in.Resource.Type
	}
	if rec.outcome == audit.OutcomeAllow {
		row.Before = Allow
	}
	d, err := candidate.Decide(ctx, in)
	if err != nil {
		row.After, row.Change, row.Error = Deny, ChangeReplayError, err.Error()
		row.ReasonsAfter = nonNil(d.Reasons)
		return row
	}
	if in.Resource != nil {
		// As the server enforces it: the tenant boundary, and binary
		// released whole or not at all.
		d = policy.Enforce(d, in.Principal.Tenant, in.Resource.Tenant, binary(in.Resource.URI))
	}
	allow := d.Allow
	row.ReasonsAfter = nonNil(slices.Clone(d.Reasons))
	if slices.Contains(row.ReasonsBefore, "not_found") {
		// The resource did not exist: not found whatever the policy says.
		allow = false
		row.ReasonsAfter = []string{"not_found"}
	}
	if allow {
		row.After = Allow
		for _, o := range d.Obligations {
			row.ObligationsAfter = append(row.ObligationsAfter, o.String())
		}
	} else {
		row.After = Deny
	}
	switch {
	case row.Before == Allow && row.After == Deny:
		row.Change = ChangeAllowToDeny
	case row.Before == Deny && row.After == Allow:
		row.Change = ChangeDenyToAllow
	case row.Before == Allow && !sameSet(row.ObligationsBefore, row.ObligationsAfter):
		row.Change = ChangeObligations
	default:
		row.Change = ChangeNone
	}
	return row
}

// splitReasons splits a record's reason ("a,b") into codes.
func splitReasons(reason string) []string {
	if reason == "" {
		return []string{}
	}
	return strings.Split(reason, ",")
}

// sameSet reports whether a and b hold the same obligations, in any order:
// minimization applies a set of obligations.
func sameSet(a, b []string) bool {
	as, bs := slices.Clone(a), slices.Clone(b)
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(slices.Compact(as), slices.Compact(bs))
}

// binary reports whether the resource named by uri is served as a binary
// blob (by its scheme's MIME type: neither text/* nor JSON), as the server
// decides it. The patient segment of a recorded uri is a pseudonym, so the
// uri is not parsed; only its scheme is read.
func binary(uri string) bool {
	scheme, _, ok := strings.Cut(uri, "://")
	if !ok {
		return false
	}
	mt := store.URI{Scheme: scheme}.MIMEType()
	if _, _, err := mime.ParseMediaType(mt); err != nil {
		return false // unknown scheme: the server never served it
	}
	return minimize.IsBinary(mt)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
