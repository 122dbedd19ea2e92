package secrets

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestDevKeysAreRandomCopiesAndNeverPrinted(t *testing.T) {
	a, err := NewDev()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewDev()
	if err != nil {
		t.Fatal(err)
	}
	ka, _ := a.CursorKey(context.Background())
	kb, _ := b.CursorKey(context.Background())
	if len(ka.Bytes) != KeySize {
		t.Fatalf("key size %d, want %d", len(ka.Bytes), KeySize)
	}
	if bytes.Equal(ka.Bytes, kb.Bytes) {
		t.Fatal("two dev providers produced the same key")
	}
	ka.Bytes[0] ^= 0xff
	again, _ := a.CursorKey(context.Background())
	if bytes.Equal(ka.Bytes, again.Bytes) {
		t.Fatal("CursorKey returned the provider's own slice")
	}
	if !a.Dev() {
		t.Fatal("dev provider must report Dev() == true")
	}

	var logbuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logbuf, nil)).Info("k", "key", again)
	for _, s := range []string{fmt.Sprint(again), fmt.Sprintf("%v %+v %s", again, again, again), logbuf.String()} {
		if strings.Contains(s, fmt.Sprintf("%x", again.Bytes)) || strings.Contains(s, string(again.Bytes)) || strings.Contains(s, fmt.Sprint(again.Bytes)) {
			t.Fatalf("key bytes printed: %q", s)
		}
		if !strings.Contains(s, "dev-ephemeral-1") {
			t.Fatalf("key id missing from %q", s)
		}
	}
}
