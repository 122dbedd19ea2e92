package bundle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseCheckpointBody: the strict body parser accepts exactly the
// bodies it would write.
func FuzzParseCheckpointBody(f *testing.F) {
	f.Add([]byte("custos.example-hospital/node-1/audit\n45\nq0DzX+gwH9ZJ01K/vKk/W5YBj/xNTPDBkgxQlCvTy/U=\n"))
	f.Add([]byte("o\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"))
	f.Add([]byte("o\n01\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"))
	f.Add([]byte("o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\next\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		origin, size, root, err := parseCheckpointBody(body)
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("error %v does not wrap ErrBadCheckpoint", err)
			}
			return
		}
		again := fmt.Sprintf("%s\n%d\n%s\n", origin, size, b64(root[:]))
		if again != string(body) {
			t.Fatalf("accepted non-canonical body %q (canonical %q)", body, again)
		}
	})
}

// FuzzParseAnchorLine: anchor lines never panic the parser, and an
// accepted line's fields agree with its note.
func FuzzParseAnchorLine(f *testing.F) {
	k := newTestKey(f, testOrigin, 1)
	src := newMemSource(f, 3)
	f.Add(checkpoints(f, k, src, 3)[0])
	f.Add([]byte(`{"size":1,"root":"AA==","note":"x\n\n"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		c, err := parseAnchorLine(line)
		if err != nil {
			return
		}
		text, err := noteText(c.Note)
		if err != nil {
			t.Fatal(err)
		}
		o, s, r, err := parseCheckpointBody(text)
		if err != nil || o != c.Origin || s != c.Size || r != c.Root {
			t.Fatalf("accepted line disagrees with its note: %v", err)
		}
	})
}

// FuzzVerifyRecordsTamper: any change to records.jsonl — a byte replaced,
// inserted or deleted anywhere, or a line removed, duplicated or moved — is
// detected by the proofs, not just by the manifest digest.
func FuzzVerifyRecordsTamper(f *testing.F) {
	src := newMemSource(f, 24)
	k := newTestKey(f, testOrigin, 1)
	base := filepath.Join(f.TempDir(), "bundle")
	if _, err := Write(context.Background(), base, src, WriteOptions{From: 5, To: 20, Checkpoints: checkpoints(f, k, src, 3, 22)}); err != nil {
		f.Fatal(err)
	}
	orig, err := os.ReadFile(filepath.Join(base, FileRecords))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(0), uint32(100), byte('x')) // replace a byte
	f.Add(uint8(1), uint32(0), byte('{'))   // insert a byte
	f.Add(uint8(2), uint32(9999), byte(0))  // delete a byte
	f.Add(uint8(3), uint32(3), byte(0))     // delete line 3
	f.Add(uint8(4), uint32(7), byte(0))     // duplicate line 7
	f.Add(uint8(5), uint32(2), byte(9))     // move line 2 to 9
	f.Add(uint8(6), uint32(4000), byte(0))  // truncate
	f.Add(uint8(0), uint32(len(orig)-1), byte(' '))
	f.Fuzz(func(t *testing.T, op uint8, pos uint32, x byte) {
		b := bytes.Clone(orig)
		lines := bytes.SplitAfter(b, []byte("\n"))
		lines = lines[:len(lines)-1] // trailing empty element
		p := int(pos) % len(b)
		l := int(pos) % len(lines)
		switch op % 7 {
		case 0:
			if b[p] == x {
				return
			}
			b[p] = x
		case 1:
			b = append(b[:p], append([]byte{x}, b[p:]...)...)
		case 2:
			b = append(b[:p], b[p+1:]...)
		case 3:
			b = bytes.Join(append(lines[:l:l], lines[l+1:]...), nil)
		case 4:
			b = bytes.Join(append(lines[:l+1:l+1], lines[l:]...), nil)
		case 5:
			to := int(x) % len(lines)
			if to == l {
				return
			}
			mv := lines[l]
			rest := append(lines[:l:l], lines[l+1:]...)
			rest = append(rest[:to:to], append([][]byte{mv}, rest[to:]...)...)
			b = bytes.Join(rest, nil)
		case 6:
			b = b[:p]
		}
		if bytes.Equal(b, orig) {
			return
		}
		dir := filepath.Join(t.TempDir(), "b")
		os.Mkdir(dir, 0o700)
		for _, name := range []string{FileManifest, FileCheckpoints, FileProof} {
			data, _ := os.ReadFile(filepath.Join(base, name))
			os.WriteFile(filepath.Join(dir, name), data, 0o600)
		}
		os.WriteFile(filepath.Join(dir, FileRecords), b, 0o600)
		tr, err := Verify(dir, []byte(k.vkey))
		if err == nil || tr.OK {
			t.Fatalf("tampering (op %d pos %d x %d) not detected", op%7, pos, x)
		}
		beyondDigest := false
		for _, p := range tr.Problems {
			if p.Check != CheckManifest {
				beyondDigest = true
			}
		}
		if !beyondDigest {
			t.Fatalf("tampering (op %d) detected only by the manifest digest:\n%s", op%7, tr.Text())
		}
	})
}
