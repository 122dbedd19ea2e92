package main

// Output rules, in one place (after age's cmd/age/tui.go):
//   - data and reports go to stdout; progress, warnings and errors to stderr;
//   - errors are one line, prefixed "custos: ", and the exit code is non-zero;
//   - exit status, one rule per kind of command (exitCode):
//     a check, a command whose answer is a verdict on its input (audit
//     verify, config check, policy test, check and verify; asCheck), exits
//     0 when it passed, 1 only when it found problems (problemsFound) and 2
//     whenever it reached no verdict: bad usage, and also input it could
//     not read (verdictExit), as diff and cmp do; every other command exits
//     0 done, 1 failed (whatever the cause: the message says it) and 2 for
//     bad usage;
//   - progress bars are drawn only when stderr is a terminal, and never
//     with --json (progressTo);
//   - --json switches a command's stdout to one JSON document.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// usageError marks an error in how the command was called (exit 2).
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitError carries a specific exit code with an already-reported failure.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }

// checkAnnotation is the cobra annotation asCheck sets.
const checkAnnotation = "custos.check"

// asCheck marks cmd as a check: its RunE returns problemsFound when the
// check found problems, and any other error means it reached no verdict
// (exit 2, verdictExit, applied by run for every check).
func asCheck(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[checkAnnotation] = "true"
	return cmd
}

func isCheck(cmd *cobra.Command) bool {
	return cmd != nil && cmd.Annotations[checkAnnotation] != ""
}

// problemsFound is a check's verdict that its input is bad (exit 1): err
// says how many problems, each already printed. A check stopped part way
// (interrupted, out of time) reached no verdict: err is returned as it is.
func problemsFound(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return exitError{code: 1, err: err}
}

// verdictExit gives a check's result its exit status: a check that ran and
// found problems has already returned problemsFound; any other error means
// no verdict was reached (bad flags, unreadable input, no usable key, a
// log that cannot be opened) and exits 2, so that a script can tell "the
// input is bad" from "nothing was checked".
func verdictExit(err error) error {
	var ee exitError
	var ue usageError
	if err == nil || errors.As(err, &ee) || errors.As(err, &ue) {
		return err
	}
	return exitError{code: 2, err: err}
}

// exitCode is the exit status of cmd's result err (verdictExit already
// applied to a check's).
func exitCode(err error) int {
	var ue usageError
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return 2
	case errors.As(err, &ee):
		return ee.code
	default:
		return 1
	}
}

func printErr(w io.Writer, err error) {
	fmt.Fprintf(w, "custos: %v\n", err)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressTo is where a command draws its progress: stderr, or nowhere
// with --json (a program asked for the output, whatever terminal it runs
// in).
func progressTo(cmd interface{ ErrOrStderr() io.Writer }, asJSON bool) io.Writer {
	if asJSON {
		return io.Discard
	}
	return cmd.ErrOrStderr()
}

// progress returns a callback drawing a progress bar on w when w is a
// terminal, and a no-op otherwise, plus a function to finish the bar.
// showCount adds "(done/total)" for work counted in units a user knows
// (patients); import reports internal steps, so it shows a percentage only.
func progress(w io.Writer, what string, showCount bool) (func(done, total int), func()) {
	if !isTerminal(w) {
		return func(int, int) {}, func() {}
	}
	tick, done := progressBar(w, what, showCount, false)
	return func(d, t int) { tick(int64(d), int64(t)) }, done
}

// bytesProgress is progress for work counted in bytes (a bundle verified
// offline): a bar with sizes on w when w is a terminal, nil otherwise
// (nothing asked, nothing drawn), plus a function to finish the bar.
func bytesProgress(w io.Writer, what string) (func(done, total int64), func()) {
	if !isTerminal(w) {
		return nil, func() {}
	}
	return progressBar(w, what, true, true)
}

// progressBar draws a bar on w, terminal or not: showCount as progress's,
// inBytes to show done and total as sizes (kB, MB). A total that changes
// (work that grows while it runs: a verification walking a log being
// appended to) moves the bar's end.
func progressBar(w io.Writer, what string, showCount, inBytes bool) (func(done, total int64), func()) {
	var bar *progressbar.ProgressBar
	var end int64 // the bar's total
	return func(done, total int64) {
			if bar == nil {
				opts := []progressbar.Option{
					progressbar.OptionSetWriter(w),
					progressbar.OptionSetDescription(what),
					progressbar.OptionSetWidth(30),
					progressbar.OptionThrottle(100 * time.Millisecond),
					progressbar.OptionClearOnFinish(),
					// Drawn from the start: work that ends within the
					// throttle would otherwise never show it was running.
					progressbar.OptionSetRenderBlankState(true),
				}
				if inBytes {
					opts = append(opts, progressbar.OptionShowBytes(true))
				}
				if showCount || total <= 0 {
					opts = append(opts, progressbar.OptionShowCount())
				}
				if total <= 0 {
					total = -1 // a stream of unknown length: a spinner with the count
				}
				end = total
				bar = progressbar.NewOptions64(total, opts...)
			}
			if total > 0 && total != end {
				end = total
				bar.ChangeMax64(total)
			}
			_ = bar.Set64(done)
		}, func() {
			if bar != nil {
				_ = bar.Finish()
			}
		}
}
