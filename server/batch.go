package server

import (
	"bytes"
	"net/http"
	"strings"

	segjson "github.com/segmentio/encoding/json"
)

// batchAnswers is the ResponseWriter the go-sdk answers an HTTP batch
// through when custos refused some of its members (planBatch): it merges
// answers, theirs, into the SDK's answer, so that the client gets one
// answer to the batch as JSON-RPC 2.0 ("Batch") has it:
//   - an SSE stream (the stateful handler's answer to a batch with calls):
//     answers come first, one event each, as the SDK sends each of its
//     responses;
//   - 202 Accepted (the SDK's answer to a batch without calls): 200 with
//     the array of answers instead;
//   - a JSON array (application/json, 200): answers appended to it (finish);
//   - anything else (a refusal of the whole request: no session, 400, 404)
//     is passed on as it is, and answers are dropped with the request.
type batchAnswers struct {
	http.ResponseWriter
	answers []errorResponse

	started bool
	mode    int          // what the SDK answers, once started
	buf     bytes.Buffer // the SDK's JSON array (mode batchJSON)
}

const (
	batchPass     = iota // passed on as it is
	batchSSE             // answers sent first as events
	batchAccepted        // 202 replaced by the answers; the SDK's body dropped
	batchJSON            // the SDK's array buffered, answers appended by finish
)

// start judges the SDK's answer by its status and Content-Type, once.
func (b *batchAnswers) start(status int) {
	if b.started {
		return
	}
	b.started = true
	ct := b.Header().Get("Content-Type")
	switch {
	case status == http.StatusAccepted:
		b.mode = batchAccepted
		writeJSON(b.ResponseWriter, http.StatusOK, b.answers)
	case status == http.StatusOK && strings.HasPrefix(ct, "text/event-stream"):
		b.mode = batchSSE
		b.ResponseWriter.WriteHeader(status)
		for _, a := range b.answers {
			data, err := segjson.Marshal(a)
			if err != nil {
				continue
			}
			b.ResponseWriter.Write(append(append([]byte("event: message\ndata: "), data...), '\n', '\n'))
		}
	case status == http.StatusOK && strings.HasPrefix(ct, "application/json"):
		b.mode = batchJSON
		b.Header().Del("Content-Length")
	default:
		b.ResponseWriter.WriteHeader(status)
	}
}

func (b *batchAnswers) WriteHeader(status int) {
	if status >= 100 && status < 200 {
		b.ResponseWriter.WriteHeader(status)
		return
	}
	b.start(status)
}

func (b *batchAnswers) Write(p []byte) (int, error) {
	b.start(http.StatusOK)
	switch b.mode {
	case batchAccepted:
		return len(p), nil
	case batchJSON:
		return b.buf.Write(p)
	}
	return b.ResponseWriter.Write(p)
}

// Flush sends what has been written (the SDK flushes each SSE event).
func (b *batchAnswers) Flush() {
	if !b.started || b.mode == batchAccepted || b.mode == batchJSON {
		return
	}
	http.NewResponseController(b.ResponseWriter).Flush()
}

func (b *batchAnswers) Unwrap() http.ResponseWriter { return b.ResponseWriter }

// finish writes what the SDK's JSON answer awaits: its array with answers
// appended (the SDK's answer as it was if it is no array).
func (b *batchAnswers) finish() {
	if b.mode != batchJSON {
		return
	}
	var msgs []segjson.RawMessage
	if segjson.Unmarshal(b.buf.Bytes(), &msgs) != nil {
		b.ResponseWriter.WriteHeader(http.StatusOK)
		b.ResponseWriter.Write(b.buf.Bytes())
		return
	}
	for _, a := range b.answers {
		if data, err := segjson.Marshal(a); err == nil {
			msgs = append(msgs, data)
		}
	}
	writeJSON(b.ResponseWriter, http.StatusOK, msgs)
}
