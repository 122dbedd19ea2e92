package e2e

// An outside auditor's verifier, written from docs/audit-format.md alone
// (sections 2, 3, 7, 10, 12, 13 and 17) with nothing but the standard
// library: it imports no custos package, and checks what a real
// `custos serve --dev` wrote (a log rolled into sealed segments, its
// anchored checkpoints, an inclusion proof, an export bundle) by the
// document's rules. Where the document and custos's output disagree, this
// test fails: the document is what an auditor has.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/custos-mcp/custos/audit"
)

// ---- section 2: canonical encoding, re-derived ----

type indPrincipal struct {
	Sub      string   `json:"sub"`
	Roles    []string `json:"roles"`
	ClientID string   `json:"client_id"`
}

type indRecord struct {
	V              uint64       `json:"v"`
	Seq            uint64       `json:"seq"`
	EventID        string       `json:"event_id"`
	Time           string       `json:"time"`
	Node           string       `json:"node"`
	Action         string       `json:"action"`
	Outcome        string       `json:"outcome"`
	Reason         string       `json:"reason"`
	Principal      indPrincipal `json:"principal"`
	PurposeOfUse   string       `json:"purpose_of_use"`
	Session        string       `json:"session"`
	Source         string       `json:"source"`
	URIs           []string     `json:"uris"`
	Patients       []string     `json:"patients"`
	Digests        []string     `json:"digests"`
	DecisionID     string       `json:"decision_id"`
	PolicyRevision string       `json:"policy_revision"`
	Obligations    []string     `json:"obligations"`
	Dev            bool         `json:"dev"`
	Keys           []string     `json:"keys"`
	PrevHash       string       `json:"prev_hash"`
}

// indString is rule 5: minimal escapes, lowercase \u00xx for the other
// controls, everything else raw UTF-8.
func indString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, c := range []byte(s) {
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case 0x08:
			b.WriteString(`\b`)
		case 0x09:
			b.WriteString(`\t`)
		case 0x0a:
			b.WriteString(`\n`)
		case 0x0c:
			b.WriteString(`\f`)
		case 0x0d:
			b.WriteString(`\r`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}

func indList(b *bytes.Buffer, l []string) {
	b.WriteByte('[')
	for i, s := range l {
		if i > 0 {
			b.WriteByte(',')
		}
		indString(b, s)
	}
	b.WriteByte(']')
}

// indEncode writes r with section 2's keys, in its order, for r.V.
func indEncode(r indRecord) []byte {
	var b bytes.Buffer
	str := func(k, v string) { b.WriteString(`,"` + k + `":`); indString(&b, v) }
	lst := func(k string, v []string) { b.WriteString(`,"` + k + `":`); indList(&b, v) }
	fmt.Fprintf(&b, `{"v":%d,"seq":%d`, r.V, r.Seq)
	str("event_id", r.EventID)
	str("time", r.Time)
	str("node", r.Node)
	str("action", r.Action)
	str("outcome", r.Outcome)
	str("reason", r.Reason)
	b.WriteString(`,"principal":{"sub":`)
	indString(&b, r.Principal.Sub)
	b.WriteString(`,"roles":`)
	indList(&b, r.Principal.Roles)
	b.WriteString(`,"client_id":`)
	indString(&b, r.Principal.ClientID)
	b.WriteByte('}')
	str("purpose_of_use", r.PurposeOfUse)
	str("session", r.Session)
	str("source", r.Source)
	lst("uris", r.URIs)
	lst("patients", r.Patients)
	lst("digests", r.Digests)
	str("decision_id", r.DecisionID)
	str("policy_revision", r.PolicyRevision)
	lst("obligations", r.Obligations)
	fmt.Fprintf(&b, `,"dev":%t`, r.Dev)
	if r.V == 2 {
		lst("keys", r.Keys)
	}
	str("prev_hash", r.PrevHash)
	b.WriteByte('}')
	return b.Bytes()
}

var (
	indTimeRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z$`)
	indHexRE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// section 12: an anchor line's time (unsigned)
	indAnchorTimeRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{0,8}[1-9])?Z$`)
)

// indDecode is section 2's rule: parse, re-encode, require the same bytes;
// plus rules 6-8, which re-encoding alone does not check.
func indDecode(line []byte) (indRecord, error) {
	var r indRecord
	if !utf8.Valid(line) {
		return r, fmt.Errorf("not UTF-8")
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return r, fmt.Errorf("not a record: %v", err)
	}
	if r.V != 1 && r.V != 2 {
		return r, fmt.Errorf("v %d", r.V)
	}
	if got := indEncode(r); !bytes.Equal(got, line) {
		i := 0
		for i < len(got) && i < len(line) && got[i] == line[i] {
			i++
		}
		return r, fmt.Errorf("not canonical at byte %d", i)
	}
	if !indTimeRE.MatchString(r.Time) {
		return r, fmt.Errorf("time %q is not YYYY-MM-DDThh:mm:ss.nnnnnnnnnZ", r.Time)
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000000000Z", r.Time); err != nil {
		return r, fmt.Errorf("time %q is not a date and time: %v", r.Time, err)
	}
	if !indHexRE.MatchString(r.PrevHash) {
		return r, fmt.Errorf("prev_hash %q is not 64 lowercase hex digits", r.PrevHash)
	}
	for i, k := range r.Keys {
		if k == "" || i > 0 && r.Keys[i-1] >= k {
			return r, fmt.Errorf("keys not strictly increasing and non-empty")
		}
	}
	return r, nil
}

// ---- section 3: hash and chain ----

const indZero = "0000000000000000000000000000000000000000000000000000000000000000"

func indChainHash(line []byte) string {
	h := sha256.Sum256(append([]byte("custos/audit/v1\n"), line...))
	return hex.EncodeToString(h[:])
}

// indLog is a sequence of records checked by sections 2 and 3, starting at
// seq from with the chain hash prev.
type indLog struct {
	lines  [][]byte
	recs   []indRecord
	hashes []string // chain hash of each line
	leaves [][32]byte
}

// indCheckRecords runs section 13's check 4 (and section 5's chain rules)
// on lines that should be records from..from+len-1, the one before having
// chain hash prev (64 zeros before seq 1). Every problem is returned, each
// naming its seq or line.
func indCheckRecords(lines [][]byte, from uint64, prev string) (*indLog, []string) {
	var probs []string
	l := &indLog{}
	lastTime, lastV := "", uint64(0)
	for i, line := range lines {
		want := from + uint64(i)
		r, err := indDecode(line)
		if err != nil {
			probs = append(probs, fmt.Sprintf("line %d (seq %d expected): non_canonical: %v", i+1, want, err))
		} else {
			if r.Seq != want {
				probs = append(probs, fmt.Sprintf("line %d: seq %d, expected %d", i+1, r.Seq, want))
			}
			if r.PrevHash != prev {
				probs = append(probs, fmt.Sprintf("seq %d: chain_break: prev_hash %s, expected %s", r.Seq, r.PrevHash, prev))
			}
			if r.Time < lastTime {
				probs = append(probs, fmt.Sprintf("seq %d: time_regression: %s before %s", r.Seq, r.Time, lastTime))
			}
			if r.V < lastV {
				probs = append(probs, fmt.Sprintf("seq %d: version_regression", r.Seq))
			}
			lastTime, lastV = r.Time, r.V
		}
		prev = indChainHash(line)
		l.lines = append(l.lines, line)
		l.recs = append(l.recs, r)
		l.hashes = append(l.hashes, prev)
		l.leaves = append(l.leaves, indLeaf(line))
	}
	return l, probs
}

// ---- section 10: RFC 6962 / RFC 9162 Merkle tree ----

func indLeaf(b []byte) [32]byte {
	return sha256.Sum256(append([]byte{0}, b...))
}

func indNode(l, r [32]byte) [32]byte {
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

// indSplit is the largest power of two smaller than n (n > 1).
func indSplit(n uint64) uint64 { return 1 << (bits.Len64(n-1) - 1) }

// indMTH is RFC 6962's MTH of leaves.
func indMTH(leaves [][32]byte) [32]byte {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return leaves[0]
	}
	k := indSplit(uint64(len(leaves)))
	return indNode(indMTH(leaves[:k]), indMTH(leaves[k:]))
}

// indCheckInclusion is RFC 9162 section 2.1.3.2.
func indCheckInclusion(index, size uint64, leaf [32]byte, proof [][32]byte, root [32]byte) error {
	if index >= size {
		return fmt.Errorf("leaf %d not in a tree of %d", index, size)
	}
	fn, sn := index, size-1
	r := leaf
	for _, p := range proof {
		if sn == 0 {
			return fmt.Errorf("inclusion proof too long")
		}
		if fn&1 == 1 || fn == sn {
			r = indNode(p, r)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			r = indNode(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 || r != root {
		return fmt.Errorf("inclusion proof of leaf %d does not give the root of size %d", index, size)
	}
	return nil
}

// indCheckConsistency is RFC 9162 section 2.1.4.2.
func indCheckConsistency(first, second uint64, root1, root2 [32]byte, proof [][32]byte) error {
	if first > second {
		return fmt.Errorf("size %d after %d", first, second)
	}
	if first == second {
		if len(proof) != 0 || root1 != root2 {
			return fmt.Errorf("equal sizes %d with different roots or a proof", first)
		}
		return nil
	}
	if first == 0 {
		if len(proof) != 0 || root1 != sha256.Sum256(nil) {
			return fmt.Errorf("consistency from the empty tree must be empty")
		}
		return nil
	}
	if len(proof) == 0 {
		return fmt.Errorf("empty consistency proof %d -> %d", first, second)
	}
	if first&(first-1) == 0 { // a power of two
		proof = append([][32]byte{root1}, proof...)
	}
	fn, sn := first-1, second-1
	for fn&1 == 1 {
		fn >>= 1
		sn >>= 1
	}
	fr, sr := proof[0], proof[0]
	for _, c := range proof[1:] {
		if sn == 0 {
			return fmt.Errorf("consistency proof too long")
		}
		if fn&1 == 1 || fn == sn {
			fr = indNode(c, fr)
			sr = indNode(c, sr)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			sr = indNode(sr, c)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 || fr != root1 || sr != root2 {
		return fmt.Errorf("consistency proof %d -> %d does not give both roots", first, second)
	}
	return nil
}

// indRangeRoot is section 13's check 5: the root of a tree of size leaves
// whose leaves [a, b) are given and whose maximal subtrees disjoint from
// them are the range hashes, taken left to right.
func indRangeRoot(size, a uint64, leaves [][32]byte, rng [][32]byte) ([32]byte, error) {
	b := a + uint64(len(leaves))
	used := 0
	var h func(lo, hi uint64) ([32]byte, error)
	h = func(lo, hi uint64) ([32]byte, error) {
		if hi <= a || lo >= b {
			if used == len(rng) {
				return [32]byte{}, fmt.Errorf("range proof too short")
			}
			used++
			return rng[used-1], nil
		}
		if lo >= a && hi <= b {
			return indMTH(leaves[lo-a : hi-a]), nil
		}
		k := indSplit(hi - lo)
		l, err := h(lo, lo+k)
		if err != nil {
			return l, err
		}
		r, err := h(lo+k, hi)
		return indNode(l, r), err
	}
	root, err := h(0, size)
	if err == nil && used != len(rng) {
		err = fmt.Errorf("range proof has %d hashes, %d used", len(rng), used)
	}
	return root, err
}

// ---- section 12: signed notes (c2sp.org/signed-note) and checkpoints ----

type indKey struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
}

// indParseVKey parses `name+hash+base64(0x01||pubkey)` and checks that its
// hash is the note key hash of name and key.
func indParseVKey(s string) (indKey, error) {
	parts := strings.SplitN(strings.TrimSpace(s), "+", 3)
	if len(parts) != 3 {
		return indKey{}, fmt.Errorf("verifier key %q: not name+hash+key", s)
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 1 {
		return indKey{}, fmt.Errorf("verifier key %q: not an Ed25519 key", s)
	}
	h, err := strconv.ParseUint(parts[1], 16, 32)
	if err != nil || len(parts[1]) != 8 {
		return indKey{}, fmt.Errorf("verifier key %q: bad key hash", s)
	}
	sum := sha256.Sum256(append([]byte(parts[0]+"\n"), raw...))
	if uint32(h) != uint32(sum[0])<<24|uint32(sum[1])<<16|uint32(sum[2])<<8|uint32(sum[3]) {
		return indKey{}, fmt.Errorf("verifier key %q: hash is not its key's", s)
	}
	return indKey{name: parts[0], hash: uint32(h), pub: raw[1:]}, nil
}

// indOpenNote checks a signed note's signature by one of keys and returns
// its body (text up to and including the line before the blank line) and
// the key that verified it.
func indOpenNote(text string, keys []indKey) (string, indKey, error) {
	i := strings.LastIndex(text, "\n\n")
	if i < 0 || !strings.HasSuffix(text, "\n") {
		return "", indKey{}, fmt.Errorf("not a signed note")
	}
	body := text[:i+1]
	for _, line := range strings.Split(strings.TrimSuffix(text[i+2:], "\n"), "\n") {
		name, sig, ok := strings.Cut(strings.TrimPrefix(line, "— "), " ")
		if !strings.HasPrefix(line, "— ") || !ok {
			return "", indKey{}, fmt.Errorf("signature line %q", line)
		}
		raw, err := base64.StdEncoding.DecodeString(sig)
		if err != nil || len(raw) != 4+ed25519.SignatureSize {
			continue
		}
		h := uint32(raw[0])<<24 | uint32(raw[1])<<16 | uint32(raw[2])<<8 | uint32(raw[3])
		for _, k := range keys {
			if k.name == name && k.hash == h && ed25519.Verify(k.pub, []byte(body), raw[4:]) {
				return body, k, nil
			}
		}
	}
	return "", indKey{}, fmt.Errorf("no signature by a known key")
}

type indCheckpoint struct {
	origin string
	size   uint64
	root   [32]byte
}

// indParseCheckpoint is a strict C2SP tlog-checkpoint body: origin, size
// (decimal, no leading zero), base64 root of 32 bytes, and nothing else.
func indParseCheckpoint(body string) (indCheckpoint, error) {
	l := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if len(l) != 3 || l[0] == "" {
		return indCheckpoint{}, fmt.Errorf("checkpoint body of %d lines", len(l))
	}
	n, err := strconv.ParseUint(l[1], 10, 64)
	if err != nil || strconv.FormatUint(n, 10) != l[1] {
		return indCheckpoint{}, fmt.Errorf("checkpoint size %q", l[1])
	}
	root, err := indB64Hash(l[2])
	if err != nil {
		return indCheckpoint{}, fmt.Errorf("checkpoint root: %v", err)
	}
	return indCheckpoint{l[0], n, root}, nil
}

func indB64Hash(s string) ([32]byte, error) {
	var h [32]byte
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw) != 32 || base64.StdEncoding.EncodeToString(raw) != s {
		return h, fmt.Errorf("%q is not a base64 SHA-256", s)
	}
	copy(h[:], raw)
	return h, nil
}

// indAnchorLine is one line of checkpoints.jsonl (section 12).
type indAnchorLine struct {
	Size uint64 `json:"size"`
	Root string `json:"root"`
	Note string `json:"note"`
	Time string `json:"time"`
}

// indCheckAnchorLine checks the line's note by keys, and that the line's
// size and root are the note's.
func indCheckAnchorLine(a indAnchorLine, keys []indKey) (indCheckpoint, error) {
	body, k, err := indOpenNote(a.Note, keys)
	if err != nil {
		return indCheckpoint{}, fmt.Errorf("checkpoint of size %d: %v", a.Size, err)
	}
	cp, err := indParseCheckpoint(body)
	if err != nil {
		return cp, err
	}
	if cp.origin != k.name {
		return cp, fmt.Errorf("checkpoint origin %q signed by key %q", cp.origin, k.name)
	}
	if !indAnchorTimeRE.MatchString(a.Time) {
		return cp, fmt.Errorf("checkpoint of size %d: time %q is not RFC 3339 UTC without trailing zeros", a.Size, a.Time)
	}
	if root, err := indB64Hash(a.Root); err != nil || cp.size != a.Size || root != cp.root {
		return cp, fmt.Errorf("anchor line size %d root %s is not its note's (%d)", a.Size, a.Root, cp.size)
	}
	return cp, nil
}

// ---- section 17: seals ----

type indSeal struct {
	segment, first, last, prevSeq, headSeq uint64
	prevHash, headHash                     string
	prevRoot, headRoot                     [32]byte
	firstTime, lastTime                    string
}

func indParseSeal(body string) (indSeal, error) {
	var s indSeal
	var pr, hr string
	_, err := fmt.Sscanf(body, "custos audit seal v1\nsegment %d\nrecords %d %d\nprev %d %s %s\nhead %d %s %s\ntime %s %s\n",
		&s.segment, &s.first, &s.last, &s.prevSeq, &s.prevHash, &pr, &s.headSeq, &s.headHash, &hr, &s.firstTime, &s.lastTime)
	if err != nil {
		return s, fmt.Errorf("seal body: %v", err)
	}
	want := fmt.Sprintf("custos audit seal v1\nsegment %d\nrecords %d %d\nprev %d %s %s\nhead %d %s %s\ntime %s %s\n",
		s.segment, s.first, s.last, s.prevSeq, s.prevHash, pr, s.headSeq, s.headHash, hr, s.firstTime, s.lastTime)
	if body != want {
		return s, fmt.Errorf("seal body is not in the documented form")
	}
	if s.prevRoot, err = indB64Hash(pr); err != nil {
		return s, err
	}
	s.headRoot, err = indB64Hash(hr)
	return s, err
}

// ---- helpers ----

func indLines(t *testing.T, file string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) == 0 {
		return nil
	}
	if raw[len(raw)-1] != '\n' {
		t.Fatalf("%s does not end with a line feed", file)
	}
	return bytes.Split(raw[:len(raw)-1], []byte("\n"))
}

func indReadKeys(t *testing.T, file string) []indKey {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var keys []indKey
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, err := indParseVKey(l)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}

// ---- section 13: a bundle, checked by hand ----

type indManifest struct {
	Format    string            `json:"format"`
	Origin    string            `json:"origin"`
	From      uint64            `json:"from"`
	To        uint64            `json:"to"`
	Records   uint64            `json:"records"`
	LowerSize uint64            `json:"lower_size"`
	UpperSize uint64            `json:"upper_size"`
	Files     map[string]string `json:"files"`
	Created   string            `json:"created"`
}

// indVerifyBundle runs section 13's checks 1-5 and returns every problem.
func indVerifyBundle(dir string, keys []indKey) []string {
	var probs []string
	fail := func(f string, a ...any) { probs = append(probs, fmt.Sprintf(f, a...)) }
	var m indManifest
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err == nil {
		err = json.Unmarshal(raw, &m)
	}
	if err != nil {
		return []string{"manifest: " + err.Error()}
	}
	if m.Format != "custos-audit-bundle/v1" {
		fail("manifest: format %q", m.Format)
	}
	// 1. digests, and no unlisted file
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if _, ok := m.Files[e.Name()]; !ok && e.Name() != "manifest.json" {
			fail("manifest: %s is not listed", e.Name())
		}
	}
	for name, want := range m.Files {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			fail("manifest: %s: %v", name, err)
			continue
		}
		if got := fmt.Sprintf("sha256:%x", sha256.Sum256(b)); got != want {
			fail("manifest: %s has %s, manifest says %s", name, got, want)
		}
	}
	// 2. checkpoints
	var cps []indCheckpoint
	raw, _ = os.ReadFile(filepath.Join(dir, "checkpoints.jsonl"))
	for _, l := range bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n")) {
		var a indAnchorLine
		if err := json.Unmarshal(l, &a); err != nil {
			fail("checkpoints.jsonl: %v", err)
			continue
		}
		cp, err := indCheckAnchorLine(a, keys)
		if err != nil {
			fail("checkpoint: %v", err)
			continue
		}
		if cp.origin != m.Origin {
			fail("checkpoint: origin %q, manifest %q", cp.origin, m.Origin)
		}
		cps = append(cps, cp)
	}
	lower := indCheckpoint{size: 0, root: sha256.Sum256(nil)}
	var upper indCheckpoint
	switch {
	case len(cps) == 1 && m.From == 1:
		upper = cps[0]
	case len(cps) == 2:
		lower, upper = cps[0], cps[1]
	default:
		fail("checkpoint: %d checkpoints for records %d..%d", len(cps), m.From, m.To)
		return probs
	}
	if !(lower.size <= m.From-1 && m.From-1 < m.To && m.To <= upper.size) {
		fail("checkpoint: sizes %d and %d do not bracket records %d..%d", lower.size, upper.size, m.From, m.To)
	}
	if lower.size != m.LowerSize || upper.size != m.UpperSize {
		fail("checkpoint: sizes %d and %d, manifest %d and %d", lower.size, upper.size, m.LowerSize, m.UpperSize)
	}
	// 3. consistency
	var proof struct{ Consistency, Range []string }
	raw, err = os.ReadFile(filepath.Join(dir, "proof.json"))
	if err == nil {
		err = json.Unmarshal(raw, &proof)
	}
	if err != nil {
		fail("proof.json: %v", err)
		return probs
	}
	dec := func(l []string) [][32]byte {
		var out [][32]byte
		for _, s := range l {
			h, err := indB64Hash(s)
			if err != nil {
				fail("proof.json: %v", err)
			}
			out = append(out, h)
		}
		return out
	}
	if err := indCheckConsistency(lower.size, upper.size, lower.root, upper.root, dec(proof.Consistency)); err != nil {
		fail("consistency: %v", err)
	}
	// 4. records: canonical, seqs, chain, times
	lines := indLinesLoose(filepath.Join(dir, "records.jsonl"))
	if uint64(len(lines)) != m.To-m.From+1 || uint64(len(lines)) != m.Records {
		fail("records.jsonl: %d lines for records %d..%d (manifest: %d records)", len(lines), m.From, m.To, m.Records)
	}
	var prev string
	if len(lines) > 0 {
		if r, err := indDecode(lines[0]); err == nil {
			prev = r.PrevHash // the first record's predecessor is outside the bundle
		}
		if m.From == 1 {
			prev = indZero
		}
	}
	lg, p := indCheckRecords(lines, m.From, prev)
	probs = append(probs, p...)
	// 5. completeness
	root, err := indRangeRoot(upper.size, m.From-1, lg.leaves, dec(proof.Range))
	if err != nil {
		fail("completeness: %v", err)
	} else if root != upper.root {
		fail("completeness: records %d..%d and the range proof give root %s, the upper checkpoint %s",
			m.From, m.To, base64.StdEncoding.EncodeToString(root[:]), base64.StdEncoding.EncodeToString(upper.root[:]))
	}
	return probs
}

// indLinesLoose is indLines for indVerifyBundle: a missing or cut file
// gives what it holds, and the checks report it.
func indLinesLoose(file string) [][]byte {
	raw, _ := os.ReadFile(file)
	if len(raw) == 0 {
		return nil
	}
	return bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
}

func TestIndependentVerifierFromTheDocs(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	s := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--checkpoint-interval", "50ms",
		"--rate-limit", "0", "--audit-roll-size", "65536")
	reads, stopLoad := readUnderLoad(t, s.url, tok, 2)
	waitFor(t, func() bool {
		seals, _ := filepath.Glob(filepath.Join(d.data, "audit.sealed", "*.seal"))
		return len(seals) >= 3 && reads.Load() > 0
	})
	stopLoad()
	if err := s.stop(t); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.stderr)
	}
	work := t.TempDir()
	vkeys := filepath.Join(work, "vkeys")
	mustCustos(t, "audit", "pubkey", "--data-dir", d.data, "--dev", "-o", vkeys)
	keys := indReadKeys(t, vkeys)

	// The whole log, as JSONL (section 6): sections 2 and 3.
	jsonl := filepath.Join(work, "audit.jsonl")
	mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--format", "jsonl", "-o", jsonl)
	all := indLines(t, jsonl)
	lg, probs := indCheckRecords(all, 1, indZero)
	if len(probs) > 0 {
		t.Fatalf("the exported log does not verify by the document's rules:\n%s", strings.Join(probs, "\n"))
	}
	n := uint64(len(all))
	t.Logf("%d records", n)
	// Section 1, keys: what a --dev server writes, in the documented form.
	wantKeys := []string{"audit-hmac=dev:file", "cursor=dev:ephemeral", "signing=dev:file"}
	for _, r := range lg.recs {
		if slices.ContainsFunc(r.Keys, func(k string) bool { return strings.Contains(k, "=dev:") }) && !r.Dev {
			t.Errorf("seq %d names a dev key but has dev false (section 1)", r.Seq)
		}
		if r.Principal.ClientID == "custos-cli" {
			continue // an auditor command's access record (section 16): keys [] unless it hashed a patient
		}
		if r.V != 2 || !r.Dev {
			t.Errorf("seq %d: v %d dev %t, want a v2 record of a --dev server", r.Seq, r.V, r.Dev)
		} else if len(r.Keys) > 0 && !slices.Equal(r.Keys, wantKeys) {
			t.Errorf("seq %d: keys %q, section 1 says a --dev server writes %q", r.Seq, r.Keys, wantKeys)
		}
	}

	// Section 11's recipe, as printed, with the dev key as section 11 says
	// to get it: the lookup value of a patient of the seed is in the log.
	var man struct{ URI string }
	raw, err := os.ReadFile(filepath.Join(d.seed, "manifest.jsonl"))
	if err == nil {
		err = json.Unmarshal(bytes.SplitN(raw, []byte("\n"), 2)[0], &man)
	}
	if err != nil {
		t.Fatal(err)
	}
	_, id, _ := strings.Cut(man.URI, "/patients/")
	id, _, _ = strings.Cut(id, "/")
	var keyFile struct {
		AuditHMAC string `json:"audit_hmac"`
	}
	raw, err = os.ReadFile(filepath.Join(d.data, "dev-keys.json"))
	if err == nil {
		err = json.Unmarshal(raw, &keyFile)
	}
	key, err2 := base64.StdEncoding.DecodeString(keyFile.AuditHMAC)
	if err != nil || err2 != nil || len(key) != 32 {
		t.Fatalf("dev-keys.json: no audit_hmac key (%v, %v)", err, err2)
	}
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "audit-format.md"))
	if err != nil {
		t.Fatal(err)
	}
	var recipe string
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "printf 'custos/audit/patient/v1") {
			recipe = l
		}
	}
	if _, err := exec.LookPath("openssl"); err != nil || recipe == "" {
		t.Fatalf("section 11's openssl recipe (%q) cannot run: %v", recipe, err)
	}
	cmd := exec.Command("sh", "-c", recipe)
	cmd.Env = append(os.Environ(), "ID="+id, "KEYHEX="+hex.EncodeToString(key))
	out, err := cmd.Output()
	hk := "hk1-" + strings.TrimSpace(string(out))
	if err != nil || !regexp.MustCompile(`^hk1-[0-9a-f]{32}$`).MatchString(hk) {
		t.Fatalf("section 11's recipe: %q %v", out, err)
	}
	found := false
	for _, r := range lg.recs {
		found = found || slices.Contains(r.Patients, hk)
		for _, u := range r.URIs {
			if strings.Contains(u, id) {
				t.Errorf("seq %d names patient %s in a URI", r.Seq, id)
			}
		}
	}
	if !found {
		t.Errorf("patient %s: section 11's recipe gives %s, which no record names", id, hk)
	}

	// Section 6's shell recipe, run literally from the document.
	script := indDocBlock(t, string(doc), "sh", "prev=0000")
	cmd = exec.Command("sh", "-c", script)
	cmd.Dir = work
	out, err = cmd.CombinedOutput()
	if want := fmt.Sprintf("%d records, head hash %s\n", n, lg.hashes[n-1]); err != nil || string(out) != want {
		t.Errorf("section 6's chain script: %v\n%s\nwant %s", err, out, want)
	}

	// Section 12: every anchored checkpoint is signed by the published key,
	// sizes never decrease, and each root is the root of the records.
	var anchored []indCheckpoint
	for _, l := range indLines(t, filepath.Join(d.data, "checkpoints.jsonl")) {
		var a indAnchorLine
		if err := json.Unmarshal(l, &a); err != nil {
			t.Fatal(err)
		}
		cp, err := indCheckAnchorLine(a, keys)
		if err != nil {
			t.Fatalf("anchor: %v", err)
		}
		if len(anchored) > 0 && cp.size < anchored[len(anchored)-1].size {
			t.Errorf("anchored sizes decrease: %d after %d", cp.size, anchored[len(anchored)-1].size)
		}
		if cp.size > n {
			t.Fatalf("anchored checkpoint of size %d beyond the log's %d records", cp.size, n)
		}
		if got := indMTH(lg.leaves[:cp.size]); got != cp.root {
			t.Errorf("anchored checkpoint of size %d: root %x, the records give %x", cp.size, cp.root, got)
		}
		anchored = append(anchored, cp)
	}
	if len(anchored) < 3 {
		t.Fatalf("only %d anchored checkpoints", len(anchored))
	}

	// Section 17: every seal is signed by the same key, describes its
	// records, and the seals tile the log from seq 1.
	seals, _ := filepath.Glob(filepath.Join(d.data, "audit.sealed", "*.seal"))
	slices.Sort(seals)
	next := uint64(1)
	for i, f := range seals {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		body, _, err := indOpenNote(string(raw), keys)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		sl, err := indParseSeal(body)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		prevHash, prevRoot := indZero, sha256.Sum256(nil)
		if sl.first > 1 {
			prevHash, prevRoot = lg.hashes[sl.first-2], indMTH(lg.leaves[:sl.first-1])
		}
		switch {
		case sl.segment != uint64(i+1) || filepath.Base(f) != fmt.Sprintf("%06d.seal", sl.segment):
			t.Errorf("%s: segment %d", f, sl.segment)
		case sl.first != next || sl.prevSeq != sl.first-1 || sl.headSeq != sl.last || sl.last < sl.first || sl.last > n:
			t.Errorf("%s: records %d..%d, prev %d, head %d; expected to start at %d", f, sl.first, sl.last, sl.prevSeq, sl.headSeq, next)
		case sl.prevHash != prevHash || sl.prevRoot != prevRoot:
			t.Errorf("%s: prev is not the chain hash and root of %d records", f, sl.first-1)
		case sl.headHash != lg.hashes[sl.last-1] || sl.headRoot != indMTH(lg.leaves[:sl.last]):
			t.Errorf("%s: head is not the chain hash and root of %d records", f, sl.last)
		case sl.firstTime != lg.recs[sl.first-1].Time || sl.lastTime != lg.recs[sl.last-1].Time:
			t.Errorf("%s: times %s %s are not records %d and %d's", f, sl.firstTime, sl.lastTime, sl.first, sl.last)
		}
		next = sl.last + 1
	}
	if len(seals) < 3 {
		t.Fatalf("only %d seals", len(seals))
	}

	// Section 13, `audit prove`: an inclusion proof against a signed checkpoint.
	seq := anchored[len(anchored)/2].size - 1
	var pr struct {
		Format     string        `json:"format"`
		Seq        uint64        `json:"seq"`
		Leaf       uint64        `json:"leaf"`
		LeafHash   string        `json:"leaf_hash"`
		RecordHash string        `json:"record_hash"`
		Anchor     indAnchorLine `json:"anchor"`
		Proof      []string      `json:"proof"`
	}
	if err := json.Unmarshal([]byte(mustCustos(t, "audit", "prove", "--data-dir", d.data, "--purpose", "HOPERAT",
		"--seq", strconv.FormatUint(seq, 10), "--json")), &pr); err != nil {
		t.Fatal(err)
	}
	cp, err := indCheckAnchorLine(pr.Anchor, keys)
	if err != nil {
		t.Fatalf("prove's checkpoint: %v", err)
	}
	leaf := lg.leaves[seq-1]
	var path [][32]byte
	for _, s := range pr.Proof {
		h, err := indB64Hash(s)
		if err != nil {
			t.Fatal(err)
		}
		path = append(path, h)
	}
	if pr.Leaf != seq-1 || pr.LeafHash != base64.StdEncoding.EncodeToString(leaf[:]) || pr.RecordHash != lg.hashes[seq-1] {
		t.Errorf("prove --seq %d: leaf %d %s record hash %s; the record gives leaf %d %x hash %s",
			seq, pr.Leaf, pr.LeafHash, pr.RecordHash, seq-1, leaf, lg.hashes[seq-1])
	}
	if err := indCheckInclusion(seq-1, cp.size, leaf, path, cp.root); err != nil {
		t.Errorf("prove --seq %d: %v", seq, err)
	}

	// Section 13: a bundle from inside one segment across the next seals.
	first, _ := indParseSealFile(t, seals[0], keys)
	from, to := first.last-2, anchored[len(anchored)-2].size-3
	bundle := filepath.Join(work, "bundle")
	mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--out", bundle,
		"--from-seq", strconv.FormatUint(from, 10), "--to-seq", strconv.FormatUint(to, 10))
	if p := indVerifyBundle(bundle, keys); len(p) > 0 {
		t.Fatalf("the bundle does not verify by section 13:\n%s", strings.Join(p, "\n"))
	}
	if o, e, code := custos(t, nil, "audit", "verify", "--bundle", bundle, "--pubkey", vkeys); code != 0 {
		t.Fatalf("audit verify --bundle: exit %d\n%s%s", code, o, e)
	}
	// Section 13: the bracketing checkpoints are the latest anchored of
	// size <= from-1 and the first of size >= to.
	var lowerWant, upperWant uint64
	for _, cp := range anchored {
		if cp.size <= from-1 {
			lowerWant = max(lowerWant, cp.size)
		}
		if cp.size >= to && (upperWant == 0 || cp.size < upperWant) {
			upperWant = cp.size
		}
	}
	var man2 indManifest
	if raw, err := os.ReadFile(filepath.Join(bundle, "manifest.json")); err != nil || json.Unmarshal(raw, &man2) != nil {
		t.Fatalf("manifest: %v", err)
	}
	if man2.LowerSize != lowerWant || man2.UpperSize != upperWant {
		t.Errorf("bundle %d..%d: checkpoints of sizes %d and %d; section 13 says the anchor's %d and %d",
			from, to, man2.LowerSize, man2.UpperSize, lowerWant, upperWant)
	}
	// Section 6: the CSV's columns are the document's, and its hash
	// column is each record's chain hash.
	cols := regexp.MustCompile("columns\\s+`([^`]+)`").FindStringSubmatch(string(doc))
	f, err := os.Open(filepath.Join(bundle, "audit.csv"))
	if err != nil || cols == nil {
		t.Fatalf("audit.csv: %v; section 6 columns found: %v", err, cols != nil)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(rows) != int(to-from+2) {
		t.Fatalf("audit.csv: %d rows, %v", len(rows), err)
	}
	if want := strings.Split(strings.Join(strings.Fields(cols[1]), ""), ","); !slices.Equal(rows[0], want) {
		t.Errorf("audit.csv header %q, section 6 says %q", rows[0], want)
	}
	for i, row := range rows[1:] {
		seq := from + uint64(i)
		if row[1] != strconv.FormatUint(seq, 10) || row[len(row)-1] != lg.hashes[seq-1] || row[len(row)-2] != lg.recs[seq-1].PrevHash {
			t.Errorf("audit.csv row %d: seq %s hash %s; record %d has hash %s", i+2, row[1], row[len(row)-1], seq, lg.hashes[seq-1])
		}
	}
	// The bundle's records are the log's.
	for i, l := range indLines(t, filepath.Join(bundle, "records.jsonl")) {
		if !bytes.Equal(l, all[from-1+uint64(i)]) {
			t.Errorf("bundle line %d is not record %d of the log", i+1, from+uint64(i))
		}
	}

	// A bundle from seq 1: no lower checkpoint, an empty consistency proof.
	bundle1 := filepath.Join(work, "bundle1")
	mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--out", bundle1,
		"--from-seq", "1", "--to-seq", strconv.FormatUint(from, 10))
	if p := indVerifyBundle(bundle1, keys); len(p) > 0 {
		t.Errorf("the bundle from seq 1 does not verify by section 13:\n%s", strings.Join(p, "\n"))
	}

	// Checkpoints re-signed with the dev key, in forms the document allows
	// or refuses.
	indCheckpointVariants(t, d.data, bundle, vkeys, keys)

	// Tampering: each is rejected by both verifiers, naming what is wrong.
	indTamperData(t, d.data, vkeys, seals)
	indTamperBundles(t, bundle, vkeys, keys, from, indLines(t, filepath.Join(d.data, "checkpoints.jsonl")))
	indTamperLog(t, all, anchored)
}

func indParseSealFile(t *testing.T, f string, keys []indKey) (indSeal, error) {
	t.Helper()
	raw, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	body, _, err := indOpenNote(string(raw), keys)
	if err != nil {
		t.Fatal(err)
	}
	return indParseSeal(body)
}

// indDocBlock is the fenced code block of language lang in doc whose text
// begins with prefix.
func indDocBlock(t *testing.T, doc, lang, prefix string) string {
	t.Helper()
	for _, part := range strings.Split(doc, "```"+lang+"\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		if strings.HasPrefix(block, prefix) {
			return block
		}
	}
	t.Fatalf("docs/audit-format.md has no ```%s block beginning %q", lang, prefix)
	return ""
}

// indVerifyLog checks a whole exported log by sections 2 and 3, and
// against anchored checkpoints (section 12): a log shorter than one, or
// whose records do not give its root, is not the log that was signed.
func indVerifyLog(lines [][]byte, anchored []indCheckpoint) []string {
	lg, probs := indCheckRecords(lines, 1, indZero)
	for _, cp := range anchored {
		if cp.size > uint64(len(lines)) {
			probs = append(probs, fmt.Sprintf("checkpoint of size %d: the log has only %d records (truncated)", cp.size, len(lines)))
			continue
		}
		if indMTH(lg.leaves[:cp.size]) != cp.root {
			probs = append(probs, fmt.Sprintf("checkpoint of size %d: the records do not give its root", cp.size))
		}
	}
	return probs
}

func indTamperLog(t *testing.T, all [][]byte, anchored []indCheckpoint) {
	k := len(all) / 2
	flip := func(l []byte) []byte {
		l = slices.Clone(l)
		i := bytes.Index(l, []byte(`"event_id":"`)) + len(`"event_id":"`)
		l[i] ^= 0x01 // a hex digit stays a letter or digit: still canonical
		return l
	}
	cases := []struct {
		name  string
		lines [][]byte
		want  string
	}{
		{"flip", slices.Concat(all[:k], [][]byte{flip(all[k])}, all[k+1:]), fmt.Sprintf("seq %d: chain_break", k+2)},
		{"drop", slices.Concat(all[:k], all[k+1:]), fmt.Sprintf("line %d: seq %d, expected %d", k+1, k+2, k+1)},
		{"reorder", slices.Concat(all[:k], [][]byte{all[k+1], all[k]}, all[k+2:]), fmt.Sprintf("line %d: seq %d, expected %d", k+1, k+2, k+1)},
		{"truncate", all[:anchored[len(anchored)-1].size-1], fmt.Sprintf("checkpoint of size %d: the log has only", anchored[len(anchored)-1].size)},
	}
	for _, c := range cases {
		p := indVerifyLog(c.lines, anchored)
		if !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, c.want) }) {
			t.Errorf("log %s: the independent verifier says %q, want %q", c.name, p, c.want)
		}
	}
}

// indTamperBundles damages copies of the bundle and requires both this
// verifier and `custos audit verify --bundle` to reject each, naming it.
func indTamperBundles(t *testing.T, bundle, vkeys string, keys []indKey, from uint64, anchorLines [][]byte) {
	lines := indLines(t, filepath.Join(bundle, "records.jsonl"))
	cps := indLines(t, filepath.Join(bundle, "checkpoints.jsonl"))
	k := len(lines) / 2
	kseq := from + uint64(k)
	flip := func(l []byte) []byte {
		l = slices.Clone(l)
		i := bytes.Index(l, []byte(`"event_id":"`)) + len(`"event_id":"`)
		l[i] ^= 0x01
		return l
	}
	join := func(ls [][]byte) []byte { return append(bytes.Join(ls, []byte("\n")), '\n') }
	// another signed checkpoint than the upper one
	var other []byte
	for _, l := range anchorLines {
		if !bytes.Equal(l, cps[len(cps)-1]) && !bytes.Equal(l, cps[0]) {
			other = l
		}
	}
	cases := []struct {
		name     string
		file     string
		content  []byte
		manifest bool // update the manifest's digest
		mine     string
		custos   string
	}{
		{"flip a byte", "records.jsonl", join(slices.Concat(lines[:k], [][]byte{flip(lines[k])}, lines[k+1:])), true,
			fmt.Sprintf("seq %d: chain_break", kseq+1), fmt.Sprintf("seq %d", kseq+1)},
		{"flip a byte, manifest kept", "records.jsonl", join(slices.Concat(lines[:k], [][]byte{flip(lines[k])}, lines[k+1:])), false,
			"manifest: records.jsonl has", "records.jsonl"},
		{"drop a record", "records.jsonl", join(slices.Concat(lines[:k], lines[k+1:])), true,
			fmt.Sprintf("seq %d, expected %d", kseq+1, kseq), fmt.Sprintf("seq %d", kseq)},
		{"reorder", "records.jsonl", join(slices.Concat(lines[:k], [][]byte{lines[k+1], lines[k]}, lines[k+2:])), true,
			fmt.Sprintf("seq %d, expected %d", kseq+1, kseq), fmt.Sprintf("seq %d", kseq)},
		{"truncate the last record", "records.jsonl", join(lines[:len(lines)-1]), true,
			"records.jsonl: ", "records.jsonl"},
		{"cut mid-line", "records.jsonl", join(lines)[:len(join(lines))-40], true,
			"non_canonical", "records.jsonl"},
		{"swap the upper checkpoint", "checkpoints.jsonl", join([][]byte{cps[0], other}), true,
			"checkpoint: sizes", "checkpoint"},
		{"swap the checkpoints' order", "checkpoints.jsonl", join([][]byte{cps[1], cps[0]}), true,
			"checkpoint: sizes", "checkpoint"},
	}
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), "b")
		if err := os.CopyFS(dir, os.DirFS(bundle)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), c.content, 0o600); err != nil {
			t.Fatal(err)
		}
		if c.manifest {
			mf := filepath.Join(dir, "manifest.json")
			raw, _ := os.ReadFile(mf)
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			m["files"].(map[string]any)[c.file] = fmt.Sprintf("sha256:%x", sha256.Sum256(c.content))
			raw, _ = json.MarshalIndent(m, "", "  ")
			os.WriteFile(mf, raw, 0o600)
		}
		p := indVerifyBundle(dir, keys)
		if !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, c.mine) }) {
			t.Errorf("bundle, %s: the independent verifier says %q, want %q", c.name, p, c.mine)
		}
		o, e, code := custos(t, nil, "audit", "verify", "--bundle", dir, "--pubkey", vkeys)
		if code == 0 || !strings.Contains(o+e, c.custos) {
			t.Errorf("bundle, %s: custos audit verify --bundle exits %d, want 1 naming %q:\n%s%s", c.name, code, c.custos, o, e)
		} else {
			t.Logf("bundle, %s: custos says:\n%s%s", c.name, o, e)
		}
	}
}

// TestGoldenVectorsAsDocumented re-derives section 7 from the document's
// text: each vector shown is canonical by section 2's rules, hashes (section
// 3) to the hash the document states, is byte for byte the file the
// document names, and the document's shell recipe prints the stated hashes.
func TestGoldenVectorsAsDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repo, "docs", "audit-format.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	_, sec, _ := strings.Cut(doc, "\n## 7. Golden vectors\n")
	sec, _, _ = strings.Cut(sec, "\n## 8.")
	re := regexp.MustCompile("(?s)\\*\\*([a-z0-9-]+)\\*\\*(?: \\([^()]*\\))? — hash\\s+`([0-9a-f]{64})`.*?```(?:json)?\\n(.*?)\\n```")
	vectors := re.FindAllStringSubmatch(sec, -1)
	if len(vectors) != 6 {
		t.Fatalf("section 7 shows %d vectors, the test knows 6", len(vectors))
	}
	invisible := strings.NewReplacer("<DEL>", "\x7f", "<LS>", "\u2028", "<PS>", "\u2029")
	hashes := map[string]string{}
	for _, v := range vectors {
		name, hash, text := v[1], v[2], []byte(invisible.Replace(v[3]))
		hashes[name] = hash
		if _, err := indDecode(text); err != nil {
			t.Errorf("vector %s as shown is not canonical by section 2: %v", name, err)
		}
		if got := indChainHash(text); got != hash {
			t.Errorf("vector %s as shown hashes to %s, the document says %s", name, got, hash)
		}
		file, err := os.ReadFile(filepath.Join(repo, "audit", "testdata", "golden", name+".json"))
		if err != nil {
			t.Errorf("vector %s: %v", name, err)
		} else if !bytes.Equal(file, text) {
			t.Errorf("vector %s: audit/testdata/golden/%s.json is not the bytes the document shows", name, name)
		}
		if sum, err := os.ReadFile(filepath.Join(repo, "audit", "testdata", "golden", name+".sha256")); err != nil || strings.TrimSpace(string(sum)) != hash {
			t.Errorf("vector %s: %s.sha256 is %q, the document says %s (%v)", name, name, sum, hash, err)
		}
	}
	// v2-full follows full (section 7's note): prev_hash and seq.
	if full, err := indDecode([]byte(invisible.Replace(vectors[4][3]))); err != nil || full.PrevHash != hashes["full"] || full.Seq != 43 {
		t.Errorf("v2-full does not follow full: %+v %v", full, err)
	}
	// The recipe, as printed: each command's output is the comment after it.
	recipe := indDocBlock(t, sec, "sh", "{ printf")
	lines := strings.Split(strings.TrimSpace(recipe), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		cmd := exec.Command("sh", "-c", lines[i])
		cmd.Dir = repo
		out, err := cmd.Output()
		if want := strings.TrimPrefix(lines[i+1], "# ") + "\n"; err != nil || string(out) != want {
			t.Errorf("section 7's recipe %q prints %q (%v), the document says %q", lines[i], out, err, want)
		}
	}
}

// indTamperData damages copies of the data directory the way an insider
// would, and requires `custos audit verify --pubkey` to name each.
func indTamperData(t *testing.T, data, vkeys string, seals []string) {
	anchor := func(dir string) {
		f := filepath.Join(dir, "checkpoints.jsonl")
		ls := indLines(t, f)
		var a, b map[string]any
		json.Unmarshal(ls[2], &a)
		json.Unmarshal(ls[3], &b)
		a["note"], b["note"] = b["note"], a["note"]
		ls[2], _ = json.Marshal(a)
		ls[3], _ = json.Marshal(b)
		os.WriteFile(f, append(bytes.Join(ls, []byte("\n")), '\n'), 0o600)
	}
	second, third := filepath.Base(seals[1]), filepath.Base(seals[2])
	cases := []struct {
		name   string
		tamper func(dir string)
		want   string
	}{
		{"a seal note swapped for another's", func(dir string) {
			raw, _ := os.ReadFile(filepath.Join(dir, "audit.sealed", third))
			os.WriteFile(filepath.Join(dir, "audit.sealed", second), raw, 0o400)
		}, "kind=seal_mismatch"},
		{"a seal note removed", func(dir string) { os.Remove(filepath.Join(dir, "audit.sealed", second)) }, "seal note: missing"},
		{"a sealed segment removed", func(dir string) {
			os.Remove(filepath.Join(dir, "audit.sealed", strings.TrimSuffix(second, ".seal")+".db"))
		}, "kind=segment_missing"},
		// The anchors and seal notes cannot be checked then: the line
		// saying so names why, not a damaged head.
		{"a sealed segment removed, the anchor line", func(dir string) {
			os.Remove(filepath.Join(dir, "audit.sealed", strings.TrimSuffix(second, ".seal")+".db"))
		}, "UNCHECKED anchor: not checked, nor the seal notes: the log cannot be opened for writing (audit: audit log is corrupt: segment_missing"},
		{"two anchored checkpoints' notes swapped", anchor, "differ from its note"},
	}
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.CopyFS(dir, os.DirFS(data)); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(dir, "audit.sealed"), 0o700)
		for _, f := range []string{second, third} {
			os.Chmod(filepath.Join(dir, "audit.sealed", f), 0o600)
		}
		c.tamper(dir)
		o, e, code := custos(t, nil, "audit", "verify", "--data-dir", dir, "--pubkey", vkeys)
		if code == 0 || !strings.Contains(o+e, c.want) {
			t.Errorf("data directory, %s: custos audit verify exits %d, want 1 naming %q:\n%s%s", c.name, code, c.want, o, e)
		}
	}
}

// TestCanonicalRulesAgreeWithDecode: section 2's rules, as this file
// implements them from the document, accept exactly the variants of a
// record that custos's decoder accepts. A rule the document leaves out (or
// states otherwise) makes an auditor's verifier pass a record custos calls
// non_canonical, or fail one custos accepts. audit.Decode is only the
// other side of the comparison here.
func TestCanonicalRulesAgreeWithDecode(t *testing.T) {
	base, err := os.ReadFile(filepath.Join(repo, "audit", "testdata", "golden", "v2-minimal.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][2]string{
		"as is":                {"", ""},
		"month 13":             {`2026-11-21T`, `2026-13-21T`},
		"day 0":                {`2026-11-21T`, `2026-11-00T`},
		"February 30":          {`2026-11-21T`, `2026-02-30T`},
		"February 29, 2028":    {`2026-11-21T`, `2028-02-29T`},
		"February 29, 2100":    {`2026-11-21T`, `2100-02-29T`},
		"February 29, 2000":    {`2026-11-21T`, `2000-02-29T`},
		"hour 24":              {`09:30:00.`, `24:00:00.`},
		"minute 60":            {`09:30:00.`, `09:60:00.`},
		"leap second":          {`09:30:00.`, `23:59:60.`},
		"year 0000":            {`2026-11-21T`, `0000-01-01T`},
		"eight digits":         {`.000000000Z`, `.00000000Z`},
		"offset":               {`.000000000Z`, `.000000000+00:00`},
		"lowercase z":          {`.000000000Z`, `.000000000z`},
		"space for T":          {`2026-11-21T`, `2026-11-21 `},
		"seq 0":                {`"seq":1`, `"seq":0`},
		"seq leading zero":     {`"seq":1`, `"seq":01`},
		"seq 2^64":             {`"seq":1`, `"seq":18446744073709551616`},
		"v 3":                  {`"v":2`, `"v":3`},
		"v1 with keys":         {`"v":2`, `"v":1`},
		"escaped DEL":          {`"node":"node-a"`, `"node":"\u007f"`},
		"raw DEL":              {`"node":"node-a"`, "\"node\":\"\x7f\""},
		"uppercase escape":     {`"node":"node-a"`, `"node":"\u001F"`},
		"lowercase escape":     {`"node":"node-a"`, `"node":"\u001f"`},
		"escaped tab":          {`"node":"node-a"`, `"node":"\u0009"`},
		"escaped slash":        {`"node":"node-a"`, `"node":"\/"`},
		"invalid UTF-8":        {`"node":"node-a"`, "\"node\":\"\xff\""},
		"surrogate":            {`"node":"node-a"`, "\"node\":\"\xed\xa0\x80\""},
		"escaped surrogate":    {`"node":"node-a"`, `"node":"\ud83e\ude7a"`},
		"U+FFFF":               {`"node":"node-a"`, "\"node\":\"\uffff\""},
		"keys unsorted":        {`"keys":[]`, `"keys":["b","a"]`},
		"keys empty element":   {`"keys":[]`, `"keys":[""]`},
		"keys duplicate":       {`"keys":[]`, `"keys":["a","a"]`},
		"prev_hash uppercase":  {`"prev_hash":"0000`, `"prev_hash":"A000`},
		"null":                 {`"reason":""`, `"reason":null`},
		"space after colon":    {`"reason":""`, `"reason": ""`},
		"dev as string":        {`"dev":false`, `"dev":"false"`},
		"unknown key":          {`"dev":false`, `"dev":false,"x":1`},
		"duplicate key":        {`"dev":false`, `"dev":false,"dev":false`},
		"trailing newline":     {`0000"}`, "0000\"}\n"},
		"outcome not a word":   {`"outcome":"deny"`, `"outcome":"maybe"`},
		"event_id not a UUID":  {`"event_id":"00000000-0000-4000-8000-000000000001"`, `"event_id":"x"`},
		"roles not a list":     {`"roles":[]`, `"roles":""`},
		"principal keys moved": {`{"sub":"","roles":[],"client_id":""}`, `{"roles":[],"sub":"","client_id":""}`},
	}
	for name, c := range cases {
		b := bytes.Replace(base, []byte(c[0]), []byte(c[1]), 1)
		if c[0] != "" && bytes.Equal(b, base) {
			t.Fatalf("%s: %q is not in the vector", name, c[0])
		}
		_, mine := indDecode(b)
		_, theirs := audit.Decode(b)
		if (mine == nil) != (theirs == nil) {
			t.Errorf("%s: the document's rules say %v, audit.Decode says %v", name, mine, theirs)
		}
	}
}

// indSign signs body as a signed note by the Ed25519 key of seed named
// name (c2sp.org/signed-note), as the dev signing key signs checkpoints.
func indSign(seed []byte, name, body string) string {
	priv := ed25519.NewKeyFromSeed(seed)
	sum := sha256.Sum256(append([]byte(name+"\n\x01"), priv.Public().(ed25519.PublicKey)...))
	sig := append(sum[:4:4], ed25519.Sign(priv, []byte(body))...)
	return body + "\n— " + name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
}

// indCheckpointVariants re-signs the bundle's upper checkpoint with the
// dev key in forms section 12 and check 2 allow or refuse, and requires
// this verifier and custos audit verify --bundle to agree on each.
func indCheckpointVariants(t *testing.T, data, bundle, vkeys string, keys []indKey) {
	var kf struct {
		SigningSeed string `json:"signing_seed"`
	}
	raw, err := os.ReadFile(filepath.Join(data, "dev-keys.json"))
	if err == nil {
		err = json.Unmarshal(raw, &kf)
	}
	seed, err2 := base64.StdEncoding.DecodeString(kf.SigningSeed)
	if err != nil || err2 != nil || len(seed) != ed25519.SeedSize {
		t.Fatalf("dev-keys.json: no signing seed (%v, %v)", err, err2)
	}
	cps := indLines(t, filepath.Join(bundle, "checkpoints.jsonl"))
	var up indAnchorLine
	if err := json.Unmarshal(cps[len(cps)-1], &up); err != nil {
		t.Fatal(err)
	}
	name := keys[0].name
	size := strconv.FormatUint(up.Size, 10)
	body := name + "\n" + size + "\n" + up.Root + "\n"
	if indSign(seed, name, body) != up.Note {
		t.Fatalf("re-signing the upper checkpoint with the dev key does not give its note:\n%s\n%s", indSign(seed, name, body), up.Note)
	}
	cases := []struct {
		name, note string
		ok         bool
	}{
		{"as signed", indSign(seed, name, body), true},
		{"an extension line", indSign(seed, name, body+"extra\n"), false},
		{"size with a leading zero", indSign(seed, name, name+"\n0"+size+"\n"+up.Root+"\n"), false},
		{"root without padding", indSign(seed, name, name+"\n"+size+"\n"+strings.TrimRight(up.Root, "=")+"\n"), false},
		{"another origin", indSign(seed, name, "other.example/x/audit\n"+size+"\n"+up.Root+"\n"), false},
		{"signed under another name", indSign(seed, "other.example/x/audit", body), false},
		{"a second, unknown signature", indSign(seed, name, body) + strings.TrimPrefix(indSign(append([]byte{1}, seed[1:]...), "other", body), body+"\n"), true},
		{"no blank line", strings.Replace(indSign(seed, name, body), "\n\n", "\n", 1), false},
	}
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), "b")
		if err := os.CopyFS(dir, os.DirFS(bundle)); err != nil {
			t.Fatal(err)
		}
		a := up
		a.Note = c.note
		l, _ := json.Marshal(a)
		content := append(bytes.Join(append(slices.Clone(cps[:len(cps)-1]), l), []byte("\n")), '\n')
		os.WriteFile(filepath.Join(dir, "checkpoints.jsonl"), content, 0o600)
		mf := filepath.Join(dir, "manifest.json")
		raw, _ := os.ReadFile(mf)
		var m map[string]any
		json.Unmarshal(raw, &m)
		m["files"].(map[string]any)["checkpoints.jsonl"] = fmt.Sprintf("sha256:%x", sha256.Sum256(content))
		raw, _ = json.MarshalIndent(m, "", "  ")
		os.WriteFile(mf, raw, 0o600)
		mine := indVerifyBundle(dir, keys)
		o, e, code := custos(t, nil, "audit", "verify", "--bundle", dir, "--pubkey", vkeys)
		if (len(mine) == 0) != c.ok || (code == 0) != c.ok {
			t.Errorf("upper checkpoint with %s: want accepted %v; the docs-only verifier says %q, custos exits %d:\n%s%s",
				c.name, c.ok, mine, code, o, e)
		}
	}
}
