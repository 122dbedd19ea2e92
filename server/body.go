package server

import (
	"bytes"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	segjson "github.com/segmentio/encoding/json"
)

// bodyMemo is what the checks before the go-sdk know of one JSON-RPC body
// b: b itself and, each done at most once and only when first asked for,
// its decodings. Every check reads the body through one memo, so a
// request is decoded once per kind however many checks judge it
// (TestBodyIsReadAndDecodedOnce). Each decoding keeps the rules of the
// checks that share it: message is the go-sdk's own (jsonrpc.DecodeMessage),
// meta and batch are the decoders those checks used before.
type bodyMemo struct {
	b []byte

	msgDone bool
	msg     jsonrpc.Message
	msgErr  error

	metaDone bool
	meta     map[string]any

	batchDone bool
	raws      []segjson.RawMessage
	rawsErr   error
	items     []jsonrpc.Message // raws decoded as message decodes b; nil where one is no message

	planDone bool
	planned  *batchPlan
}

func newBodyMemo(b []byte) *bodyMemo { return &bodyMemo{b: b} }

// countDecode, if set (tests only), is told of every decoding a memo
// makes and of every read of a body ahead of the go-sdk: "read",
// "message", "meta", "batch". Atomic, as a test sets it while servers of
// other tests may still be answering.
var countDecode atomic.Pointer[func(kind string)]

func noteDecode(kind string) {
	if fn := countDecode.Load(); fn != nil {
		(*fn)(kind)
	}
}

// message is b decoded as the go-sdk decodes one message.
func (m *bodyMemo) message() (jsonrpc.Message, error) {
	if !m.msgDone {
		m.msgDone = true
		noteDecode("message")
		m.msg, m.msgErr = jsonrpc.DecodeMessage(m.b)
	}
	return m.msg, m.msgErr
}

// request is the one JSON-RPC request (call or notification) b holds, nil
// for anything else or a nil memo.
func (m *bodyMemo) request() *jsonrpc.Request {
	if m == nil {
		return nil
	}
	msg, err := m.message()
	if err != nil {
		return nil
	}
	req, _ := msg.(*jsonrpc.Request)
	return req
}

// metaOf is metaOf of the params of the request b holds (nil if it holds
// none).
func (m *bodyMemo) metaOf() map[string]any {
	if !m.metaDone {
		m.metaDone = true
		if req := m.request(); req != nil {
			noteDecode("meta")
			m.meta = metaOf(req.Params)
		}
	}
	return m.meta
}

// batch is b as a JSON array of raw values (segjson.Unmarshal), and each
// of them decoded as message decodes b: items[i] is nil where raws[i] is
// no JSON-RPC message (JSON-RPC 2.0 answers each such member alone:
// planBatch).
func (m *bodyMemo) batch() (raws []segjson.RawMessage, items []jsonrpc.Message, err error) {
	if !m.batchDone {
		m.batchDone = true
		noteDecode("batch")
		if m.rawsErr = segjson.Unmarshal(m.b, &m.raws); m.rawsErr == nil {
			m.items = make([]jsonrpc.Message, len(m.raws))
			for i, raw := range m.raws {
				if msg, err := jsonrpc.DecodeMessage(raw); err == nil {
					m.items[i] = msg
				}
			}
		}
	}
	return m.raws, m.items, m.rawsErr
}

// peekedBody is the body of a POST whose first bytes (at most maxBody+1)
// the checks before the go-sdk have read ahead, with their memo: Read
// yields b, then what the body had left. It replaces r.Body (peekBody),
// and is the request's memo only while nothing has read from it.
type peekedBody struct {
	*bodyMemo
	err  error // what reading ahead ended with (nil: the end or the limit)
	end  bool  // reading ahead reached the end: nothing follows b
	rest io.ReadCloser
	off  int  // bytes of b given by Read
	read bool // Read was called: b is no longer what the body will yield
}

func (p *peekedBody) Read(out []byte) (int, error) {
	p.read = true
	if p.off < len(p.b) {
		n := copy(out, p.b[p.off:])
		p.off += n
		return n, nil
	}
	if p.end {
		return 0, io.EOF
	}
	return p.rest.Read(out)
}

func (p *peekedBody) Close() error { return p.rest.Close() }

// bodyOf is the memo of a POST's body, reading up to maxBody+1 bytes of
// it ahead the first time it is asked for, nil for another method or no
// body. The body stays readable in full.
//
// Invariant: the memo holds the bytes the body will yield; any rewrite of
// the body replaces both (setBody), and once anything else reads from the
// body its memo is no longer used.
func bodyOf(r *http.Request) *peekedBody {
	if plain := plainBody.Load(); plain != nil {
		return (*plain)(r)
	}
	return memoizedBody(r)
}

// plainBody, if set (tests only), is bodyOf instead of memoizedBody: the
// reference TestBodyMemoAgreesWithPlainPeeks compares the memo with.
var plainBody atomic.Pointer[func(*http.Request) *peekedBody]

// memoizedBody is bodyOf.
func memoizedBody(r *http.Request) *peekedBody {
	if r.Method != http.MethodPost || r.Body == nil {
		return nil
	}
	if p, ok := r.Body.(*peekedBody); ok && !p.read {
		return p
	}
	noteDecode("read")
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	p := &peekedBody{bodyMemo: newBodyMemo(b), err: err, end: err == nil && len(b) <= maxBody, rest: r.Body}
	r.Body = p
	return p
}

// setBody replaces r's body, and with it its memo, by b.
func setBody(r *http.Request, b []byte) {
	r.Body = &peekedBody{bodyMemo: newBodyMemo(b), end: true, rest: io.NopCloser(bytes.NewReader(nil))}
	r.ContentLength = int64(len(b))
}

// setBatch replaces r's body, whose memo is old, by the batch of the
// members plan passes (checkParams), with a memo that already holds what
// old knows of it: it is no one message (as old is not), its members and
// their decodings are plan's, and all of them pass. So the checks after
// checkParams decode the batch no more than they would the whole
// (TestBodyIsReadAndDecodedOnce).
func setBatch(r *http.Request, old *bodyMemo, plan *batchPlan) {
	setBody(r, plan.body())
	m := r.Body.(*peekedBody).bodyMemo
	m.msgDone, m.msg, m.msgErr = old.msgDone, old.msg, old.msgErr
	m.batchDone, m.raws, m.items = true, plan.pass, plan.items
	m.planDone, m.planned = true, &batchPlan{pass: plan.pass, items: plan.items, n: len(plan.pass)}
}

// peekBody returns up to maxBody+1 bytes of a POST's body and leaves the
// body readable in full; ok is false for another method, no body or a read
// error.
func peekBody(r *http.Request) (b []byte, ok bool) {
	p := bodyOf(r)
	if p == nil {
		return nil, false
	}
	return p.b, p.err == nil
}

// peekMessage is the memo of a POST's body if it was read without error
// and is at most maxBody long, nil otherwise.
func peekMessage(r *http.Request) *bodyMemo {
	p := bodyOf(r)
	if p == nil || p.err != nil || len(p.b) > maxBody {
		return nil
	}
	return p.bodyMemo
}

// peekRequest returns the one JSON-RPC request (call or notification) a
// POST's body holds, nil for anything else (a batch, a response, not
// JSON-RPC, over maxBody), leaving the body readable in full.
func peekRequest(r *http.Request) *jsonrpc.Request {
	return peekMessage(r).request()
}
