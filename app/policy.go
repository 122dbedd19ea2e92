package app

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/custos-mcp/custos/policy"
)

// ErrBuiltinPolicy is returned by ReloadPolicy when the App serves the
// built-in policy: there is nothing to reload. It is not a failure.
var ErrBuiltinPolicy = errors.New("app: the built-in policy has nothing to reload")

// openPolicy loads the policy: the built-in default, a directory (Dev
// only: unsigned) or a signed bundle (verification mandatory). Directories
// and bundles are watched and reloaded: a candidate is compiled and its
// Rego tests run off the request path, then swapped in atomically; every
// load and rejection is an audit event.
func (a *App) openPolicy(ctx context.Context) error {
	p := a.o.Policy
	popts := policy.Options{Logger: a.log}
	var src policy.Source
	switch {
	case p.Dir != "":
		src = &policy.DirSource{Dir: p.Dir, Options: popts, AllowNoTests: true}
	case p.Bundle != "":
		keys, err := a.bundleKeys(ctx)
		if err != nil {
			return err
		}
		src = &policy.BundleSource{Path: p.Bundle, Keys: keys, Options: popts}
	default:
		eng, err := policy.Default(ctx, popts)
		if err != nil {
			return fmt.Errorf("loading policy: %w", err)
		}
		a.policy = eng
		return nil
	}
	r, err := policy.New(ctx, src, policy.ReloaderOptions{Logger: a.log, OnEvent: func(ev policy.Event) error {
		if a.srv == nil {
			a.pending = append(a.pending, ev)
			return nil
		}
		return a.srv.AuditPolicyEvent(context.Background(), ev)
	}})
	if err != nil {
		return fmt.Errorf("loading policy: %w", err)
	}
	a.policy, a.reload = r, r
	return nil
}

// bundleKeys are the keys a policy bundle may be signed with: the Vault
// policy key's versions (VaultKeys) and the PEM files of Keys.
func (a *App) bundleKeys(ctx context.Context) ([]policy.VerificationKey, error) {
	var keys []policy.VerificationKey
	if a.o.Policy.VaultKeys {
		vks, err := a.vault.PolicyVerificationKeys(ctx)
		if err != nil {
			return nil, fmt.Errorf("policy verification keys from Vault: %w", err)
		}
		for _, vk := range vks {
			k, err := policy.ParseVerificationKey(vk.ID, vk.PEM)
			if err != nil {
				return nil, err
			}
			keys = append(keys, k)
		}
	}
	for _, pk := range a.o.Policy.Keys {
		pem, err := os.ReadFile(pk.File)
		if err != nil {
			return nil, err
		}
		k, err := policy.ParseVerificationKey(pk.ID, pem)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// ReloadPolicy reloads a directory or bundle policy now (SIGHUP): the
// candidate is compiled and tested off the request path and swapped in;
// a rejected candidate leaves the last good policy serving (the error says
// why). With the built-in policy it returns ErrBuiltinPolicy.
func (a *App) ReloadPolicy(ctx context.Context) (policy.Event, error) {
	if a.reload == nil {
		return policy.Event{}, ErrBuiltinPolicy
	}
	return a.reload.Reload(ctx)
}
