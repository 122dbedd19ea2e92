package checkpoint_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log"

	"github.com/custos-mcp/custos/audit/checkpoint"
	"golang.org/x/mod/sumdb/tlog"
)

// devKey is a one-version KeySigner, like secrets.Dev.
type devKey struct{ priv ed25519.PrivateKey }

func (k devKey) Sign(_ context.Context, msg []byte) ([]byte, int, error) {
	return ed25519.Sign(k.priv, msg), 1, nil
}

func (k devKey) PublicKey(int) (ed25519.PublicKey, int, error) {
	return k.priv.Public().(ed25519.PublicKey), 1, nil
}

func Example() {
	ctx := context.Background()
	origin := "custos.example-hospital/node-1/audit"
	ks := devKey{ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))} // fixed key for the example

	signer, vkey, err := checkpoint.NewSigner(ctx, origin, ks)
	if err != nil {
		log.Fatal(err)
	}
	// The tree of one record.
	ckpt := checkpoint.Checkpoint{Origin: origin, Size: 1, Root: tlog.RecordHash([]byte(`{"v":2}`))}
	signed, err := checkpoint.Sign(ckpt, signer)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", signed)

	// An auditor holding the verifier file opens it.
	verifiers, err := checkpoint.ParseVerifierFile(checkpoint.FormatVerifierFile([]string{vkey}))
	if err != nil {
		log.Fatal(err)
	}
	got, _, err := checkpoint.Open(signed, verifiers)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.Size, got.Root == ckpt.Root)
	fmt.Println(vkey)
	// Output:
	// custos.example-hospital/node-1/audit
	// 1
	// zlc4loPhxUnkD0GxAFBAYASGWweBidu+cRQHRUN/hww=
	//
	// — custos.example-hospital/node-1/audit ETQUr2nlfs5VXsGfNqWO60E6f3zkXiS8yOJjdlebL8uzqcV7jlOLXHBYHOT+Vp1YI7HwEG7EJ1iGtwD+5yalF2B9igI=
	// 1 true
	// custos.example-hospital/node-1/audit+113414af+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop
}
