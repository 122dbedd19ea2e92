package admin

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"github.com/custos-mcp/custos/audit/access"
)

// Progress over the socket (docs/audit-access.md, "Progress"). A client
// that wants an operation's progress sends the request header
// HeaderProgress: ProgressFrames. A server that knows it answers with the
// same header and sends the body as frames: a kind byte, a 4-byte
// big-endian payload length, the payload. Frame kinds:
//
//   - 'o': output bytes; the output is the concatenation of these
//     payloads, byte for byte what the response body is without frames;
//   - 'p': an access.Progress as JSON (at most maxProgressFrame bytes):
//     counts only, sent only after the access record is durable.
//
// The trailers are as without frames. A request without the header (a
// client that predates progress) gets the unframed body, and a client
// that asks a server that predates progress gets it too (no response
// header), so either side may be older: it just sees no progress.
const (
	HeaderProgress = "Custos-Progress"
	ProgressFrames = "frames/1"
)

const (
	frameOutput   = 'o'
	frameProgress = 'p'
	// maxOutputFrame bounds an output frame's payload (a write is split).
	maxOutputFrame = 1 << 20
	// maxProgressFrame bounds a progress frame's payload, which holds
	// three small fields.
	maxProgressFrame = 1 << 10
)

// frameWriter writes an operation's output and progress as frames to w.
// Both are called from the operation's goroutine (RunProgress), so the
// frames never interleave.
type frameWriter struct {
	w     io.Writer
	flush func() error // sends a progress frame now rather than with the next output
}

func (f *frameWriter) frame(kind byte, p []byte) error {
	var h [5]byte
	h[0] = kind
	binary.BigEndian.PutUint32(h[1:], uint32(len(p)))
	if _, err := f.w.Write(h[:]); err != nil {
		return err
	}
	_, err := f.w.Write(p)
	return err
}

// Write sends p as output frames.
func (f *frameWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := min(len(p)-n, maxOutputFrame)
		if err := f.frame(frameOutput, p[n:n+k]); err != nil {
			return n, err
		}
		n += k
	}
	return n, nil
}

// progress sends p as a progress frame and flushes it. An error is left
// to the next output write, which fails the same way (a caller that
// stopped reading is cut off by the write deadline).
func (f *frameWriter) progress(p access.Progress) {
	b, err := json.Marshal(p)
	if err != nil {
		return
	}
	if f.frame(frameProgress, b) == nil && f.flush != nil {
		f.flush()
	}
}

// deframer reads a framed body: Read returns the output frames' bytes and
// hands each progress frame to progress (nil: dropped).
type deframer struct {
	r        io.Reader
	progress func(access.Progress)
	left     uint32 // bytes left in the current output frame
}

func (d *deframer) Read(p []byte) (int, error) {
	for d.left == 0 {
		var h [5]byte
		if _, err := io.ReadFull(d.r, h[:]); err != nil {
			return 0, err // io.EOF between frames: the end; else io.ErrUnexpectedEOF
		}
		n := binary.BigEndian.Uint32(h[1:])
		switch h[0] {
		case frameOutput:
			d.left = n
		case frameProgress:
			if n > maxProgressFrame {
				return 0, fmt.Errorf("admin: the server sent a progress frame of %d bytes (at most %d)", n, maxProgressFrame)
			}
			b := make([]byte, n)
			if _, err := io.ReadFull(d.r, b); err != nil {
				return 0, noEOF(err)
			}
			var pr access.Progress
			if err := json.Unmarshal(b, &pr); err != nil {
				return 0, fmt.Errorf("admin: the server sent a progress frame that is not one: %v", err)
			}
			if d.progress != nil {
				d.progress(pr)
			}
		default:
			return 0, fmt.Errorf("admin: the server sent a frame of unknown kind %q", h[0])
		}
	}
	if uint32(len(p)) > d.left {
		p = p[:d.left]
	}
	n, err := d.r.Read(p)
	d.left -= uint32(n)
	if err == io.EOF && d.left > 0 {
		err = io.ErrUnexpectedEOF // the body ended inside a frame
	}
	if err == io.EOF {
		err = nil // the next Read says whether the body ends between frames
	}
	return n, err
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
