package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/secrets/vaulttest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
)

// TestMonitoringVaultOutage: what an operator sees of a Vault outage past
// --key-max-staleness, from a custos serving with Vault: /readyz answers
// 503 naming the keys and the class of the cause, never Vault's address
// or paths (a load balancer takes the node out), /metrics says
// custos_keys_stale 1, and the alerts that fire from two real scrapes
// with refused reads between them (firingAlerts) are the stale keys, the
// failing readiness check, the refused requests and, as no checkpoint can
// be signed without Vault, the checkpoint lag.
func TestMonitoringVaultOutage(t *testing.T) {
	v := startVault(t, vaulttest.ProvisionOptions{})
	d := newVaultDataset(t, v)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	opsFile := filepath.Join(t.TempDir(), "ops")
	s := serveVault(t, v, d, tokens, v.prov.SecretIDFile, false,
		"--key-max-staleness", "2s", "--key-refresh", "300ms", "--vault-timeout", "300ms",
		"--ops-listen", loopback, "--ops-addr-file", opsFile)
	opsURL := s.waitAddr(t, opsFile)
	cs := connect(t, s.url, tok)
	ctx := context.Background()
	page, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	uri := page.Resources[0].URI
	if code, body := httpGet(t, opsURL+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before the outage: %d %s", code, body)
	}

	if err := v.srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer v.srv.Resume()
	waitFor(t, func() bool {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		return err != nil && strings.Contains(err.Error(), "keys unavailable: request refused")
	})
	scrape := func() map[string]*dto.MetricFamily {
		t.Helper()
		code, body := httpGet(t, opsURL+"/readyz")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, `"keys":"keys stale: Vault unreachable or not answering within --vault-timeout"`) {
			t.Fatalf("/readyz during the outage: %d %s, want 503 naming the keys and the class of the cause", code, body)
		}
		if strings.Contains(body, v.srv.Addr) || strings.Contains(body, "secret/data/") {
			t.Errorf("/readyz names Vault's address or a key path: %s", body)
		}
		_, body = httpGet(t, opsURL+"/metrics")
		fams := parseExposition(t, body)
		if value(fams["custos_keys_stale"]) != 1 || value(fams["custos_keys_refresh_failing"]) != 1 {
			t.Errorf("custos_keys_stale = %v, custos_keys_refresh_failing = %v during the outage, want 1 and 1",
				value(fams["custos_keys_stale"]), value(fams["custos_keys_refresh_failing"]))
		}
		return fams
	}
	before := scrape()
	for range 3 {
		cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	}
	after := scrape()
	want := []string{"CustosKeysRefreshFailing", "CustosKeysStale", "CustosNotReady", "CustosRequestsRefused"}
	// Checkpoints are signed with Vault's Transit key: none is anchored
	// during the outage, so if the refusals were appended between the
	// scrapes (each one, or an aggregate), the checkpoint lags too.
	appends := func(f map[string]*dto.MetricFamily) uint64 {
		return f["custos_audit_append_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleCount()
	}
	if appends(after) > appends(before) && value(after["custos_checkpoint_size"]) == value(before["custos_checkpoint_size"]) {
		want = append(want, "CustosCheckpointLag")
		slices.Sort(want)
	}
	if got := firingAlerts(t, before, after); !slices.Equal(got, want) {
		t.Errorf("alerts firing during a Vault outage: %q, want %q", got, want)
	}
}

// TestMonitoringVaultRefreshFailing: the warning before the cliff. Vault
// stops answering under a serving custos whose staleness limit is far
// off: requests are still served with the keys held and /readyz is 200, but
// /metrics says custos_keys_refresh_failing 1 and the one alert that fires
// is CustosKeysRefreshFailing (until then nothing fired before every
// request was refused at --key-max-staleness). When Vault answers again the
// gauge returns to 0.
func TestMonitoringVaultRefreshFailing(t *testing.T) {
	v := startVault(t, vaulttest.ProvisionOptions{})
	d := newVaultDataset(t, v)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	newToken(t, d.principal("clinician"), tokens)
	opsFile := filepath.Join(t.TempDir(), "ops")
	s := serveVault(t, v, d, tokens, v.prov.SecretIDFile, false,
		"--key-max-staleness", "10m", "--key-refresh", "300ms", "--vault-timeout", "300ms",
		"--ops-listen", loopback, "--ops-addr-file", opsFile)
	opsURL := s.waitAddr(t, opsFile)
	probe := func() (int, map[string]*dto.MetricFamily) {
		t.Helper()
		code, _ := httpGet(t, opsURL+"/readyz")
		_, body := httpGet(t, opsURL+"/metrics")
		return code, parseExposition(t, body)
	}
	if code, fams := probe(); code != http.StatusOK || value(fams["custos_keys_refresh_failing"]) != 0 {
		t.Fatalf("before the outage: /readyz %d, custos_keys_refresh_failing %v", code, value(fams["custos_keys_refresh_failing"]))
	}
	if err := v.srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			v.srv.Resume()
		}
	}()
	waitFor(t, func() bool { return strings.Contains(s.stderr.String(), "vault key refresh failed") })
	code, before := probe()
	if code != http.StatusOK || value(before["custos_keys_refresh_failing"]) != 1 || value(before["custos_keys_stale"]) != 0 {
		t.Fatalf("a refresh failed, keys not stale: /readyz %d, custos_keys_refresh_failing %v, custos_keys_stale %v; want 200, 1, 0",
			code, value(before["custos_keys_refresh_failing"]), value(before["custos_keys_stale"]))
	}
	_, after := probe()
	if got, want := firingAlerts(t, before, after), []string{"CustosKeysRefreshFailing"}; !slices.Equal(got, want) {
		t.Errorf("alerts firing while refreshes fail before the staleness limit: %q, want %q", got, want)
	}
	v.srv.Resume()
	resumed = true
	waitFor(t, func() bool {
		_, fams := probe()
		return value(fams["custos_keys_refresh_failing"]) == 0
	})
}
