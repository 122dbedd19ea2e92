package vaulttest_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/custos-mcp/custos/secrets/vaulttest"
)

// A development tool can run and provision a Vault outside a test.
func ExampleStartProcess() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "custos-vault-")
	if err != nil {
		log.Fatal(err)
	}
	s, err := vaulttest.StartProcess(ctx, os.Getenv(vaulttest.EnvBinary), filepath.Join(dir, "vault.log"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Stop()
	p, err := s.Provision(ctx, vaulttest.ProvisionOptions{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("VAULT_ADDR=" + s.Addr)
	fmt.Println("role id file:", p.RoleIDFile, "secret id file:", p.SecretIDFile)
}
