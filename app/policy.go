package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/ops"
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
	var ropts policy.ReloaderOptions
	switch {
	case p.Dir != "":
		src = &policy.DirSource{Dir: p.Dir, Options: popts, AllowNoTests: true}
	case p.Bundle != "":
		// Read once here so that a server whose keys cannot be read says
		// so at startup; then again at every load (LoadKeys), so that a
		// rotation of the Vault policy key, or a version withdrawn by
		// raising its min_decryption_version, takes effect at the next
		// rollout without a restart.
		keys, err := a.bundleKeys(ctx)
		if err != nil {
			return err
		}
		src = &policy.BundleSource{Path: p.Bundle, Keys: keys, LoadKeys: a.bundleKeys, Options: popts}
		ropts.Rollback, ropts.MinSequence = true, uint64(p.MinSequence) // checked: 0 to policy.MaxSequence
	default:
		eng, err := policy.Default(ctx, popts)
		if err != nil {
			return fmt.Errorf("loading policy: %w", err)
		}
		a.policy = eng
		return nil
	}
	ropts.Logger = a.log
	ropts.OnEvent = func(ev policy.Event) error {
		if a.srv == nil {
			a.pending = append(a.pending, ev)
			return nil
		}
		return a.recordPolicyEvent(context.Background(), ev)
	}
	r, err := policy.New(ctx, src, ropts)
	if err != nil {
		return fmt.Errorf("loading policy: %w", err)
	}
	a.policy, a.reload = r, r
	return nil
}

// recordPolicyEvent writes ev to the audit log (Server.AuditPolicyEvent)
// and counts it in the metrics: a load once its record is written (the
// Reloader swaps it in then; a load whose record fails does not take
// effect), a rejection when it is first offered, whether or not its record
// could be written (not again when Watch offers it late).
func (a *App) recordPolicyEvent(ctx context.Context, ev policy.Event) error {
	err := a.srv.AuditPolicyEvent(ctx, ev)
	switch {
	case ev.Kind == policy.EventLoaded && err == nil:
		a.metrics.PolicyLoaded(ev.Revision, ev.BundleDigest, ev.Sequence, ev.Time)
		a.polState.loaded(ev.Time)
	case ev.Kind == policy.EventRejected && !ev.Late:
		a.metrics.PolicyRejected(policyRejectClass(ev.Err), ev.Time)
		a.polState.rejectedEvent(ev)
	}
	return err
}

// policyRejectClass is the reason label of custos_policy_rejections_total
// for a candidate refused with err (policy's error vocabulary); the text of
// err stays in the log and the audit record.
func policyRejectClass(err error) string {
	switch {
	case errors.Is(err, policy.ErrEventHook):
		return ops.PolicyRejectHook
	case errors.Is(err, policy.ErrRollback):
		return ops.PolicyRejectRollback
	case errors.Is(err, policy.ErrBatchDisagrees): // wrapped in ErrTestsFailed
		return ops.PolicyRejectAgreement
	case errors.Is(err, policy.ErrTestsFailed):
		return ops.PolicyRejectTest
	case errors.Is(err, policy.ErrCompile):
		return ops.PolicyRejectCompile
	case errors.Is(err, policy.ErrSignature):
		return ops.PolicyRejectSignature
	case errors.Is(err, policy.ErrKey):
		return ops.PolicyRejectKey
	case errors.Is(err, policy.ErrBundle):
		return ops.PolicyRejectBundle
	}
	return ops.Other
}

// bundleKeys are the keys a policy bundle may be signed with: the Vault
// policy key's versions (VaultKeys) and the PEM files of Keys, read anew at
// each call: the policy source calls it at every load.
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

// armRollback turns on rollback protection for a bundle policy: the
// high-water mark is the last policy/load of a bundle in the audit log
// (policyHighWater), and the bundle loaded at startup must advance it
// (policy.CheckSequence). One that does not is refused, the refusal is
// recorded (policy/reject) and the server does not start; with
// --policy-allow-rollback it loads, and its policy/load record names the
// refusal it overrode. It runs once the audit log is open and before the
// pending initial load is recorded.
func (a *App) armRollback(ctx context.Context) error {
	if a.reload == nil || a.o.Policy.Bundle == "" {
		return nil
	}
	hw, err := policyHighWater(ctx, a.audit)
	if err != nil {
		return fmt.Errorf("policy rollback protection: reading the high-water mark from the audit log: %w", err)
	}
	aerr := a.reload.Arm(hw, a.o.Policy.AllowRollback)
	re, isRollback := errors.AsType[*policy.RollbackError](aerr)
	switch {
	case aerr != nil && !isRollback:
		return aerr
	case aerr == nil:
		if a.o.Policy.AllowRollback {
			a.log.Warn("--policy-allow-rollback given, but the bundle advances the high-water mark: nothing was overridden",
				"bundle_sequence", a.reload.Current().BundleSequence(), "high_water_sequence", hw.Sequence)
		}
		return nil
	case a.o.Policy.AllowRollback && re.Sequence != 0 && re.MinSequence == 0:
		a.log.Warn("policy rollback allowed by the operator (--policy-allow-rollback)", "reason", re.Error())
		for i := range a.pending {
			if a.pending[i].Kind == policy.EventLoaded {
				a.pending[i].RollbackOverride, a.pending[i].Rollback = re.Error(), re
			}
		}
		return nil
	}
	// Refused: the refusal is recorded instead of the load, and nothing
	// serves.
	cand := a.reload.Current() // loaded, not yet serving: the candidate refused
	rej := policy.Event{Kind: policy.EventRejected, Time: time.Now().UTC(), Source: a.reload.Describe(),
		CandidateDigest: re.Digest, CandidateRevision: cand.Revision(), CandidateSequence: re.Sequence, CandidateKeyID: cand.BundleKeyID(),
		Reason: re.Error(), Rollback: re}
	a.pending = nil
	if err := a.srv.AuditPolicyEvent(ctx, rej); err != nil {
		return fmt.Errorf("loading policy: %w (and the refusal could not be recorded: %w)", aerr, err)
	}
	if re.MinSequence != 0 {
		return fmt.Errorf("loading policy: %w (deploy a bundle claiming at least %d; the floor is the operator's setting, which no override lowers)", aerr, re.MinSequence)
	}
	if re.Sequence == 0 {
		return fmt.Errorf("loading policy: %w (a bundle without a claim cannot be forced: re-sign it with custos policy sign --sequence N)", aerr)
	}
	return fmt.Errorf("loading policy: %w (to serve this bundle anyway, start once with --policy-allow-rollback)", aerr)
}

// actionKey and policyLoadValue find a record's action in its canonical
// encoding: the first `"action":"` is the action member (a string value
// holds its quotes escaped, and no member of a record is an object with an
// action of its own), and it comes early (after v, seq, event_id, time and
// node), so the search stops there instead of reading the whole record.
var (
	actionKey       = []byte(`"action":"`)
	policyLoadValue = []byte(server.ActionPolicyLoad + `"`)
)

// isPolicyLoad reports whether canonical record c is a policy/load, by its
// bytes (a pre-filter: the caller decodes it). A plain bytes.Contains of
// the whole marker is the reference (TestIsPolicyLoadAgreesWithContains).
func isPolicyLoad(c []byte) bool {
	i := bytes.Index(c, actionKey)
	return i >= 0 && bytes.HasPrefix(c[i+len(actionKey):], policyLoadValue)
}

// policyHighWater is the rollback high-water mark the audit log holds: that
// of its last policy/load record of a bundle (server.PolicyHighWater), or
// the zero mark if it has none. The log is read backwards from its head in
// chunks, so a server restarted often reads little of it.
func policyHighWater(ctx context.Context, l *audit.Log) (policy.HighWater, error) {
	const chunk = 4096
	head, _ := l.Head()
	for to := head; to >= 1; {
		from := uint64(1)
		if to > chunk {
			from = to - chunk + 1
		}
		var hw policy.HighWater
		found := false
		err := l.Records(ctx, from, to, func(_ uint64, c []byte) error {
			if !isPolicyLoad(c) {
				return nil
			}
			r, err := audit.Decode(c)
			if err != nil {
				return err
			}
			h, ok, err := server.PolicyHighWater(r)
			if ok {
				hw, found = h, true
			}
			return err
		})
		if err != nil {
			return policy.HighWater{}, err
		}
		if found {
			return hw, nil
		}
		to = from - 1
	}
	return policy.HighWater{}, nil
}
