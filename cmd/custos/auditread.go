package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/custos-mcp/custos/app/admin"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/checkpoint"
)

// auditReader runs one auditor operation on the audit log of a data
// directory and hands its output to consume: an *admin.Client (a server
// runs on the directory) or an access.Local (this process holds the log's
// lock). Both run the same access.Service operation, which appends the
// access record before it reads anything.
type auditReader interface {
	Do(ctx context.Context, op access.Op, req any, consume func(io.Reader) error) (access.Result, error)
	// DoProgress is Do that also hands the operation's progress reports
	// to progress (nil: Do); the output is the same.
	DoProgress(ctx context.Context, op access.Op, req any, consume func(io.Reader) error, progress func(access.Progress)) (access.Result, error)
}

// auditProgress is the progress of a long auditor operation (verify,
// export, backup): a bar on stderr, drawn as progress draws its bars, from
// the reports the operation sends through either transport. When no bar
// is drawn (stderr is not a terminal, or --json) the callback is nil, so
// the command does not ask for progress at all: the request and the
// output are exactly those of a command without it. finish clears the
// bar; call it before printing to stderr.
func auditProgress(cmd *cobra.Command, asJSON bool, what string) (progress func(access.Progress), finish func()) {
	w := progressTo(cmd, asJSON)
	if !isTerminal(w) {
		return nil, func() {}
	}
	var tick func(done, total int64)
	end := func() {}
	return func(p access.Progress) {
		if tick == nil { // the unit is known with the first report
			tick, end = progressBar(w, what, true, p.Unit == access.UnitBytes)
		}
		tick(p.Done, p.Total)
	}, func() { end() }
}

// withAuditReader finds the way to d's audit log and calls fn with it
// (docs/audit-access.md, decision 3):
//
//   - a server answers on D/admin.sock: fn's operations run there;
//   - otherwise this process opens D/audit.db read-write under its
//     exclusive lock (the server is not running) and runs them itself;
//   - the lock is held (waited for up to audit.DefaultTimeout): the socket
//     is tried once more, since a server that was starting may answer now
//     (and what answers is judged as on the first try: dialRefused);
//   - the socket exists, nobody answers and the lock is held: a server is
//     starting or stopping, and withAuditReader fails saying so. It never
//     deletes the socket or breaks the lock.
//
// Every auditor command (audit verify, export, report, prove, hash, policy
// impact, compliance report) reads the log only through it.
func withAuditReader(cmd *cobra.Command, d dataDir, fn func(auditReader) error) error {
	ctx := cmd.Context()
	if st, err := os.Stat(string(d)); err == nil && !st.IsDir() {
		return usagef("--data-dir %s is a file, not a directory", d)
	}
	sock := admin.Path(string(d))
	c, err := admin.Dial(ctx, sock)
	if err == nil {
		defer c.Close()
		return fn(c)
	}
	if err := dialRefused(err, sock); err != nil {
		return err
	}
	silent := errors.Is(err, admin.ErrNoSocket)
	if err := existingFile(d.audit(), "audit log"); err != nil {
		return err
	}
	log, err := audit.Open(d.audit(), audit.Options{Node: cliNode(), Logger: quietLogger(cmd)})
	if errors.Is(err, audit.ErrLocked) {
		// The holder may be a server that was starting (it takes the lock
		// before it makes its socket, replacing a crashed one's): during
		// the wait it may have come up. Ask once more.
		c, derr := admin.Dial(ctx, sock)
		if derr == nil {
			defer c.Close()
			return fn(c)
		}
		// Something answers now but may not be used (another
		// directory's server, this account refused): say that, not
		// that nobody answers.
		if derr := dialRefused(derr, sock); derr != nil {
			return derr
		}
	}
	if err != nil {
		if errors.Is(err, audit.ErrLocked) && !silent {
			return fmt.Errorf("%w: %s exists but does not answer: a server is starting or stopping on %s; try again in a moment (do not delete the socket)", err, sock, d)
		}
		if errors.Is(err, audit.ErrLocked) {
			// No server answers, so the holder is another auditor command
			// on the stopped server's files, a server still starting (its
			// socket comes last) or one stopping (its socket goes first).
			// lockHint's "work on a copy" is wrong here: a copy of a log
			// being written can be torn.
			return fmt.Errorf("%w: no server answers on %s, but another process holds %s: another auditor command working on the stopped server's files, or a server starting or stopping (its socket is made last and removed first, before it finishes the requests in flight; retry when it is done), or a server whose admin socket was removed (restart it)", err, sock, d.audit())
		}
		if errors.Is(err, os.ErrPermission) {
			if f, oerr := os.OpenFile(d.audit(), os.O_RDWR, 0); oerr == nil {
				// This account may write the log: what refused it is
				// another file of the log (its lock file, left by
				// another account), which err names with its owner.
				f.Close()
				return err
			}
			return fmt.Errorf("this account (uid %d) cannot open %s for writing (permission denied): with no server running, an auditor command appends its own access record to the log, so it must run as the data directory's owner or root (docs/audit-access.md, decision 1)", os.Geteuid(), d.audit())
		}
		return lockHint(err)
	}
	defer log.Close()
	logger := slog.New(dropMessage{quietLogger(cmd).Handler(), access.MsgFailed})
	return fn(access.Local{Service: access.New(log, nil, string(d), logger), Caller: access.Self()})
}

// dialRefused is the error withAuditReader returns for admin.Dial's err:
// nil when no server answers (admin.ErrNoSocket, admin.ErrNoAnswer), so
// that the caller may try the log's lock; otherwise what Dial found (a
// server of another directory, this account refused), which must not be
// passed over for the files.
func dialRefused(err error, sock string) error {
	if errors.Is(err, os.ErrPermission) {
		// Another account than the server's (or one the data directory's
		// modes keep out): the kernel refused the connection, which read
		// as "dial unix …: connect: permission denied" inside an HTTP GET.
		return fmt.Errorf("this account (uid %d) may not use the admin socket %s (permission denied): auditor commands reach a running server as the account that runs it, or root (docs/audit-access.md, decision 2)", os.Geteuid(), sock)
	}
	if !errors.Is(err, admin.ErrNoSocket) && !errors.Is(err, admin.ErrNoAnswer) {
		return err
	}
	return nil
}

// dropMessage is a slog.Handler that passes on every record but those with
// message msg. In this process the access service's warning that a request
// failed repeats the error the command prints itself (tui.go: an error is
// one line); its other warnings pass.
type dropMessage struct {
	slog.Handler
	msg string
}

func (h dropMessage) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h dropMessage) WithAttrs(as []slog.Attr) slog.Handler {
	return dropMessage{h.Handler.WithAttrs(as), h.msg}
}

func (h dropMessage) WithGroup(name string) slog.Handler {
	return dropMessage{h.Handler.WithGroup(name), h.msg}
}

// cliNode is the node name of access records a command appends itself: the
// host name, as serve's default.
func cliNode() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "custos"
}

// accessFlags are --by and --purpose, which every auditor command takes.
type accessFlags struct{ by, purpose string }

func (a *accessFlags) register(f *pflag.FlagSet, purposeHelp string) {
	f.StringVar(&a.by, "by", "", "who the operator acts for (recorded in the access record; 1-128 of A-Z a-z 0-9 . _ @ + : -, e.g. j.doe or ticket:SEC-42)")
	f.StringVar(&a.purpose, "purpose", "", purposeHelp)
}

func (a *accessFlags) ask() access.Ask { return access.Ask{By: a.by, Purpose: a.purpose} }

// check refuses a missing or unknown --purpose, or a malformed --by, of
// the command that records action, as bad usage (exit 2) before anything
// is opened: the log's writer would refuse them too, but only once the
// log is open, and opening it for writing already changes the file.
func (a *accessFlags) check(action string) error { return checkAsk(a.ask(), action) }

// checkAsk is accessFlags.check for an access.Ask already made.
func checkAsk(ask access.Ask, action string) error {
	if err := ask.Validate(action); err != nil {
		return usageError{errors.New(badRequestText(err))}
	}
	return nil
}

// badRequestText is the message of err, an access.ErrBadRequest, without
// the sentinel's prefix: what the command was asked that is wrong.
func badRequestText(err error) string {
	return strings.TrimPrefix(err.Error(), access.ErrBadRequest.Error()+": ")
}

// purposeRequired is the --purpose help of commands that output record
// contents.
const purposeRequired = "purpose of use, an HL7 ActReason code (required; e.g. HOPERAT, or PATRQT for a patient's accounting request)"

// decodeInto returns a consume function that decodes one JSON document
// into v.
func decodeInto(v any) func(io.Reader) error {
	return func(r io.Reader) error { return json.NewDecoder(r).Decode(v) }
}

// readAnchorFile reads the checkpoints.jsonl of anchor directory dir: a
// missing directory is an error (an unmounted anchor must not look empty),
// a missing file means no checkpoint yet.
func readAnchorFile(dir string) ([]byte, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("anchor directory: %w", err)
	}
	b, err := os.ReadFile((&checkpoint.Anchor{Dir: dir}).Path())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}
