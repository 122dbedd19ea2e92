package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// StdioTransport is the transport custos serves MCP on stdio with:
// newline-delimited JSON-RPC (the go-sdk's mcp.IOTransport) read from In and
// written to Out, where each line is judged (judgeLine) before the SDK reads
// it. The SDK's own transport ends the session at the first line it cannot
// decode, and answers an id it would change (1.5 as 1) changed; here such a
// line is answered with a JSON-RPC error that names what is wrong and never
// quotes the line, and the session goes on. The SDK reads only lines that
// decode as JSON-RPC 2.0 messages, each re-framed as one JSON value and a
// newline; a line over MaxLine bytes is skipped to its newline and answered.
type StdioTransport struct {
	In  io.Reader
	Out io.Writer
	// MaxLine bounds one line in bytes; 0 is mcp.DefaultMaxLineLength.
	MaxLine int

	gate *lineGate        // the connection's, once connected
	rev  *sessionRevision // the session's revision, set by ServeStdio before Connect
}

// Connect implements mcp.Transport.
func (t *StdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	max := t.MaxLine
	if max <= 0 {
		max = mcp.DefaultMaxLineLength
	}
	out := &lineWriter{w: t.Out}
	in := newLineGate(t.In, out, max)
	in.rev = t.rev
	t.gate = in
	// The gate has bounded every line already; the SDK's own bound would
	// only count the newline twice.
	return (&mcp.IOTransport{Reader: in, Writer: out, MaxLineLength: -1}).Connect(ctx)
}

// lineWriter serializes whole writes to w: the go-sdk writes each message
// as one Write of its line, and the gate's answers go through the same
// lock, so no two lines interleave.
type lineWriter struct {
	mu    sync.Mutex
	w     io.Writer
	merge map[jsonrpc.ID][]errorResponse // mergeInto
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.merge) > 0 && len(p) > 0 && p[0] == '[' {
		if out, ok := l.merged(p); ok {
			_, err := l.w.Write(out)
			return len(p), err
		}
	}
	return l.w.Write(p)
}

// mergeInto has the answer to the batch whose first call has id hold
// answers too: the answers to the members of the batch that the gate
// refused (judgeLine). The go-sdk writes its answer to a batch as one
// line, an array whose first response is the first call's.
func (l *lineWriter) mergeInto(id jsonrpc.ID, answers []errorResponse) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.merge == nil {
		l.merge = map[jsonrpc.ID][]errorResponse{}
	}
	l.merge[id] = answers
}

// merged is line p, the go-sdk's answer to a batch, with the answers
// mergeInto holds for it appended; ok is false if it holds none.
func (l *lineWriter) merged(p []byte) (out []byte, ok bool) {
	var resps []segjson.RawMessage
	if segjson.Unmarshal(p, &resps) != nil || len(resps) == 0 {
		return nil, false
	}
	first, err := jsonrpc.DecodeMessage(resps[0])
	resp, isResp := first.(*jsonrpc.Response)
	if err != nil || !isResp {
		return nil, false
	}
	answers, ok := l.merge[resp.ID]
	if !ok {
		return nil, false
	}
	delete(l.merge, resp.ID)
	for _, a := range answers {
		if b, err := segjson.Marshal(a); err == nil {
			resps = append(resps, b)
		}
	}
	if out, err = segjson.Marshal(resps); err != nil {
		return nil, false
	}
	return append(out, '\n'), true
}

func (l *lineWriter) Close() error { return nil }

// lineGate is the reader the go-sdk's transport decodes: the lines of in
// that judgeLine passes, each as its JSON value and a newline. The lines it
// refuses are answered on out and dropped.
//
// At the end of input it waits, before the SDK sees the end, until every
// call it passed has been answered (at most stdioDrain; a
// subscriptions/listen call, which ends only when cancelled, is not waited
// for): the SDK cancels the calls still running when its input ends, so a
// client that writes its requests and closes stdin (as the specification's
// shutdown has it) would lose answers to a slow start or a slow commit.
type lineGate struct {
	in      *bufio.Reader
	out     *lineWriter
	max     int
	closer  io.Closer
	pending []byte // what the SDK has yet to read of the passed line
	line    []byte // the line being read
	err     error  // the input's end or failure, returned once pending is read

	drainFor time.Duration // stdioDrain; shorter in tests

	mu   sync.Mutex
	idle *sync.Cond              // signalled when open empties, or drainFor is over
	open map[jsonrpc.ID]struct{} // calls passed and not yet answered
	// rev is the session's revision, which paramsCheckedConn keeps
	// (sessionRevision): JSON-RPC batches are refused unless initialize
	// negotiated a revision before 2025-06-18, which removed them. The
	// SDK's transport would check this itself, but it learns the revision
	// only through a method custos's wrapping connection cannot forward.
	// nil (no such connection): batches are refused.
	rev *sessionRevision
}

// stdioDrain bounds the wait for answers at the end of stdio input.
const stdioDrain = 30 * time.Second

func newLineGate(in io.Reader, out *lineWriter, max int) *lineGate {
	g := &lineGate{in: bufio.NewReaderSize(in, 64<<10), out: out, max: max, drainFor: stdioDrain, open: map[jsonrpc.ID]struct{}{}}
	g.idle = sync.NewCond(&g.mu)
	if c, ok := in.(io.Closer); ok {
		g.closer = c
	}
	return g
}

// notePassed records the calls of a passed line (judgeLine's calls).
func (g *lineGate) notePassed(calls []*jsonrpc.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range calls {
		if c.Method == "subscriptions/listen" {
			continue
		}
		g.open[c.ID] = struct{}{}
	}
}

// noteAnswer marks a call answered (paramsCheckedConn.Write).
func (g *lineGate) noteAnswer(resp *jsonrpc.Response) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.open, resp.ID)
	if len(g.open) == 0 {
		g.idle.Broadcast()
	}
}

func (g *lineGate) batchesAllowed() bool {
	return g.rev != nil && g.rev.batchesAllowed()
}

// drain waits until every call passed has been answered, or g.drainFor.
func (g *lineGate) drain() {
	expired := false
	t := time.AfterFunc(g.drainFor, func() {
		g.mu.Lock()
		expired = true
		g.idle.Broadcast()
		g.mu.Unlock()
	})
	defer t.Stop()
	g.mu.Lock()
	for len(g.open) > 0 && !expired {
		g.idle.Wait()
	}
	g.mu.Unlock()
}

func (g *lineGate) Close() error {
	if g.closer != nil {
		return g.closer.Close()
	}
	return nil
}

func (g *lineGate) Read(p []byte) (int, error) {
	for len(g.pending) == 0 {
		if g.err != nil {
			if errors.Is(g.err, io.EOF) {
				g.drain()
			}
			return 0, g.err
		}
		line, tooLong, err := g.readLine()
		g.err = err
		if tooLong {
			if err := g.answer(errorResponse{"2.0", nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: fmt.Sprintf("invalid request: a line over %d bytes was skipped", g.max)}}); err != nil {
				return 0, err
			}
			continue
		}
		pass, calls, answer, merge := judgeLine(line, g.batchesAllowed())
		if answer != nil {
			if err := g.answer(answer); err != nil {
				return 0, err
			}
		}
		if pass != nil {
			if len(merge) > 0 {
				g.out.mergeInto(calls[0].ID, merge)
			}
			g.notePassed(calls)
			g.pending = append(pass, '\n')
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

// readLine reads the next line without its newline. A line longer than
// g.max is read to its end and dropped (tooLong). err is the input's end or
// failure; a last line without a newline comes with it.
func (g *lineGate) readLine() (line []byte, tooLong bool, err error) {
	g.line = g.line[:0]
	for {
		chunk, err := g.in.ReadSlice('\n')
		if !tooLong {
			if len(g.line)+len(bytes.TrimSuffix(chunk, []byte{'\n'})) > g.max { // the newline does not count
				tooLong, g.line = true, g.line[:0]
			} else {
				g.line = append(g.line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(g.line, []byte{'\n'}), tooLong, err
	}
}

// answer writes one refusal as a line of its own (an errorResponse writes
// a nil id as null, as JSON-RPC 2.0 asks of an id that could not be read;
// the go-sdk's encoder would leave the id out).
func (g *lineGate) answer(v any) error {
	b, err := segjson.Marshal(v)
	if err != nil {
		return err
	}
	_, err = g.out.Write(append(b, '\n'))
	return err
}

// judgeLine judges one line of stdio input. It returns the line's JSON
// value for the go-sdk to read, with the calls it holds, and the answer to
// write at once (an errorResponse, or the answers to a batch's refused
// members), or neither for a blank line. The SDK reads a line only if it
// would read it without quoting it or ending the session: one JSON-RPC 2.0
// message, or (if batches are allowed) the members of a batch that
// planBatch passes, with no message of the batch carrying a _meta protocol
// version (errStdioBatchMeta). A batch of which members are refused and
// calls are passed is passed with the refused members' answers in merge,
// which the SDK's answer to the batch is to hold (lineWriter.Write); one
// of which no call is passed is answered at once, beside what it passes.
// Params the SDK could not decode are answered after it decoded a single
// message (paramsCheckedConn); in a batch, planBatch answers them.
func judgeLine(line []byte, batches bool) (pass []byte, calls []*jsonrpc.Request, answer any, merge []errorResponse) {
	t := bytes.Trim(line, " \t\r\n")
	if len(t) == 0 {
		return nil, nil, nil, nil
	}
	refuse := func(jerr *jsonrpc.Error) ([]byte, []*jsonrpc.Request, any, []errorResponse) {
		return nil, nil, errorResponse{"2.0", nil, jerr}, nil
	}
	if !segjson.Valid(t) {
		return refuse(&jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "parse error: the line is not one valid JSON value"})
	}
	switch t[0] {
	case '{':
		msg, err := jsonrpc.DecodeMessage(t)
		if err != nil {
			return refuse(errNotJSONRPC)
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			if !exactID(t) {
				return refuse(errInexactID)
			}
			calls = append(calls, req)
		} else if ok && nullID(t) {
			return refuse(errNullID)
		}
		return t, calls, nil, nil
	case '[':
		m := newBodyMemo(t) // one decoding of the batch for the checks below
		if jerr := envelopeError(m); jerr != nil {
			return refuse(jerr) // an empty batch
		}
		plan := m.plan()
		if plan == nil {
			return refuse(errNotJSONRPC)
		}
		if !batches {
			return refuse(errNoBatches)
		}
		if batchMetaVersion(m) {
			return refuse(errStdioBatchMeta)
		}
		for _, msg := range plan.items {
			if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
				calls = append(calls, req)
			}
		}
		if len(plan.pass) > 0 {
			pass = splitNotifications(plan.body(), plan.pass, plan.items)
		}
		if len(plan.answers) > 0 && len(calls) == 0 {
			return pass, nil, plan.answers, nil
		}
		return pass, calls, nil, plan.answers
	}
	return refuse(errNotJSONRPC)
}

// splitNotifications is batch t (of raws, decoded as items) as the go-sdk
// reads it: its notifications each a JSON value of its own, those before
// its first other message ahead of the batch of its other messages (the
// calls, and any responses), the others after it, newline-separated.
// The SDK's stdio transport (v1.8.0 ioConn.Read) counts each request of a
// batch, a notification too, as a call to answer before it writes the
// batch's answer, and a notification is never answered: a batch with one
// was never answered (the client waited for ever), and one with two
// notifications, or a second batch with one, ended the session as a
// request seen twice (TestStdioBatchWithNotificationsIsAnswered). JSON-RPC
// 2.0 ("Batch") answers a batch with one response per call and none for a
// notification, nothing at all if it holds no call, and lets a server
// process its messages in any order; each call still reaches the SDK,
// and the one decision point, in the batch. t itself when the batch holds
// no notification.
func splitNotifications(t []byte, raws []segjson.RawMessage, items []jsonrpc.Message) []byte {
	var before, rest, after [][]byte
	for i, msg := range items {
		raw := bytes.Trim(raws[i], " \t\r\n")
		req, ok := msg.(*jsonrpc.Request)
		switch {
		case !ok || req.IsCall():
			rest = append(rest, raw)
		case len(rest) == 0:
			before = append(before, raw)
		default:
			after = append(after, raw)
		}
	}
	if len(before)+len(after) == 0 {
		return t
	}
	lines := before
	if len(rest) > 0 {
		lines = append(lines, append(append([]byte{'['}, bytes.Join(rest, []byte{','})...), ']'))
	}
	return bytes.Join(append(lines, after...), []byte{'\n'})
}

// errStdioBatchMeta answers, whole, a batch of which a message carries a
// params._meta protocol version (batchMetaVersion), as checkBatch answers
// it over HTTP: none of it is run. Judged message by message
// (sessionRevision), such a batch was half run: its other calls were
// decided, audited and served, its 2026-07-28 ones refused, and those of an
// earlier version (or of a version that is none) served at the session's
// revision (TestStdioBatchWithMetaVersionIsRefusedWhole).
var errStdioBatchMeta = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: `invalid request: a batch (protocol revisions before ` + firstBatchless +
	`) is served at the revision initialize negotiated and its messages carry no params._meta["` + mcp.MetaKeyProtocolVersion +
	`"]; only a request of ` + ProtocolStateless + ` or later carries it, one message per line, in a session that did not initialize an earlier revision`}

// errNoBatches answers a batch when initialize has not negotiated a
// revision that has them.
var errNoBatches = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
	Message: "invalid request: JSON-RPC batches are refused: protocol revision 2025-06-18 removed them, and this session did not initialize an earlier one"}
