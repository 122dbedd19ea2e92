package config_test

import (
	"fmt"

	"github.com/custos-mcp/custos/cmd/custos/internal/config"
)

func ExampleParse() {
	_, err := config.Parse("custos.yaml", []byte(`dev: true
http:
  listn: 127.0.0.1:8080
vault:
  token: hvs.CAESIJ0123456789abcdefghijklmnop
`))
	fmt.Println(err)
	// Output:
	// 2 configuration problems:
	//   custos.yaml: line 3: http.listn: unknown field "listn" (did you mean "listen"?)
	//   custos.yaml: line 5: vault.token: secrets never go in the configuration file: the Vault token is read from $VAULT_TOKEN only, AppRole ids from vault.approle.role_id_file and vault.approle.secret_id_file, dev tokens are stored hashed in http.tokens_file
}

func ExampleFile_Validate() {
	f, err := config.Parse("custos.yaml", []byte(`http:
  listen: 127.0.0.1:8080
tls:
  cert_file: /etc/custos/tls/server.crt
`))
	if err != nil {
		panic(err)
	}
	fmt.Println(f.Validate(config.Options{}))
	// Output:
	// custos.yaml: line 4: tls.cert_file: needs tls.key_file too
}
