// Package config is the YAML configuration file of 'custos serve': its
// schema (File), a strict parser, validation that reports every problem at
// once, and the mapping of each field to the serve flag it stands for.
//
// A configuration file is another way of writing serve's command line. Every
// field maps to exactly one flag (FieldFor, FlagFor); a flag given on the
// command line overrides the file, and the file overrides the flag's
// built-in default (Apply). Environment variables ($VAULT_ADDR,
// $VAULT_CACERT, $CUSTOS_PRINCIPAL_FILE) come last, as they do without a file.
//
// Invariants:
//   - Parsing is strict: an unknown or misspelled field, a duplicate key, a
//     value of the wrong type, or a second YAML document is a Problem naming
//     the line and the field's dotted path (tls.cert_file). Nothing of an
//     invalid file is used: Parse returns either a whole File or Problems.
//   - No secret is ever read from the file: a key that names a secret
//     (token, password, secret_id, ...) and a value that looks like one (a
//     Vault token, a PEM private key, a JWT) are refused, and no message
//     repeats the value. The Vault token stays in $VAULT_TOKEN; AppRole ids
//     are read from files whose paths the file names.
//   - Validation reports every problem it finds, not only the first, each
//     naming its field (or, for a value that came from the command line, its
//     flag).
//   - Plain HTTP is allowed only with dev: true and on a loopback address;
//     everything else needs tls.cert_file and tls.key_file.
//
// The package reads files only to check that the ones the configuration
// names exist (Options.CheckFiles); it never opens a database, Vault or the
// network.
package config
