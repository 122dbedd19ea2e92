package policy_test

import (
	"context"
	"fmt"

	"github.com/custos-mcp/custos/policy"
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
	// remove:/identifier
	// remove:/beneficiary/display
	// remove:/text
}
