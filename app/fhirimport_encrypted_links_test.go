package app

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"slices"
	"testing"

	"github.com/custos-mcp/custos/store"
)

// gcmKeys is a DataKeys of the test: data keys wrapped with AES-GCM under
// a fixed KEK.
type gcmKeys struct{ kek []byte }

func (k gcmKeys) KEK() string { return "test:gcm-kek" }

func (k gcmKeys) aead() cipher.AEAD {
	b, _ := aes.NewCipher(k.kek)
	a, _ := cipher.NewGCM(b)
	return a
}

func (k gcmKeys) NewDataKey(context.Context) ([]byte, []byte, error) {
	key := make([]byte, 32)
	rand.Read(key)
	nonce := make([]byte, 12)
	rand.Read(nonce)
	return key, k.aead().Seal(nonce, nonce, key, nil), nil
}

func (k gcmKeys) UnwrapDataKey(_ context.Context, w []byte) ([]byte, error) {
	if len(w) < 12 {
		return nil, errors.New("short")
	}
	return k.aead().Open(nil, w[:12], w[12:], nil)
}

// A stored link on an encrypted catalog (store.Options.DataKeys):
// storedBinary reads the scratch copy, the Binary gets its new label, and
// its content stays readable with the keys (the relabelled version keeps
// the sealed blob's digest).
func TestImportLinksStoredBinaryEncrypted(t *testing.T) {
	f := newLinkFixture(t)
	dk := gcmKeys{kek: make([]byte, 32)}
	imp := func(full bool, files map[string][]string) (FHIRReport, error) {
		return ImportFHIR(context.Background(), f.cat, f.dir(files), FHIRImport{Tenant: f.tenant, IDKey: f.key, Full: full, DataKeys: dk})
	}
	if _, err := imp(true, map[string][]string{"Patient": {lnkPat}, "Binary": {lnkBin}, "DocumentReference": {lnkDoc("d3", "bx", "a", lnkPSY)}}); err != nil {
		t.Fatal(err)
	}
	rep, err := imp(false, map[string][]string{"DocumentReference": {lnkDoc("d3", "bx", "b", lnkHIV)}})
	if err != nil || rep.Relabelled != 1 || rep.Updated != 1 {
		t.Fatalf("incremental on an encrypted catalog: %+v %v", rep, err)
	}
	st, err := store.Open(f.cat, store.Options{ReadOnly: true, DataKeys: dk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.Get(f.namer.Link("Binary", "bx", "p"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Labels.Sensitivity, []string{"hiv", "psy"}) {
		t.Errorf("labels %v", r.Labels.Sensitivity)
	}
	body, err := st.Blob(context.Background(), r.Digest)
	if err != nil || string(body) != "hi" {
		t.Errorf("blob %q %v", body, err)
	}
}
