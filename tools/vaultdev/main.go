// Command vaultdev runs custos against a real, local HashiCorp Vault: it
// starts Vault in dev mode (the binary built by tools/vault/build.sh),
// provisions it the way docs/vault.md describes (Transit keys, KV keys, the
// least-privilege custos-server policy, an AppRole, a custos-auditor token
// for the auditor commands' patient lookups), seeds a synthetic data
// set, imports it encrypted at rest, and serves it without --dev on a
// loopback port, logging in to Vault with AppRole: the assembly `custos
// serve` runs (package app), in this process.
//
//	tools/vault/build.sh       # once
//	go run ./tools/vaultdev    # Ctrl-C stops custos and Vault
//
// With --smoke it reads one resource through the go-sdk MCP client, stops
// everything, verifies the audit log and exits: the check behind the
// README's "run against a real Vault" section.
//
// It is a developer tool: a dev Vault keeps everything in memory and is
// started with a random root token that this program never prints.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/secrets/vaulttest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vaultdev:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		work     = flag.String("dir", "", "working directory (default: a new temporary directory, removed at exit)")
		listen   = flag.String("listen", "127.0.0.1:8080", "loopback address custos serves on")
		patients = flag.Int("patients", 50, "synthetic patients to seed")
		smoke    = flag.Bool("smoke", false, "read one resource through an MCP client, stop, verify the audit log and exit")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	repo, err := repoRoot()
	if err != nil {
		return err
	}
	dir := *work
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	} else {
		if dir, err = os.MkdirTemp("", "custos-vaultdev-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	say := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }

	vaultBin := os.Getenv(vaulttest.EnvBinary)
	if vaultBin == "" {
		say("building Vault (tools/vault/build.sh; a cold build takes about 15 minutes)…")
		out, err := command(ctx, repo, nil, filepath.Join(repo, "tools/vault/build.sh")).Output()
		if err != nil {
			return fmt.Errorf("tools/vault/build.sh: %w", err)
		}
		vaultBin = strings.TrimSpace(string(out))
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	srv, err := vaulttest.StartProcess(sctx, vaultBin, filepath.Join(dir, "vault.log"))
	cancel()
	if err != nil {
		return err
	}
	defer srv.Stop()
	prov, err := srv.Provision(ctx, vaulttest.ProvisionOptions{Dir: dir})
	if err != nil {
		return err
	}
	say("Vault %s dev server at %s: transit keys, KV keys, policy custos-server and AppRole provisioned", "1.21.0", srv.Addr)

	custos := filepath.Join(dir, "custos")
	if out, err := command(ctx, repo, nil, "go", "build", "-o", custos, "./cmd/custos").CombinedOutput(); err != nil {
		return fmt.Errorf("building custos: %v\n%s", err, out)
	}
	// The CLI talks to Vault with the custos-server token; serve logs in
	// with AppRole, as a production node would.
	env := []string{"VAULT_ADDR=" + srv.Addr, "VAULT_TOKEN=" + prov.Token}
	envFile := filepath.Join(dir, "vault.env")
	if err := os.WriteFile(envFile, []byte(strings.Join(env, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	// Patient lookups (audit hash, audit report --patient) read every
	// version of the audit key, which custos-server may not list: they
	// take a token of the auditors' policy, as docs/vault.md sets up.
	auditorTok, err := srv.TokenWithPolicy(ctx, secrets.AuditorPolicyName, secrets.AuditorPolicyHCL)
	if err != nil {
		return err
	}
	auditorEnv := []string{"VAULT_ADDR=" + srv.Addr, "VAULT_TOKEN=" + auditorTok}
	auditorFile := filepath.Join(dir, "auditor.env")
	if err := os.WriteFile(auditorFile, []byte(strings.Join(auditorEnv, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	seed, data, tokens := filepath.Join(dir, "synthetic"), filepath.Join(dir, "data"), filepath.Join(dir, "tokens.json")
	steps := [][]string{
		{"seed", "--out", seed, "--patients", fmt.Sprint(*patients)},
		{"import", "--data-dir", data, seed},
	}
	var took []time.Duration
	for _, s := range steps {
		start := time.Now()
		if out, err := command(ctx, dir, env, custos, s...).CombinedOutput(); err != nil {
			return fmt.Errorf("custos %s: %v\n%s", s[0], err, out)
		}
		took = append(took, time.Since(start))
	}
	say("seeded %d synthetic patients (%.1f s) and imported them encrypted at rest with a data key per blob from Transit (%.1f s)",
		*patients, took[0].Seconds(), took[1].Seconds())
	tok, err := command(ctx, dir, nil, custos, "token", "new", "--principal", filepath.Join(seed, "principals", "clinician.json"), "--tokens", tokens, "--ttl", "24h").Output()
	if err != nil {
		return fmt.Errorf("custos token new: %w", err)
	}
	token := strings.TrimSpace(string(tok))

	anchor := filepath.Join(dir, "anchor") // stands for separate storage
	if err := os.MkdirAll(anchor, 0o700); err != nil {
		return err
	}
	// Without --dev custos serves HTTPS only: a throwaway self-signed
	// certificate for the loopback address stands in for the hospital's.
	certFile, keyFile := filepath.Join(dir, "tls-cert.pem"), filepath.Join(dir, "tls-key.pem")
	roots, err := selfSigned(certFile, keyFile)
	if err != nil {
		return err
	}
	// The assembly `custos serve` runs, in this process, without --dev.
	a, err := app.Open(ctx, app.Options{
		DataDir: data, Node: "vaultdev", Version: "vaultdev",
		Logger:      slog.New(slog.NewJSONHandler(os.Stderr, nil)),
		Checkpoints: app.CheckpointOptions{AnchorDir: anchor},
		Vault: &secrets.VaultOptions{Address: srv.Addr,
			AppRole: &secrets.AppRole{RoleIDFile: prov.RoleIDFile, SecretIDFile: prov.SecretIDFile}},
		HTTP: &app.HTTPOptions{Listen: *listen, TokensFile: tokens, CertFile: certFile, KeyFile: keyFile},
	})
	if err != nil {
		return fmt.Errorf("custos: %w", err)
	}
	sctx, cancelServe := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.Serve(sctx) }()
	stopServe := func() error {
		cancelServe()
		return errors.Join(<-served, a.Close())
	}
	url := a.URL()
	say("\ncustos serves MCP at %s (no --dev: keys from Vault, AppRole login)", url)
	say("  clinician bearer token (expires in 24 h): %s", token)
	say("  TLS certificate to trust (self-signed): %s  (node: NODE_EXTRA_CA_CERTS=%s)", certFile, certFile)
	say("  CLI against the same Vault: set -a; . %s; set +a", envFile)
	say("  auditor CLI (custos-auditor token: audit hash, audit report --patient): set -a; . %s; set +a", auditorFile)
	say("  e.g. %s audit verify --data-dir %s   (after Ctrl-C)", custos, data)

	if *smoke {
		uri, err := readOne(ctx, url, token, roots)
		if err != nil {
			stopServe()
			return fmt.Errorf("smoke read: %w", err)
		}
		say("smoke: listed and read %s", uri)
		if err := stopServe(); err != nil {
			return fmt.Errorf("custos serve: %w", err)
		}
		out, err := command(ctx, dir, nil, custos, "audit", "verify", "--data-dir", data).CombinedOutput()
		if err != nil {
			return fmt.Errorf("audit verify: %v\n%s", err, out)
		}
		say("smoke: %s", strings.TrimSpace(string(out)))
		patient, err := firstPatient(filepath.Join(seed, "principals", "clinician.json"))
		if err != nil {
			return err
		}
		out, err = command(ctx, dir, auditorEnv, custos, "audit", "hash", patient, "--data-dir", data, "--purpose", "HOPERAT").CombinedOutput()
		if err != nil {
			return fmt.Errorf("audit hash with the auditor environment: %v\n%s", err, out)
		}
		hash, _, _ := strings.Cut(string(out), "\t")
		say("smoke: audit hash: %s", hash)
		return nil
	}
	say("\nCtrl-C stops custos and Vault.")
	<-ctx.Done()
	return stopServe()
}

func command(ctx context.Context, dir string, env []string, name string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), env...)
	return c
}

// firstPatient is the first patient of a principal file's care team.
func firstPatient(principalFile string) (string, error) {
	raw, err := os.ReadFile(principalFile)
	if err != nil {
		return "", err
	}
	var p struct {
		Patients []string `json:"patients"`
	}
	if err := json.Unmarshal(raw, &p); err != nil || len(p.Patients) == 0 {
		return "", fmt.Errorf("%s: no patients (%v)", principalFile, err)
	}
	return p.Patients[0], nil
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/custos-mcp/custos").Output()
	if err != nil {
		return "", fmt.Errorf("run vaultdev from the custos repository: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// selfSigned writes a self-signed ECDSA P-256 certificate for 127.0.0.1,
// ::1 and localhost, valid for a day, and returns a pool that trusts it.
func selfSigned(certFile, keyFile string) (*x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "custos vaultdev"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool, nil
}

// readOne lists the first page and reads its first text resource.
func readOne(ctx context.Context, url, token string, roots *x509.CertPool) (string, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "vaultdev-smoke", Version: "1"}, nil)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, tr}}}, nil)
	if err != nil {
		return "", err
	}
	defer cs.Close()
	page, err := cs.ListResources(ctx, nil)
	if err != nil {
		return "", err
	}
	for _, r := range page.Resources {
		if !strings.HasPrefix(r.MIMEType, "text/") && !strings.Contains(r.MIMEType, "json") {
			continue
		}
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.URI})
		if err != nil {
			return "", err
		}
		if len(res.Contents) != 1 || res.Contents[0].Text == "" {
			return "", errors.New("empty read")
		}
		return r.URI, nil
	}
	return "", errors.New("no readable text resource on the first page")
}
