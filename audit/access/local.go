package access

import (
	"context"
	"encoding/json"
	"errors"
	"io"
)

// Local runs operations in this process, which holds the audit log's
// exclusive lock (no server runs). It has the same Do as the admin
// socket's client: the request goes through JSON and the output through a
// pipe, so a command behaves the same in both modes.
type Local struct {
	Service *Service
	Caller  Caller
}

// errStopped tells Run that the consumer stopped reading.
var errStopped = errors.New("access: the reader stopped")

// Do runs op with req (marshalled to JSON) and hands its output to
// consume, which must read it to the end. It returns the operation's
// Result, the operation's error if it failed, else consume's.
func (l Local) Do(ctx context.Context, op Op, req any, consume func(io.Reader) error) (Result, error) {
	return l.DoProgress(ctx, op, req, consume, nil)
}

// DoProgress is Do that also reports the operation's progress to progress
// (nil: none; Service.RunProgress), from the goroutine that runs the
// operation, never concurrently with itself, and never after
// DoProgress returns. The output is Do's, byte for byte.
func (l Local) DoProgress(ctx context.Context, op Op, req any, consume func(io.Reader) error, progress func(Progress)) (Result, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Result{}, err
	}
	pr, pw := io.Pipe()
	var res Result
	var runErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, runErr = l.Service.RunProgress(ctx, l.Caller, op, body, pw, progress)
		pw.CloseWithError(runErr)
	}()
	cerr := consume(pr)
	pr.CloseWithError(errStopped)
	<-done
	if runErr != nil && !errors.Is(runErr, errStopped) {
		return res, runErr
	}
	return res, cerr
}

// Discard is a consume function for operations without output (OpHash).
func Discard(r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	return err
}
