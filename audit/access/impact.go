package access

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/custos-mcp/custos/audit"
)

// ImpactRequest reads what `policy impact` replays: the records of the view
// whose time is in [Since, Until), each with its stored decision input if
// it has one. The candidate policy stays with the caller, which replays
// the stream (ReadImpact) with impact.Replay.
type ImpactRequest struct {
	Ask
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
}

// impactLine is one line of the impact stream: first {"head": N}, then one
// line per record in range, in seq order.
type impactLine struct {
	Head   uint64          `json:"head,omitempty"`
	Seq    uint64          `json:"seq,omitempty"`
	Record json.RawMessage `json:"record,omitempty"`
	Input  json.RawMessage `json:"input,omitempty"`
}

// impactWindow is how many records the stream reads per step: the records
// of a window are held while their inputs are read.
const impactWindow = 1024

func (s *Service) impact(ctx context.Context, c Caller, r ImpactRequest, w io.Writer) (Result, error) {
	action, err := r.check(ActionPolicyImpact)
	if err != nil {
		return Result{}, err
	}
	if err := checkTimes(r.Since, r.Until); err != nil {
		return Result{}, err
	}
	var why subject
	why.time("since", r.Since)
	why.time("until", r.Until)
	v, err := s.open(ctx, c, action, r.Ask, why, nil, nil)
	if err != nil {
		return Result{}, err
	}
	res := Result{AccessSeq: v.n}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(impactLine{Head: v.n}); err != nil {
		return res, err
	}
	m := s.walkMeter(ctx, nil, int64(v.n))
	for from := uint64(1); from <= v.n; from += impactWindow {
		m.set(int64(from - 1))
		to := min(v.n, from+impactWindow-1)
		var lines []impactLine
		index := map[uint64]int{}
		past := false
		err := v.Records(ctx, from, to, func(seq uint64, canonical []byte) error {
			rec, err := audit.Decode(canonical)
			if err != nil {
				return &audit.CorruptError{Seq: seq, Kind: audit.KindNonCanonical, Detail: "record does not decode; run verify"}
			}
			if !r.Until.IsZero() && !rec.Time.Before(r.Until) {
				past = true // times never decrease
				return nil
			}
			if !r.Since.IsZero() && rec.Time.Before(r.Since) {
				return nil
			}
			index[seq] = len(lines)
			lines = append(lines, impactLine{Seq: seq, Record: append(json.RawMessage(nil), canonical...)})
			return nil
		})
		if err != nil {
			return res, err
		}
		if len(lines) > 0 {
			err = v.Inputs(ctx, lines[0].Seq, lines[len(lines)-1].Seq, func(seq uint64, input []byte) error {
				if i, ok := index[seq]; ok {
					lines[i].Input = input
				}
				return nil
			})
			if err != nil {
				return res, err
			}
		}
		for _, l := range lines {
			if err := enc.Encode(l); err != nil {
				return res, err
			}
		}
		res.Records += len(lines)
		if past {
			break
		}
	}
	return res, bw.Flush()
}

// ImpactSource replays an impact stream: it is an impact.InputSource over
// the view the stream was read from. It reads forward only: calls must
// ask for non-decreasing ranges (Records then Inputs of one range, as
// impact.Replay does), and it holds one range in memory.
type ImpactSource struct {
	dec    *json.Decoder
	head   uint64
	next   *impactLine // read ahead, not yet consumed
	eof    bool
	window []impactLine // the lines of the range last read by Records
	err    error
}

// ReadImpact starts reading an impact stream from r.
func ReadImpact(r io.Reader) (*ImpactSource, error) {
	s := &ImpactSource{dec: json.NewDecoder(r)}
	var h impactLine
	if err := s.dec.Decode(&h); err != nil || h.Head == 0 || h.Seq != 0 {
		return nil, fmt.Errorf("access: impact stream: no head line (%v)", err)
	}
	s.head = h.Head
	return s, nil
}

// Head is the end N of the view.
func (s *ImpactSource) Head() (uint64, string) { return s.head, "" }

// peek returns the next unconsumed line, or nil at the end.
func (s *ImpactSource) peek() (*impactLine, error) {
	if s.next != nil || s.eof {
		return s.next, nil
	}
	var l impactLine
	err := s.dec.Decode(&l)
	if errors.Is(err, io.EOF) {
		s.eof = true
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("access: impact stream: %w", err)
	}
	if l.Seq == 0 || l.Seq > s.head {
		return nil, fmt.Errorf("access: impact stream: seq %d outside 1..%d", l.Seq, s.head)
	}
	s.next = &l
	return s.next, nil
}

// Records calls fn for the records of from..to in the stream (those in the
// requested time range).
func (s *ImpactSource) Records(ctx context.Context, from, to uint64, fn func(seq uint64, canonical []byte) error) error {
	s.window = s.window[:0]
	last := uint64(0)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		l, err := s.peek()
		if err != nil || l == nil || l.Seq > to {
			return err
		}
		s.next = nil
		if l.Seq < from || l.Seq <= last {
			return fmt.Errorf("access: impact stream: seq %d out of order (range %d..%d)", l.Seq, from, to)
		}
		last = l.Seq
		s.window = append(s.window, *l)
		if err := fn(l.Seq, l.Record); err != nil {
			return err
		}
	}
}

// Inputs calls fn for the stored inputs of the range last read by Records.
func (s *ImpactSource) Inputs(ctx context.Context, from, to uint64, fn func(seq uint64, input []byte) error) error {
	for _, l := range s.window {
		if l.Seq < from || l.Seq > to || len(l.Input) == 0 {
			continue
		}
		if err := fn(l.Seq, l.Input); err != nil {
			return err
		}
	}
	return ctx.Err()
}
