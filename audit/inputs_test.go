package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// inputsOf returns every stored input of l in [from, to], by seq.
func inputsOf(t *testing.T, l *Log, from, to uint64) map[uint64]string {
	t.Helper()
	got := map[uint64]string{}
	var last uint64
	err := l.Inputs(context.Background(), from, to, func(seq uint64, in []byte) error {
		if seq <= last {
			t.Errorf("Inputs: seq %d after %d", seq, last)
		}
		last = seq
		got[seq] = string(in)
		return nil
	})
	if err != nil {
		t.Fatalf("Inputs(%d, %d): %v", from, to, err)
	}
	return got
}

func TestInputsStoredAsideNotHashed(t *testing.T) {
	l, path := mustOpen(t, Options{})
	ctx := context.Background()
	plain, err := l.Append(ctx, sampleEntry(0))
	if err != nil {
		t.Fatal(err)
	}
	e := sampleEntry(1)
	e.Input = []byte(`{"marker":"input-only-7f3a"}`)
	withInput, err := l.Append(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if withInput.Input != nil {
		t.Error("the returned Record carries Input: it must be exactly what was hashed")
	}
	if withInput.Hash != HashRecord(Encode(withInput)) {
		t.Error("record hash is not the hash of its encoding")
	}
	if bytes.Contains(Encode(withInput), []byte("input-only-7f3a")) {
		t.Error("the input is part of the canonical record")
	}
	if got := inputsOf(t, l, 1, 10); len(got) != 1 || got[2] != `{"marker":"input-only-7f3a"}` || plain.Seq != 1 {
		t.Errorf("Inputs = %v; want only seq 2", got)
	}
	// The caller's buffer is copied before the (possibly delayed) commit.
	e.Input[2] = 'X'
	if got := inputsOf(t, l, 2, 2); got[2] != `{"marker":"input-only-7f3a"}` {
		t.Errorf("stored input changed with the caller's slice: %q", got[2])
	}
	l.Close()

	// Read-only: inputs are readable; the chain and tree verify (the inputs
	// bucket is outside them).
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := inputsOf(t, ro, 1, 2); len(got) != 1 {
		t.Errorf("read-only Inputs = %v", got)
	}
	if sum, err := ro.Verify(ctx, func(p Problem) { t.Errorf("verify: %s", p) }); err != nil || sum.Problems != 0 {
		t.Fatalf("Verify: %v %+v", err, sum)
	}
}

func TestInputsRejectedEntryWritesNothing(t *testing.T) {
	l, _ := mustOpen(t, Options{})
	cases := map[string][]byte{
		"not json":  []byte(`{"a":`),
		"too large": append(append([]byte(`"`), bytes.Repeat([]byte("a"), MaxInputSize)...), '"'),
	}
	for name, in := range cases {
		e := sampleEntry(0)
		e.Input = in
		if _, err := l.Append(context.Background(), e); !errors.Is(err, ErrBadEntry) {
			t.Errorf("%s: Append = %v, want ErrBadEntry", name, err)
		}
	}
	if seq, _ := l.Head(); seq != 0 {
		t.Fatalf("head %d after rejected entries", seq)
	}
	if got := inputsOf(t, l, 1, 5); len(got) != 0 {
		t.Fatalf("inputs stored for rejected entries: %v", got)
	}
}

func TestInputsRangeAndChunks(t *testing.T) {
	defer func(c uint64) { recordsChunk = c }(recordsChunk)
	recordsChunk = 3
	l, _ := mustOpen(t, Options{})
	for i := 1; i <= 20; i++ {
		e := sampleEntry(i)
		if i%2 == 1 {
			e.Input = []byte(strconv.Itoa(i))
		}
		if _, err := l.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		from, to uint64
		want     []uint64
	}{
		{1, 20, []uint64{1, 3, 5, 7, 9, 11, 13, 15, 17, 19}},
		{2, 9, []uint64{3, 5, 7, 9}},
		{4, 4, nil},
		{19, 1000, []uint64{19}},
	}
	for _, c := range cases {
		got := inputsOf(t, l, c.from, c.to)
		if len(got) != len(c.want) {
			t.Errorf("Inputs(%d, %d) = %v; want seqs %v", c.from, c.to, got, c.want)
			continue
		}
		for _, s := range c.want {
			if got[s] != strconv.FormatUint(s, 10) {
				t.Errorf("Inputs(%d, %d)[%d] = %q", c.from, c.to, s, got[s])
			}
		}
	}
	for _, r := range [][2]uint64{{0, 5}, {5, 4}} {
		if err := l.Inputs(context.Background(), r[0], r[1], func(uint64, []byte) error { return nil }); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Inputs(%d, %d) = %v, want ErrOutOfRange", r[0], r[1], err)
		}
	}
	stop := errors.New("stop")
	n := 0
	err := l.Inputs(context.Background(), 1, 20, func(uint64, []byte) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("fn error: %v after %d calls", err, n)
	}
}

// TestInputsPairedUnderGroupCommit: concurrent Appends share commits (and
// bbolt may rerun a batch); every stored input sits under its own record.
func TestInputsPairedUnderGroupCommit(t *testing.T) {
	l, _ := mustOpen(t, Options{})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			e := sampleEntry(i)
			e.Reason = fmt.Sprintf("r%d", i)
			e.Input = fmt.Appendf(nil, `"r%d"`, i)
			if _, err := l.Append(context.Background(), e); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got := inputsOf(t, l, 1, 64)
	if len(got) != 64 {
		t.Fatalf("%d inputs for 64 records", len(got))
	}
	err := l.Records(context.Background(), 1, 64, func(seq uint64, canon []byte) error {
		r, err := Decode(canon)
		if err != nil {
			return err
		}
		if got[seq] != `"`+r.Reason+`"` {
			t.Errorf("seq %d: record %s has input %s", seq, r.Reason, got[seq])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInputsNeverOverwritten: an input already stored past the head (the
// buckets disagree with meta) stops the append instead of replacing it.
func TestInputsNeverOverwritten(t *testing.T) {
	l, path := mustOpen(t, Options{})
	if _, err := l.Append(context.Background(), sampleEntry(0)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketInputs)
		if err != nil {
			return err
		}
		return b.Put(seqKey(2), []byte(`"planted"`))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	l2, err := Open(path, Options{Node: "n"})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	e := sampleEntry(1)
	e.Input = []byte(`"new"`)
	if _, err := l2.Append(context.Background(), e); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Append over a planted input = %v, want ErrCorrupt", err)
	}
	if got := inputsOf(t, l2, 1, 5); got[2] != `"planted"` {
		t.Fatalf("input overwritten: %v", got)
	}
}

// careTeamInput is a decision input as the server records it: a principal
// with n pseudonymized patients first, then the request.
func careTeamInput(sub string, n int, uri string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"principal":{"sub":%q,"roles":["clinician"],"client_id":"ai","tenant":"t","patients":[`, sub)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p1:%032x"`, i)
	}
	fmt.Fprintf(&b, `]},"purpose_of_use":"TREAT","action":"read","resource":{"uri":%q,"type":"note"}}`, uri)
	return []byte(b.String())
}

// A large principal is stored once, under its digest, and every input that
// carries it comes back byte for byte; small principals and other shapes
// are stored as given.
func TestInputsSharePrincipals(t *testing.T) {
	l, path := mustOpen(t, Options{})
	ctx := context.Background()
	inputs := [][]byte{
		careTeamInput("dr.a", 100, "note://t/1"),
		careTeamInput("dr.a", 100, "note://t/2"),
		careTeamInput("dr.b", 100, "note://t/1"),
		careTeamInput("dr.a", 100, "note://t/3"),
		careTeamInput("dr.c", 1, "note://t/1"),              // principal too small to share
		[]byte(`{"action":"read","principal":{"sub":"x"}}`), // not the server's shape
		[]byte(`{"principal":` + strings.Repeat(" ", 300) + `{"sub":"spaced"} ,"action":"read"}`),
	}
	for i, in := range inputs {
		e := sampleEntry(i)
		e.Input = in
		if _, err := l.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got := inputsOf(t, l, 1, 100)
	for i, in := range inputs {
		if got[uint64(i+1)] != string(in) {
			t.Errorf("input %d:\n got %.120s\nwant %.120s", i+1, got[uint64(i+1)], in)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		docs := tx.Bucket(bucketInputDocs)
		if docs == nil || docs.Stats().KeyN != 3 {
			t.Errorf("input-docs holds %v principals, want 3 (dr.a, dr.b, the spaced one)", docs.Stats().KeyN)
		}
		b := tx.Bucket(bucketInputs)
		for seq, shared := range map[uint64]bool{1: true, 2: true, 3: true, 4: true, 5: false, 6: false, 7: true} {
			v := b.Get(seqKey(seq))
			if (v[0] == inputSharedTag) != shared {
				t.Errorf("seq %d: shared = %v, want %v", seq, v[0] == inputSharedTag, shared)
			}
			if shared && len(v) > 200 {
				t.Errorf("seq %d: %d bytes stored for a shared input", seq, len(v))
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	mustVerify(t, path)
}

// An input whose principal is missing or altered is reported with its seq,
// not returned.
func TestInputsMissingPrincipalIsCorrupt(t *testing.T) {
	for _, damage := range []string{"deleted", "altered"} {
		t.Run(damage, func(t *testing.T) {
			l, path := mustOpen(t, Options{})
			e := sampleEntry(0)
			e.Input = careTeamInput("dr.a", 50, "note://t/1")
			if _, err := l.Append(context.Background(), e); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				docs := tx.Bucket(bucketInputDocs)
				k, v := docs.Cursor().First()
				if damage == "deleted" {
					return docs.Delete(k)
				}
				return docs.Put(k, bytes.Replace(v, []byte("dr.a"), []byte("dr.z"), 1))
			})
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			l = mustOpenPath(t, path, Options{ReadOnly: true})
			err = l.Inputs(context.Background(), 1, 10, func(uint64, []byte) error { return nil })
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Kind != KindInputDocMissing || ce.Seq != 1 {
				t.Fatalf("Inputs = %v, want a %s CorruptError at seq 1", err, KindInputDocMissing)
			}
		})
	}
}

// valueEnd finds where json.Decoder ends the same value, for every shape of
// JSON value, whitespace and escape.
func TestValueEndAgreesWithDecoder(t *testing.T) {
	values := []string{
		`{}`, `[]`, `""`, `0`, `-1.5e+10`, `true`, `false`, `null`,
		`{"a":"}","b":["]",{"c":"\"{"}]}`, `"x\\"`, `"\\\""`, `"\u0000\u20ac"`, `"é"`,
		`[[[[[]]]]]`, `{"k":[1,2,{"x":null}],"s":"a,b}"}`, ` {"pad":1}`, "\n\t [1]",
		`"` + strings.Repeat("p", 300) + `"`, `[` + strings.Repeat(`"x",`, 100) + `"y"]`,
	}
	for _, v := range values {
		for _, after := range []string{``, `,"action":"read"}`, ` ,"a":1}`, `}`, "\n}"} {
			b := []byte(v + after)
			dec := json.NewDecoder(bytes.NewReader(b))
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				t.Fatalf("%q: %v", b, err)
			}
			if got, want := valueEnd(b), int(dec.InputOffset()); got != want {
				t.Errorf("valueEnd(%q) = %d, want %d", b, got, want)
			}
		}
	}
}

// Inputs whose principal is of every JSON kind, at and around the sharing
// threshold, come back byte for byte.
func TestInputsShareEveryKindOfPrincipal(t *testing.T) {
	l, _ := mustOpen(t, Options{})
	pad := func(n int) string { return strings.Repeat("p", n) }
	var inputs []string
	for _, p := range []string{
		`"` + pad(sharedPrincipalMin-2) + `"`, // exactly the threshold
		`"` + pad(sharedPrincipalMin-3) + `"`, // one byte under
		`[` + strings.Repeat(`1,`, 200) + `1]`,
		`{"sub":"` + pad(300) + `","esc":"\"}\\"}`,
		strings.Repeat(" ", 300) + `{"sub":"spaced"}`,
		`123456789` + strings.Repeat("0", 300),
	} {
		inputs = append(inputs, `{"principal":`+p+`,"action":"read"}`, `{"principal":`+p+`}`)
	}
	for i, in := range inputs {
		e := sampleEntry(i)
		e.Input = []byte(in)
		if _, err := l.Append(context.Background(), e); err != nil {
			t.Fatalf("input %d: %v", i, err)
		}
	}
	got := inputsOf(t, l, 1, 100)
	for i, in := range inputs {
		if got[uint64(i+1)] != in {
			t.Errorf("input %d:\n got %.100q\nwant %.100q", i+1, got[uint64(i+1)], in)
		}
	}
	if f := splitInput([]byte(inputs[0]), sha256.Sum256); !f.shared {
		t.Error("a principal of exactly the threshold is not shared")
	}
	if f := splitInput([]byte(inputs[2]), sha256.Sum256); f.shared {
		t.Error("a principal under the threshold is shared")
	}
}

// A clinician's principal, repeated in the input of each of her reads, is
// hashed once: the appends after the first find its SHA-256 in the memo,
// and every input still comes back byte for byte.
func TestAppendHashesAPrincipalOnce(t *testing.T) {
	l, _ := mustOpen(t, Options{})
	hashed := 0
	principalSum256 = func(b []byte) [sha256.Size]byte { hashed++; return sha256.Sum256(b) }
	t.Cleanup(func() { principalSum256 = sha256.Sum256 })
	team := func(sub string) string {
		return `{"sub":"` + sub + `","patients":["` + strings.Repeat("0123456789abcdef", 40) + `"]}`
	}
	inputs := []string{
		`{"principal":` + team("a") + `,"action":"read","resource":{"uri":"1"}}`,
		`{"principal":` + team("a") + `,"action":"read","resource":{"uri":"2"}}`,
		`{"principal":` + team("b") + `,"action":"read","resource":{"uri":"3"}}`,
		`{"principal":` + team("a") + `,"action":"list"}`,
	}
	for i, in := range inputs {
		e := sampleEntry(i)
		e.Input = []byte(in)
		if _, err := l.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	if hashed != 2 {
		t.Errorf("4 appends of 2 principals hashed %d principals, want 2", hashed)
	}
	got := inputsOf(t, l, 1, 10)
	for i, in := range inputs {
		if got[uint64(i+1)] != in {
			t.Errorf("input %d:\n got %.100q\nwant %.100q", i+1, got[uint64(i+1)], in)
		}
	}
}

// The memo's sum is sha256.Sum256 of exactly the bytes asked (the plain
// reference), for new values, repeated ones, values whose memo slot holds
// another value (a forced collision), and past the memo's byte bound; and
// splitInput with it equals splitInput with sha256.Sum256.
func TestPrincipalSumsAgreeWithSHA256(t *testing.T) {
	var c principalSums
	var values [][]byte
	for i := range 300 {
		values = append(values, []byte(fmt.Sprintf(`{"sub":"%d","patients":["%s"]}`, i%50, strings.Repeat("x", 300+i%7))))
	}
	values = append(values, bytes.Repeat([]byte("y"), maxPrincipalSumBytes/16+1)) // too large to keep
	check := func(v []byte) {
		t.Helper()
		if got, want := c.sum(v), sha256.Sum256(v); got != want {
			t.Fatalf("sum(%.40q) = %x, want %x", v, got, want)
		}
	}
	for range 2 {
		for _, v := range values {
			check(v)
		}
	}
	// A collision: b's slot holds a's value and sum.
	a, b := values[0], values[1]
	c.mu.Lock()
	c.m[maphash.Bytes(principalSeed, b)] = principalSum{value: bytes.Clone(a), sum: sha256.Sum256(a)}
	c.mu.Unlock()
	check(b)
	check(a)
	// Past the bound: the memo starts afresh and stays within it.
	big := bytes.Repeat([]byte("z"), maxPrincipalSumBytes/16)
	for i := range 40 {
		v := append(bytes.Clone(big), byte(i))
		check(v)
		check(v)
		if c.bytes > maxPrincipalSumBytes {
			t.Fatalf("memo holds %d bytes, bound %d", c.bytes, maxPrincipalSumBytes)
		}
	}
	for _, v := range values[:20] {
		in := []byte(`{"principal":` + string(v) + `,"action":"read"}`)
		got, want := splitInput(in, c.sum), splitInput(in, sha256.Sum256)
		if got.shared != want.shared || got.sum != want.sum || !bytes.Equal(got.principal, want.principal) || !bytes.Equal(got.value, want.value) {
			t.Fatalf("splitInput(%.40q) with the memo differs from the plain one", in)
		}
	}
}
