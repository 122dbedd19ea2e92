package policy_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"github.com/custos-mcp/custos/policy"
	custosrego "github.com/custos-mcp/custos/rego"
)

func ExampleEngine_Decide() {
	ctx := context.Background()
	engine, err := policy.Default(ctx, policy.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := engine.Decide(ctx, policy.Input{
		Principal: policy.Principal{
			Sub: "bob.billing", Roles: []string{"billing"}, ClientID: "claims-assistant",
			Tenant: "general-hospital",
		},
		PurposeOfUse: "HPAYMT",
		Action:       policy.ActionRead,
		Resource: &policy.Resource{
			URI:  "custos://general-hospital/coverage/0c6e2b7d-5a44-4d39-8f0f-9b1e7c3a2d02",
			Type: "coverage", Patient: "0c6e2b7d-5a44-4d39-8f0f-9b1e7c3a2d02", Tenant: "general-hospital",
		},
	})
	if err != nil {
		fmt.Println("denied:", err)
		return
	}
	fmt.Println("allow:", d.Allow, d.Reasons)
	for _, o := range d.Obligations {
		fmt.Println(o)
	}
	// Output:
	// allow: true [billing_payment]
	// mask:/subscriberId:last4
	// mask:/class/*/value:last4
	// remove:/identifier
	// remove:/beneficiary/display
	// remove:/text
	// scrub:/class/*/name
	// scrub:/network
	// allow::/meta/versionId,/meta/lastUpdated,/meta/profile,/meta/security,/meta/tag,/id,/modifierExtension,/status,/policyHolder/reference,/policyHolder/type,/subscriber/reference,/subscriber/type,/subscriberId,/beneficiary/reference,/beneficiary/type,/dependent,/period,/payor/*/reference,/payor/*/type,/class/*/modifierExtension,/class/*/value,/class/*/name,/order,/network,/costToBeneficiary/*/modifierExtension,/costToBeneficiary/*/valueQuantity,/costToBeneficiary/*/valueMoney,/costToBeneficiary/*/exception/*/modifierExtension,/costToBeneficiary/*/exception/*/period,/subrogation,/contract/*/reference,/contract/*/type,/type/coding/*/system,/type/coding/*/version,/type/coding/*/code,/relationship/coding/*/system,/relationship/coding/*/version,/relationship/coding/*/code,/class/*/type/coding/*/system,/class/*/type/coding/*/version,/class/*/type/coding/*/code,/costToBeneficiary/*/type/coding/*/system,/costToBeneficiary/*/type/coding/*/version,/costToBeneficiary/*/type/coding/*/code,/costToBeneficiary/*/exception/*/type/coding/*/system,/costToBeneficiary/*/exception/*/type/coding/*/version,/costToBeneficiary/*/exception/*/type/coding/*/code
	// pseudonymize::keyedid
}

// ExampleLoadBundle builds a bundle from a policy directory, signs it with a
// P-256 key and loads it, verifying the signature and running its tests.
func ExampleLoadBundle() {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "custos-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(tmp)

	// A policy directory: the default policy and its tests.
	policyDir := filepath.Join(tmp, "policy")
	if err := os.CopyFS(policyDir, custosrego.FS); err != nil {
		fmt.Println(err)
		return
	}
	// A signing key; in production it lives in a file or in Vault Transit.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	signer, err := policy.ParseFileSigner("custos-policy-1", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		fmt.Println(err)
		return
	}

	b, err := policy.BuildBundle(ctx, policyDir, "2026-05-01.1")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := policy.SignBundle(ctx, b, signer); err != nil {
		fmt.Println(err)
		return
	}
	path := filepath.Join(tmp, "policy.tar.gz")
	f, err := os.Create(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	digest, err := policy.WriteBundle(f, b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Println(err)
		return
	}

	engine, info, err := policy.LoadBundle(ctx, path, []policy.VerificationKey{signer.VerificationKey()}, policy.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("revision:", info.Revision, "key:", info.KeyID)
	fmt.Println("digest matches:", engine.BundleDigest() == digest && info.Digest == digest)
	// Output:
	// revision: 2026-05-01.1 key: custos-policy-1
	// digest matches: true
}

// ExampleReloader serves a policy directory and reloads it; a request takes
// the current engine once and decides all its items with it.
func ExampleReloader() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "custos-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	if err := os.CopyFS(dir, custosrego.FS); err != nil {
		fmt.Println(err)
		return
	}
	r, err := policy.New(ctx, policy.DirSource{Dir: dir}, policy.ReloaderOptions{
		OnEvent: func(ev policy.Event) error {
			// Write ev to the audit log here; an error vetoes a load.
			fmt.Println(ev.Kind, ev.Source == "dir:"+dir)
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// On SIGHUP (or run r.Watch(ctx, 0) in a goroutine to poll the files):
	if _, err := r.Reload(ctx); err != nil {
		fmt.Println("rejected:", err)
	}
	engine := r.Current() // once per request
	fmt.Println(engine.Revision() == r.Revision(), engine.BundleDigest() == "")
	// Output:
	// policy_loaded true
	// policy_loaded true
	// true true
}
