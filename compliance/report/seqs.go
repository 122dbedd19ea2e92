package report

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Seqs is a set of record seqs, kept as sorted, disjoint, non-adjacent
// ranges. Its JSON and text form is compact: "1-5,9,12-20" (each range
// inclusive). It is how every figure of a Report names the records behind
// it: an auditor takes those lines of the bundle's records.jsonl and
// recounts.
type Seqs struct {
	r [][2]uint64
}

// Add adds seq. Seqs are added in increasing order (records are read in seq
// order); adding one below the last is a bug and panics, adding the last
// again does nothing.
func (s *Seqs) Add(seq uint64) {
	n := len(s.r)
	switch {
	case n == 0:
		s.r = append(s.r, [2]uint64{seq, seq})
	case seq == s.r[n-1][1]:
	case seq == s.r[n-1][1]+1:
		s.r[n-1][1] = seq
	case seq > s.r[n-1][1]:
		s.r = append(s.r, [2]uint64{seq, seq})
	default:
		panic(fmt.Sprintf("report: seq %d added after %d", seq, s.r[n-1][1]))
	}
}

// Len is the number of seqs in the set.
func (s Seqs) Len() int {
	n := 0
	for _, r := range s.r {
		n += int(r[1] - r[0] + 1)
	}
	return n
}

// First and Last are the smallest and largest seq (0 for an empty set).
func (s Seqs) First() uint64 {
	if len(s.r) == 0 {
		return 0
	}
	return s.r[0][0]
}

// Last is the largest seq (0 for an empty set).
func (s Seqs) Last() uint64 {
	if len(s.r) == 0 {
		return 0
	}
	return s.r[len(s.r)-1][1]
}

// Contains reports whether seq is in the set.
func (s Seqs) Contains(seq uint64) bool {
	for _, r := range s.r {
		if seq >= r[0] && seq <= r[1] {
			return true
		}
	}
	return false
}

// Each calls fn for every seq in increasing order.
func (s Seqs) Each(fn func(uint64)) {
	for _, r := range s.r {
		for q := r[0]; ; q++ {
			fn(q)
			if q == r[1] {
				break
			}
		}
	}
}

// String is the compact form, "" for an empty set.
func (s Seqs) String() string {
	var b strings.Builder
	for i, r := range s.r {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(r[0], 10))
		if r[1] != r[0] {
			b.WriteByte('-')
			b.WriteString(strconv.FormatUint(r[1], 10))
		}
	}
	return b.String()
}

// MarshalJSON writes the compact form as a JSON string.
func (s Seqs) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads the compact form.
func (s *Seqs) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return err
	}
	p, err := ParseSeqs(str)
	if err != nil {
		return err
	}
	*s = p
	return nil
}

// ParseSeqs parses the compact form ("1-5,9"; "" is the empty set). Ranges
// must be increasing and must not overlap.
func ParseSeqs(str string) (Seqs, error) {
	var s Seqs
	if str == "" {
		return s, nil
	}
	for _, part := range strings.Split(str, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil || a == 0 {
			return Seqs{}, fmt.Errorf("report: seqs %q: bad seq %q", str, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
				return Seqs{}, fmt.Errorf("report: seqs %q: bad range %q", str, part)
			}
		}
		if n := len(s.r); n > 0 && a <= s.r[n-1][1] {
			return Seqs{}, fmt.Errorf("report: seqs %q: %q is not after the range before it", str, part)
		}
		// Normalise adjacent ranges, as Add would have made them.
		if n := len(s.r); n > 0 && a == s.r[n-1][1]+1 {
			s.r[n-1][1] = b
			continue
		}
		s.r = append(s.r, [2]uint64{a, b})
	}
	return s, nil
}

// Figure is one number of the report and the records it counts.
type Figure struct {
	Count int  `json:"count"`
	Seqs  Seqs `json:"seqs"`
}

func (f *Figure) add(seq uint64) {
	f.Count++
	f.Seqs.Add(seq)
}
