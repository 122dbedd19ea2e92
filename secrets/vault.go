package secrets

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	vault "github.com/hashicorp/vault/api"
	"github.com/hashicorp/vault/api/auth/approle"
)

// Defaults of VaultOptions.
const (
	DefaultMaxStaleness    = 15 * time.Minute
	DefaultRefreshInterval = time.Minute
	DefaultRequestTimeout  = 2 * time.Second
	DefaultDataKeyTTL      = 5 * time.Minute
	DefaultDataKeyCache    = 65536
	// retainedVersions is how many versions of each KV key (the newest
	// and older ones) are held in memory: cursors sealed just before a
	// rotation still open for their one-hour life. Patient lookups in the
	// audit log do not rely on it: they read every version ever written
	// (AuditKeyHistory).
	retainedVersions = 3
)

// AppRole is AppRole authentication: the role id and the secret id are
// read from files, never from flags or URIs.
type AppRole struct {
	// RoleIDFile holds the role id.
	RoleIDFile string
	// SecretIDFile holds the secret id, or with Wrapped a response-wrapping
	// token whose unwrapped value is the secret id (unwrapped once, at
	// startup; a wrapping token can be used only once).
	SecretIDFile string
	Wrapped      bool
	// MountPath is the AppRole auth mount ("approle" when empty).
	MountPath string
}

// VaultOptions configure OpenVault. Exactly one of Token and AppRole is
// set. Zero durations take the Default values.
type VaultOptions struct {
	// Address is the Vault API address, e.g. https://vault.internal:8200.
	// It must not carry credentials, a query or a fragment.
	Address string
	// Token authenticates with a Vault token (from VAULT_TOKEN; cmd reads
	// the environment). A renewable token is renewed; when it can no longer
	// be renewed the keys go stale and requests fail closed.
	Token string
	// AppRole authenticates with AppRole; the token is renewed and, when
	// it reaches its maximum TTL, custos logs in again.
	AppRole *AppRole
	// TLS configures the client's TLS (CA file etc.); nil uses the system
	// roots.
	TLS *vault.TLSConfig
	// Layout names the paths; empty fields take DefaultLayout's.
	Layout Layout
	// MaxStaleness is the hard limit: keys not refreshed from Vault for
	// longer are not used, and every request fails closed.
	MaxStaleness time.Duration
	// RefreshInterval is how often keys and key versions are re-read
	// (rotation is picked up within one interval). It must be shorter
	// than MaxStaleness.
	RefreshInterval time.Duration
	// RequestTimeout bounds every Vault call, including the ones a request
	// waits for (unwrapping a data key not in the cache).
	RequestTimeout time.Duration
	// DataKeyTTL bounds how long an unwrapped blob data key stays in
	// memory; it is capped at MaxStaleness. DataKeyCacheSize bounds how
	// many are held.
	DataKeyTTL       time.Duration
	DataKeyCacheSize int
	// AuditorOnly opens the provider for audit tools (custos audit hash,
	// report, pubkey): it reads only the audit keyed-hash key versions and
	// the signing key's public keys, which policy "custos-auditor" grants;
	// the cursor key, the blob KEK and signing are neither read nor used.
	AuditorOnly bool
	// Logger receives operational logs: never a token, a key or a secret
	// id. nil discards.
	Logger *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

func (o *VaultOptions) validate() error {
	if o.Address == "" {
		return fmt.Errorf("%w: no Vault address (set VAULT_ADDR or --vault-addr)", ErrBadConfig)
	}
	if err := validateAddress(o.Address); err != nil {
		return err
	}
	switch {
	case o.Token == "" && o.AppRole == nil:
		return fmt.Errorf("%w: no Vault credentials: set VAULT_TOKEN, or AppRole role id and secret id files", ErrBadConfig)
	case o.Token != "" && o.AppRole != nil:
		return fmt.Errorf("%w: both a Vault token and AppRole are configured; choose one", ErrBadConfig)
	case o.AppRole != nil && (o.AppRole.RoleIDFile == "" || o.AppRole.SecretIDFile == ""):
		return fmt.Errorf("%w: AppRole needs both a role id file and a secret id file", ErrBadConfig)
	}
	o.Layout = o.Layout.withDefaults()
	if err := o.Layout.validate(); err != nil {
		return err
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.MaxStaleness, DefaultMaxStaleness)
	def(&o.RefreshInterval, DefaultRefreshInterval)
	def(&o.RequestTimeout, DefaultRequestTimeout)
	def(&o.DataKeyTTL, DefaultDataKeyTTL)
	if o.MaxStaleness < 0 || o.RefreshInterval < 0 || o.RequestTimeout < 0 || o.DataKeyTTL < 0 {
		return fmt.Errorf("%w: negative duration", ErrBadConfig)
	}
	if o.RefreshInterval >= o.MaxStaleness {
		return fmt.Errorf("%w: refresh interval %s must be shorter than the staleness limit %s", ErrBadConfig, o.RefreshInterval, o.MaxStaleness)
	}
	o.DataKeyTTL = min(o.DataKeyTTL, o.MaxStaleness)
	if o.DataKeyCacheSize == 0 {
		o.DataKeyCacheSize = DefaultDataKeyCache
	}
	if o.DataKeyCacheSize < 0 {
		return fmt.Errorf("%w: negative data key cache size", ErrBadConfig)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// validateAddress accepts https://host[:port][/path], http:// only to a
// loopback host (a dev Vault, a local Vault Agent), and nothing that could
// carry a credential. Over plain http the secret id, the token, the KV
// keys and every unwrapped data key would cross the network in clear text.
func validateAddress(addr string) error {
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%w: Vault address must be http(s)://HOST[:PORT]", ErrBadConfig)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return fmt.Errorf("%w: Vault address must not carry credentials, a query or a fragment (secrets are never put in URIs)", ErrBadConfig)
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return fmt.Errorf("%w: Vault address %s: plain http:// only on a loopback host; want https:// (custos's credentials "+
			"and keys would cross the network in clear text)", ErrBadConfig, u.Scheme+"://"+u.Host)
	}
	return nil
}

// loopbackHost reports whether host is localhost or a loopback IP address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// keyState is one immutable snapshot of what was read from Vault.
type keyState struct {
	cursor     []Key // newest first
	audit      Key   // == audits[0]
	audits     []Key // newest first
	id         Key   // the resource id key, newest version (IDKey)
	signing    signingKey
	blobKEKVer int
	// blobKEKMinDecrypt is the blob KEK's min_decryption_version: data
	// keys wrapped under older versions no longer unwrap.
	blobKEKMinDecrypt int
	refreshed         time.Time
}

type signingKey struct {
	latest int
	public map[int]ed25519.PublicKey
}

// Vault is the production provider: keys from HashiCorp Vault (see
// doc.go). It is safe for concurrent use. Close stops its background
// renewal and refresh.
type Vault struct {
	opts   VaultOptions
	client *vault.Client
	log    *slog.Logger

	auth    func(ctx context.Context) (*vault.Secret, error) // logs in; nil for token auth
	logins  atomic.Int64
	state   atomic.Pointer[keyState]
	lastErr atomic.Pointer[refreshFailure]
	// capsSkipped is set once the token was found unable to check its
	// own capabilities (logged once).
	capsSkipped atomic.Bool
	datakeys    *dataKeyCache

	// refreshMu serializes Refresh: the background tick and a Sign that
	// meets a signing version rotated in since the last refresh can both
	// refresh, and without it the slower fetch, begun before the other's,
	// stored its older key state over the newer one (and its error over
	// the other's success). afterFetch, nil but in tests, runs between a
	// refresh's fetch and its store.
	refreshMu  sync.Mutex
	afterFetch func()

	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
}

// OpenVault logs in, reads and checks every key custos needs (both KV
// secrets, both Transit keys, a sign/verify and a data key round trip), and
// starts token renewal and key refresh. It fails closed: any missing path,
// denied permission or malformed key is an error naming the path and the
// policy rule that grants it.
func OpenVault(ctx context.Context, opts VaultOptions) (*Vault, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	cfg := vault.DefaultConfig()
	if cfg.Error != nil {
		return nil, fmt.Errorf("%w: vault client: %v", ErrBadConfig, cfg.Error)
	}
	cfg.Address = opts.Address
	cfg.Timeout = opts.RequestTimeout
	cfg.MaxRetries = 1
	// The retry of a 5xx waits within the request timeout: the client's
	// default wait (1 to 1.5 s) outlasts a shorter --vault-timeout, and
	// Vault's answer ("Vault is sealed") was then reported as "context
	// deadline exceeded".
	cfg.MinRetryWait, cfg.MaxRetryWait = opts.RequestTimeout/8, opts.RequestTimeout/4
	if opts.TLS != nil {
		if err := cfg.ConfigureTLS(opts.TLS); err != nil {
			return nil, fmt.Errorf("%w: vault TLS: %v", ErrBadConfig, err)
		}
	}
	if err := checkClientEnv(cfg); err != nil {
		return nil, err
	}
	client, err := vault.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: vault client: %v", ErrBadConfig, err)
	}
	// The client must not pick up a token from the environment or a
	// token helper behind the configuration's back.
	client.ClearToken()
	v := &Vault{opts: opts, client: client, log: opts.Logger, stop: make(chan struct{})}
	v.datakeys = newDataKeyCache(opts.DataKeyCacheSize)

	var authSecret *vault.Secret
	if opts.AppRole != nil {
		if v.auth, err = v.appRoleLogin(ctx, *opts.AppRole); err != nil {
			return nil, err
		}
		if authSecret, err = v.login(ctx); err != nil {
			return nil, err
		}
	} else {
		client.SetToken(opts.Token)
		cctx, cancel := context.WithTimeout(ctx, opts.RequestTimeout)
		authSecret, err = client.Auth().Token().LookupSelfWithContext(cctx)
		cancel()
		if err != nil {
			if notVault(err) {
				return nil, notVaultErr("look up", "auth/token/lookup-self", opts.Address, "")
			}
			return nil, vaultErr("look up", "auth/token/lookup-self", err, "the token is invalid or expired")
		}
	}
	st, err := v.fetch(ctx, nil)
	if err != nil {
		return nil, err
	}
	if !opts.AuditorOnly {
		if err := v.preflight(ctx, st); err != nil {
			return nil, err
		}
	}
	v.state.Store(st)
	v.done.Add(1)
	go v.background(authSecret)
	v.log.Info("vault keys loaded", "addr", opts.Address, "keys", strings.Join(st.ids(opts.Layout), " "))
	return v, nil
}

// notVault reports whether err is an answer Vault does not give to an
// authentication call: a body that is not Vault's JSON, or 404 (another
// HTTP server at the address, a wrong port, a proxy's page).
func notVault(err error) bool {
	var (
		se *json.SyntaxError
		ue *json.UnmarshalTypeError
		re *vault.ResponseError
	)
	return errors.As(err, &se) || errors.As(err, &ue) || (errors.As(err, &re) && re.StatusCode == http.StatusNotFound)
}

// notVaultErr says that the first call's answer was not Vault's, naming
// the address (it carries no credential: validateAddress).
func notVaultErr(op, api, addr, also string) error {
	return fmt.Errorf("%w: %s %s: the answer is not Vault's (not found, or not Vault's JSON): is %s a Vault server%s? "+
		"(--vault-addr, $VAULT_ADDR)", ErrUnavailable, op, api, addr, also)
}

// checkClientEnv refuses what the Vault client library took from the
// environment (vault.DefaultConfig reads VAULT_*) that would undo custos's
// own checks: VAULT_AGENT_ADDR replaces the address validateAddress
// checked and the logs name, and VAULT_SKIP_VERIFY turns off the
// verification of Vault's certificate even when a CA is given (the library
// only ever sets InsecureSkipVerify). Neither value is repeated: an agent
// address may carry credentials.
func checkClientEnv(cfg *vault.Config) error {
	if cfg.AgentAddress != "" {
		return fmt.Errorf("%w: $VAULT_AGENT_ADDR is set: the Vault client would send custos's credentials there instead of "+
			"the Vault address custos checked; custos reads only --vault-addr or $VAULT_ADDR (give a Vault Agent's address there) "+
			"and refuses VAULT_AGENT_ADDR: unset it", ErrBadConfig)
	}
	if tc := cfg.TLSConfig(); tc != nil && tc.InsecureSkipVerify {
		return fmt.Errorf("%w: $VAULT_SKIP_VERIFY is set: custos never skips verifying Vault's TLS certificate (it would "+
			"send its credentials and receive its keys from whoever answers); unset it and give Vault's CA with --vault-ca-cert "+
			"or $VAULT_CACERT", ErrBadConfig)
	}
	return nil
}

// appRoleLogin reads the role id and secret id once and returns the login
// function used at startup and for every re-login.
func (v *Vault) appRoleLogin(ctx context.Context, a AppRole) (func(context.Context) (*vault.Secret, error), error) {
	roleID, err := readSecretFile(a.RoleIDFile, "AppRole role id")
	if err != nil {
		return nil, err
	}
	if mode, exposed := SecretFileExposed(a.SecretIDFile); exposed {
		return nil, fmt.Errorf("%w: the AppRole secret id file %s is readable by every local user (mode %s); "+
			"make it readable by custos only, e.g. chown root:custos and chmod 0440 (docs/vault.md)", ErrBadConfig, a.SecretIDFile, mode)
	}
	secretID, err := readSecretFile(a.SecretIDFile, "AppRole secret id")
	if err != nil {
		return nil, err
	}
	if a.Wrapped {
		cctx, cancel := context.WithTimeout(ctx, v.opts.RequestTimeout)
		s, err := v.client.Logical().UnwrapWithContext(cctx, secretID)
		cancel()
		if err != nil {
			return nil, vaultErr("unwrap", "sys/wrapping/unwrap", err, "the wrapping token is invalid, expired or was already used")
		}
		id, _ := s.Data["secret_id"].(string)
		if id == "" {
			return nil, fmt.Errorf("%w: the wrapped response holds no secret_id", ErrBadConfig)
		}
		secretID = id
	}
	var opts []approle.LoginOption
	if a.MountPath != "" {
		opts = append(opts, approle.WithMountPath(a.MountPath))
	}
	auth, err := approle.NewAppRoleAuth(roleID, &approle.SecretID{FromString: secretID}, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: approle: %v", ErrBadConfig, err)
	}
	mount := a.MountPath
	if mount == "" {
		mount = "approle"
	}
	return func(ctx context.Context) (*vault.Secret, error) {
		cctx, cancel := context.WithTimeout(ctx, v.opts.RequestTimeout)
		defer cancel()
		s, err := v.client.Auth().Login(cctx, auth)
		if err != nil {
			if notVault(err) {
				return nil, notVaultErr("log in", "auth/"+mount+"/login", v.opts.Address, ", with AppRole enabled at auth/"+mount+"/")
			}
			return nil, vaultErr("log in", "auth/"+mount+"/login", err, "the role id or secret id is wrong, or the secret id expired")
		}
		return s, nil
	}, nil
}

func (v *Vault) login(ctx context.Context) (*vault.Secret, error) {
	s, err := v.auth(ctx)
	if err != nil {
		return nil, err
	}
	v.logins.Add(1)
	v.log.Info("vault login", "method", "approle", "ttl_seconds", s.Auth.LeaseDuration, "renewable", s.Auth.Renewable)
	return s, nil
}

// SecretFileExposed reports whether the file at path (an AppRole secret
// id, or the wrapping token that yields one) is readable by every local
// user, and its mode. Whoever reads a secret id logs in as custos and
// reads every key: OpenVault refuses such a file, as ssh refuses a private
// key, and configuration checks report it. A file that cannot be
// stat'ed is not exposed (reading it fails with its own error).
func SecretFileExposed(path string) (os.FileMode, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	return fi.Mode().Perm(), fi.Mode().Perm()&0o004 != 0
}

func readSecretFile(path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: reading the %s file: %v", ErrBadConfig, what, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return "", fmt.Errorf("%w: the %s file %s must hold exactly one value", ErrBadConfig, what, path)
	}
	return s, nil
}

// fetch reads every key. prev, when not nil, supplies cursor key versions
// already held, so that a refresh reads only what changed.
func (v *Vault) fetch(ctx context.Context, prev *keyState) (*keyState, error) {
	l := v.opts.Layout
	st := &keyState{}
	var err error
	if !v.opts.AuditorOnly {
		if st.cursor, err = v.readKVVersions(ctx, l.CursorKeyPath, prev.heldCursor()); err != nil {
			return nil, err
		}
	}
	if st.audits, err = v.readKVVersions(ctx, l.AuditKeyPath, prev.heldAudit()); err != nil {
		return nil, err
	}
	if !v.opts.AuditorOnly {
		// Checked at startup like every key: imports name resources
		// with it, and the server names them in pseudonymized views
		// (store.Referencer).
		id, err := v.readKV(ctx, l.IDKeyPath, 0)
		if err != nil {
			return nil, err
		}
		st.id = id.key
	}
	st.audit = st.audits[0]

	sk, err := v.readTransitKey(ctx, l.SigningKey, "ed25519")
	if err != nil {
		return nil, err
	}
	st.signing = signingKey{latest: sk.latest, public: map[int]ed25519.PublicKey{}}
	for ver, raw := range sk.keys {
		var m struct {
			PublicKey string `json:"public_key"`
		}
		if b, err := json.Marshal(raw); err == nil {
			_ = json.Unmarshal(b, &m)
		}
		pub, err := base64.StdEncoding.DecodeString(m.PublicKey)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: %s: version %d has no ed25519 public key", ErrMissing, l.TransitPath("keys", l.SigningKey), ver)
		}
		st.signing.public[ver] = ed25519.PublicKey(pub)
	}
	if missing := st.signing.missing(); len(missing) > 0 && (prev == nil || !slices.Equal(missing, prev.signing.missing())) {
		// Vault answers only the versions at or above the key's
		// min_decryption_version: what older ones signed (checkpoints,
		// seal notes, rollback acknowledgements, bundles) no longer
		// verifies with Vault's keys, and fails as "signature not
		// verified". Say why, once, where the operator looks.
		api := l.TransitPath("keys", l.SigningKey)
		v.log.Error("vault signing key: Vault returns no public key for older versions (min_decryption_version raised, or versions trimmed); "+
			"checkpoints, seals and rollback acknowledgements they signed cannot be verified with Vault's keys",
			"path", api, "versions", missing, "fix", "vault write "+api+"/config min_decryption_version=1, or verify with a 'custos audit pubkey' file written before")
	}
	if !v.opts.AuditorOnly {
		bk, err := v.readTransitKey(ctx, l.BlobKey, "aes256-gcm96")
		if err != nil {
			return nil, err
		}
		st.blobKEKVer, st.blobKEKMinDecrypt = bk.latest, bk.minDecrypt
		if err := v.checkCapabilities(ctx); err != nil {
			return nil, err
		}
	}
	st.refreshed = v.opts.Now()
	return st, nil
}

// checkCapabilities asks Vault (sys/capabilities-self, which Vault's
// default policy grants) whether the token may still make the Transit
// calls a refresh does not make itself: sign (checkpoints), datakey and
// decrypt (payloads), rewrap. A rule removed from policy custos-server
// while serving then fails the refresh, naming the rule as a start does,
// rather than only the reads that need it while /readyz stays ready. A
// token whose policies do not allow the check itself (no default policy)
// is not refused for it: the check is logged as skipped.
func (v *Vault) checkCapabilities(ctx context.Context) error {
	l := v.opts.Layout
	paths := []string{
		l.TransitPath("sign", l.SigningKey), l.TransitPath("datakey/wrapped", l.BlobKey),
		l.TransitPath("decrypt", l.BlobKey), l.TransitPath("rewrap", l.BlobKey),
	}
	const api = "sys/capabilities-self"
	cctx, cancel := context.WithTimeout(ctx, v.opts.RequestTimeout)
	defer cancel()
	s, err := v.client.Logical().WriteWithContext(cctx, api, map[string]any{"paths": paths})
	if err != nil {
		err = vaultErr("update", api, err, "")
		if errors.Is(err, ErrPermission) && !isTokenRejected(err) {
			if v.capsSkipped.CompareAndSwap(false, true) {
				v.log.Warn("vault: the token may not check its own capabilities (Vault's default policy grants "+api+"); "+
					"a rule removed from policy "+PolicyName+" will show only in the calls that need it", "err", err)
			}
			return nil
		}
		return err
	}
	if s == nil || s.Data == nil {
		return fmt.Errorf("%w: %s: empty response", ErrUnavailable, api)
	}
	for _, p := range paths {
		caps, _ := s.Data[p].([]any)
		if !slices.ContainsFunc(caps, func(c any) bool { return c == "update" || c == "root" }) {
			return ruleErr("update", p, "update")
		}
	}
	return nil
}

// missing lists the versions 1..latest without a public key, ascending.
func (k signingKey) missing() []int {
	var out []int
	for ver := 1; ver <= k.latest; ver++ {
		if _, ok := k.public[ver]; !ok {
			out = append(out, ver)
		}
	}
	return out
}

func (st *keyState) heldCursor() []Key {
	if st == nil {
		return nil
	}
	return st.cursor
}

func (st *keyState) heldAudit() []Key {
	if st == nil {
		return nil
	}
	return st.audits
}

// readKVVersions reads the newest version of a KV key and up to
// retainedVersions-1 older ones, newest first, reusing keys already held
// (so a refresh reads only what changed). Cursors sealed before a rotation
// keep opening, and audit lookups cover records keyed with an older version.
func (v *Vault) readKVVersions(ctx context.Context, path string, held []Key) ([]Key, error) {
	l := v.opts.Layout
	cur, err := v.readKV(ctx, path, 0)
	if err != nil {
		return nil, err
	}
	out := []Key{cur.key}
	for ver := cur.version - 1; ver >= 1 && len(out) < retainedVersions; ver-- {
		id := kvKeyID(l, path, ver)
		if i := slices.IndexFunc(held, func(k Key) bool { return k.ID == id }); i >= 0 {
			out = append(out, held[i])
			continue
		}
		old, err := v.readKV(ctx, path, ver)
		if err != nil {
			// A destroyed or deleted old version only shortens the
			// overlap; the newest key is what matters.
			v.log.Warn("older key version not readable", "path", l.KVDataPath(path), "version", ver, "err", err)
			break
		}
		out = append(out, old.key)
	}
	return out, nil
}

// ids lists the key versions in force, sorted, in the form recorded in
// audit records: "name=path@N".
func (st *keyState) ids(l Layout) []string {
	out := []string{
		"audit-hmac=" + st.audit.ID,
		l.signingKeyID(st.signing.latest),
	}
	if len(st.cursor) > 0 {
		out = append(out,
			"blob-kek="+l.TransitMount+"/"+l.BlobKey+"@"+strconv.Itoa(st.blobKEKVer),
			"cursor="+st.cursor[0].ID)
	}
	sort.Strings(out)
	return out
}

func kvKeyID(l Layout, path string, ver int) string {
	return l.KVMount + "/" + path + "@" + strconv.Itoa(ver)
}

type kvKey struct {
	key     Key
	version int
}

// readKV reads a KV v2 key (version 0 = newest) and checks its value.
func (v *Vault) readKV(ctx context.Context, path string, version int) (kvKey, error) {
	l := v.opts.Layout
	api := l.KVDataPath(path)
	cctx, cancel := context.WithTimeout(ctx, v.opts.RequestTimeout)
	defer cancel()
	kv := v.client.KVv2(l.KVMount)
	var (
		s   *vault.KVSecret
		err error
	)
	if version == 0 {
		s, err = kv.Get(cctx, path)
	} else {
		s, err = kv.GetVersion(cctx, path, version)
	}
	if err != nil {
		if errors.Is(err, vault.ErrSecretNotFound) {
			return kvKey{}, fmt.Errorf("%w: %s: not found; an administrator writes it with "+
				"'vault kv put -mount=%s %s %s=$(head -c 32 /dev/urandom | base64)' (docs/vault.md)", ErrMissing, api, l.KVMount, path, KVField)
		}
		return kvKey{}, vaultErr("read", api, err, "")
	}
	if s == nil || s.VersionMetadata == nil {
		return kvKey{}, fmt.Errorf("%w: %s: no version metadata (is %q a KV version 2 mount?)", ErrMissing, api, l.KVMount)
	}
	// Vault answers a deleted or destroyed version with its metadata and
	// no data: say so, not that the value is malformed (which sent the
	// operator to write a new one, rotating a key that may never be).
	if m := s.VersionMetadata; m.Destroyed {
		return kvKey{}, fmt.Errorf("%w: %s: version %d was destroyed in Vault (vault kv destroy) and cannot be restored; "+
			"docs/vault.md (Key rotation) says which keys may be written anew: never the resource id key", ErrMissing, api, m.Version)
	} else if deleted(m.DeletionTime, v.opts.Now()) {
		return kvKey{}, fmt.Errorf("%w: %s: version %d was deleted in Vault; an administrator restores it with "+
			"'vault kv undelete -mount=%s -versions=%d %s' (docs/vault.md)", ErrMissing, api, m.Version, l.KVMount, m.Version, path)
	}
	raw, _ := s.Data[KVField].(string)
	b, err := base64.StdEncoding.Strict().DecodeString(raw)
	if err != nil || len(b) != KeySize || allZero(b) {
		return kvKey{}, fmt.Errorf("%w: %s version %d: field %q must be the base64 of %d random bytes", ErrMissing, api, s.VersionMetadata.Version, KVField, KeySize)
	}
	ver := s.VersionMetadata.Version
	return kvKey{key: Key{ID: kvKeyID(l, path, ver), Bytes: b}, version: ver}, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

type transitKey struct {
	latest     int
	minDecrypt int // min_decryption_version (0 when Vault does not say)
	keys       map[int]any
}

// readTransitKey reads a Transit key's metadata and checks its type and
// that it cannot be exported.
func (v *Vault) readTransitKey(ctx context.Context, name, wantType string) (transitKey, error) {
	l := v.opts.Layout
	api := l.TransitPath("keys", name)
	cctx, cancel := context.WithTimeout(ctx, v.opts.RequestTimeout)
	defer cancel()
	s, err := v.client.Logical().ReadWithContext(cctx, api)
	if err != nil {
		return transitKey{}, vaultErr("read", api, err, "")
	}
	if s == nil || s.Data == nil {
		return transitKey{}, fmt.Errorf("%w: %s: not found; an administrator creates it with "+
			"'vault write -f %s type=%s' (docs/vault.md)", ErrMissing, api, api, wantType)
	}
	if t, _ := s.Data["type"].(string); t != wantType {
		return transitKey{}, fmt.Errorf("%w: %s: type %q, want %q", ErrMissing, api, t, wantType)
	}
	if exp, _ := s.Data["exportable"].(bool); exp {
		return transitKey{}, fmt.Errorf("%w: %s is exportable; custos requires a non-exportable key", ErrMissing, api)
	}
	latest, err := jsonInt(s.Data["latest_version"])
	if err != nil || latest < 1 {
		return transitKey{}, fmt.Errorf("%w: %s: no latest_version", ErrMissing, api)
	}
	out := transitKey{latest: latest, keys: map[int]any{}}
	out.minDecrypt, _ = jsonInt(s.Data["min_decryption_version"])
	if m, ok := s.Data["keys"].(map[string]any); ok {
		for k, val := range m {
			ver, err := strconv.Atoi(k)
			if err != nil {
				continue
			}
			out.keys[ver] = val
		}
	}
	return out, nil
}

func jsonInt(x any) (int, error) {
	switch n := x.(type) {
	case json.Number:
		i, err := n.Int64()
		return int(i), err
	case float64:
		return int(n), nil
	case int:
		return n, nil
	}
	return 0, fmt.Errorf("not a number")
}

// preflight proves, at startup, that the token may use the Transit keys:
// a signature that verifies locally and a data key that unwraps.
func (v *Vault) preflight(ctx context.Context, st *keyState) error {
	msg := []byte("custos preflight " + v.opts.Now().UTC().Format(time.RFC3339Nano))
	sig, ver, err := v.sign(ctx, msg)
	if err != nil {
		return err
	}
	pub, ok := st.signing.public[ver]
	if !ok || !ed25519.Verify(pub, msg, sig) {
		return fmt.Errorf("%w: %s: the signature Vault returned does not verify with its public key", ErrMissing, v.opts.Layout.TransitPath("sign", v.opts.Layout.SigningKey))
	}
	key, wrapped, err := v.newDataKey(ctx)
	if err != nil {
		return err
	}
	if _, err := v.rewrap(ctx, wrapped); err != nil {
		return err
	}
	v.datakeys.put(wrapped, key, v.opts.Now().Add(v.opts.DataKeyTTL))
	return nil
}

// background renews the token (re-logging in with AppRole when it can no
// longer be renewed) and refreshes keys until Close.
func (v *Vault) background(authSecret *vault.Secret) {
	defer v.done.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-v.stop
		cancel()
	}()

	var watcher *vault.LifetimeWatcher
	startWatcher := func(s *vault.Secret) {
		if s == nil || s.Auth == nil || !s.Auth.Renewable {
			if s != nil && s.Auth == nil && s.Data != nil {
				// Token auth: lookup-self data, renewable flag inside.
				if r, _ := s.Data["renewable"].(bool); !r {
					return
				}
				w, err := v.client.NewLifetimeWatcher(&vault.LifetimeWatcherInput{Secret: &vault.Secret{Auth: &vault.SecretAuth{
					ClientToken: v.client.Token(), Renewable: true, LeaseDuration: ttlOf(s),
				}}})
				if err == nil {
					watcher = w
					go w.Start()
				}
			}
			return
		}
		w, err := v.client.NewLifetimeWatcher(&vault.LifetimeWatcherInput{Secret: s})
		if err != nil {
			v.log.Warn("vault token renewal not started", "err", err)
			return
		}
		watcher = w
		go w.Start()
	}
	startWatcher(authSecret)
	defer func() {
		if watcher != nil {
			watcher.Stop()
		}
	}()

	tick := time.NewTicker(v.opts.RefreshInterval)
	defer tick.Stop()
	var doneCh <-chan error
	for {
		doneCh = nil
		var renewCh <-chan *vault.RenewOutput
		if watcher != nil {
			doneCh, renewCh = watcher.DoneCh(), watcher.RenewCh()
		}
		select {
		case <-v.stop:
			return
		case <-renewCh:
			v.log.Debug("vault token renewed")
		case err := <-doneCh:
			watcher.Stop()
			watcher = nil
			if v.auth == nil {
				v.log.Error("vault token can no longer be renewed; keys will go stale and requests will be refused", "err", errString(err))
				continue
			}
			v.log.Info("vault token reached the end of its life; logging in again")
			if s, err := v.login(ctx); err != nil {
				v.log.Error("vault re-login failed; retrying at the next refresh", "err", err)
			} else {
				startWatcher(s)
			}
		case <-tick.C:
			relogin := func() error {
				if watcher != nil {
					watcher.Stop()
					watcher = nil
				}
				s, err := v.login(ctx)
				if err != nil {
					v.log.Warn("vault re-login failed", "err", err)
					return err
				}
				startWatcher(s)
				return nil
			}
			if watcher == nil && v.auth != nil {
				if lerr := relogin(); lerr != nil {
					// The refresh may still work with the token held (a
					// login refused by a brief outage); if not, keys age
					// toward the limit.
					if v.Refresh(ctx) != nil {
						v.loginFailed(lerr)
					}
					continue
				}
			}
			// A token that expired or was revoked before its watcher noticed
			// is refused: log in again and retry once. A policy that denies a
			// call is not cured by a new token of the same role (each login
			// would leave one more token in Vault at every refresh).
			if err := v.Refresh(ctx); isTokenRejected(err) && v.auth != nil {
				if lerr := relogin(); lerr != nil {
					v.loginFailed(lerr)
				} else {
					v.Refresh(ctx)
				}
			}
		}
	}
}

// loginFailed makes a failed AppRole re-login the cause that a staleness
// error names (StaleError.Cause and Kind: the refusal log line, /readyz):
// the key refresh failed only because custos is no longer
// logged in, and its own error ("Vault no longer accepts the token ... custos
// logs in again by itself") would send the operator the wrong way.
func (v *Vault) loginFailed(err error) {
	kind := "custos cannot log in to Vault (AppRole)"
	if !errors.Is(err, ErrPermission) {
		kind = failureKind(err) // sealed, unreachable: not the credentials
	}
	v.lastErr.Store(&refreshFailure{cause: "custos cannot log in to Vault again: " + err.Error(), kind: kind})
}

// refreshFailure is why the keys could not be refreshed: cause is the
// error (Vault paths and answers, never a secret), kind its class in a
// fixed phrase that names no host, path or Vault message (StaleError.Kind,
// shown on /readyz).
type refreshFailure struct{ cause, kind string }

// Kinds of a refresh failure (StaleError.Kind, on /readyz): fixed
// phrases naming no host, path or Vault message.
const (
	kindSealed        = "Vault is sealed"
	kindUntrusted     = "Vault's TLS certificate is not trusted"
	kindHandshake     = "the TLS handshake with Vault failed"
	kindTokenRejected = "Vault no longer accepts custos's token"
	kindDenied        = "Vault's policy denies a call custos needs"
	kindMissing       = "a key is missing, deleted or unusable in Vault"
	kindAnswered      = "Vault answered with an error"
	kindUnreachable   = "Vault unreachable or not answering within --vault-timeout"
)

// failureKind classifies a refresh error for StaleError.Kind: by this
// package's sentinels (which vaultErr chose by the HTTP status of Vault's
// answer), then by the type of the Vault client's error that vaultErr
// kept (causeKind). An error that holds none (not a Vault call's) is
// taken for an unreachable Vault, as the keys could not be fetched.
// Until 2026-12-06 it matched the error's text: a Vault answer whose
// message quoted an x509 or tls error of Vault's own (a storage backend,
// a plugin) read as custos not trusting Vault's certificate.
func failureKind(err error) string {
	switch {
	case isTokenRejected(err):
		return kindTokenRejected
	case errors.Is(err, ErrPermission):
		return kindDenied
	case errors.Is(err, ErrMissing):
		return kindMissing
	}
	var vc vaultCause
	if errors.As(err, &vc) {
		return causeKind(vc.cause)
	}
	return kindUnreachable
}

// causeKind classifies the Vault client's error of a call that ended in
// ErrUnavailable, by its type.
func causeKind(err error) string {
	var (
		re  *vault.ResponseError
		cve *tls.CertificateVerificationError
		ua  x509.UnknownAuthorityError
		he  x509.HostnameError
		ci  x509.CertificateInvalidError
		rhe tls.RecordHeaderError
		ae  tls.AlertError
		oe  *net.OpError
		ue  *url.Error
	)
	switch {
	case errors.As(err, &re):
		// Vault's answer. A sealed Vault answers 503 with the error
		// "Vault is sealed" (Vault's consts.ErrSealed, alone or after
		// the request's context); 503 alone is not enough: a standby
		// without an active node and a proxy in front answer it too.
		if re.StatusCode == http.StatusServiceUnavailable && slices.ContainsFunc(re.Errors, func(e string) bool { return strings.Contains(e, "Vault is sealed") }) {
			return kindSealed
		}
		return kindAnswered
	case errors.As(err, &cve), errors.As(err, &ua), errors.As(err, &he), errors.As(err, &ci):
		return kindUntrusted
	case errors.Is(err, http.ErrSchemeMismatch), errors.As(err, &rhe), errors.As(err, &ae), errors.As(err, &oe) && oe.Op == "remote error":
		// Plain HTTP on an https address (net/http's ErrSchemeMismatch),
		// a record that is no TLS, or an alert: crypto/tls reports the
		// peer's alert as a *net.OpError "remote error" (Vault asking for
		// a client certificate).
		return kindHandshake
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ECONNREFUSED):
		return kindUnreachable
	case errors.As(err, &ue) && strings.HasPrefix(ue.Err.Error(), "tls: "):
		// Last resort, by text: crypto/tls returns most handshake
		// failures (no common cipher suite or version, a bad key share)
		// as plain errors.New("tls: ...") values, with no type to match.
		// Only the transport's own error is read (url.Error.Err, not the
		// URL), and only for a call Vault did not answer.
		return kindHandshake
	}
	return kindUnreachable // connection reset, no such host, timeouts
}

func ttlOf(s *vault.Secret) int {
	if n, err := jsonInt(s.Data["ttl"]); err == nil {
		return n
	}
	return 0
}

func errString(err error) string {
	if err == nil {
		return "token not renewable"
	}
	return err.Error()
}

// Refresh re-reads every key now. Failures are logged and keep the keys
// already held until the staleness limit; it returns the error for tests
// and callers that want it. Refreshes run one at a time, each from the
// state the previous one stored, so the state held only moves forward.
func (v *Vault) Refresh(ctx context.Context) error {
	v.refreshMu.Lock()
	defer v.refreshMu.Unlock()
	old := v.state.Load()
	st, err := v.fetch(ctx, old)
	if v.afterFetch != nil {
		v.afterFetch()
	}
	if err != nil {
		v.lastErr.Store(&refreshFailure{cause: err.Error(), kind: failureKind(err)})
		v.log.Warn("vault key refresh failed; holding keys until the staleness limit", "err", err, "age", v.opts.Now().Sub(old.refreshed).Round(time.Second).String(), "limit", v.opts.MaxStaleness.String())
		return err
	}
	v.lastErr.Store(nil)
	if old != nil && st.blobKEKMinDecrypt > old.blobKEKMinDecrypt {
		// Data keys wrapped under the versions now below the minimum
		// must stop unwrapping now, not when their cache entry expires.
		v.datakeys.clear()
		v.log.Info("vault blob key min_decryption_version raised; cached data keys dropped", "min_decryption_version", st.blobKEKMinDecrypt)
	}
	if old != nil {
		if oi, ni := strings.Join(old.ids(v.opts.Layout), " "), strings.Join(st.ids(v.opts.Layout), " "); oi != ni {
			v.log.Info("vault key versions changed", "keys", ni)
		}
	}
	v.state.Store(st)
	return nil
}

// Close stops renewal and refresh and drops the keys held. It is safe to
// call more than once.
func (v *Vault) Close() error {
	v.once.Do(func() {
		close(v.stop)
		v.done.Wait()
		v.datakeys.clear()
	})
	return nil
}

// fresh returns the key snapshot if it is within the staleness limit.
func (v *Vault) fresh() (*keyState, error) {
	st := v.state.Load()
	if st == nil {
		return nil, ErrStale
	}
	age := v.opts.Now().Sub(st.refreshed)
	if age > v.opts.MaxStaleness {
		f := &refreshFailure{cause: "Vault unreachable", kind: kindUnreachable}
		if p := v.lastErr.Load(); p != nil {
			f = p
		}
		return nil, &StaleError{Age: age, Limit: v.opts.MaxStaleness, Cause: f.cause, Kind: f.kind}
	}
	return st, nil
}

// RefreshFailing reports whether the last key refresh (or AppRole
// re-login) failed: the keys held still serve until the staleness limit.
// It makes no Vault call.
func (v *Vault) RefreshFailing() bool { return v.lastErr.Load() != nil }

// Check reports whether the keys are fresh enough to serve: nil, or a
// *StaleError (which wraps ErrStale and ErrUnavailable). It makes no Vault
// call.
func (v *Vault) Check() error {
	_, err := v.fresh()
	return err
}

// CursorKey returns the newest cursor sealing key.
func (v *Vault) CursorKey(context.Context) (Key, error) {
	st, err := v.fresh()
	if err != nil {
		return Key{}, err
	}
	if len(st.cursor) == 0 {
		return Key{}, fmt.Errorf("%w: opened for audit tools only", ErrMissing)
	}
	return st.cursor[0].clone(), nil
}

// CursorKeys returns the cursor keys held, newest first: seal with the
// first, open with any.
func (v *Vault) CursorKeys(context.Context) ([]Key, error) {
	st, err := v.fresh()
	if err != nil {
		return nil, err
	}
	if len(st.cursor) == 0 {
		return nil, fmt.Errorf("%w: opened for audit tools only", ErrMissing)
	}
	out := make([]Key, len(st.cursor))
	for i, k := range st.cursor {
		out[i] = k.clone()
	}
	return out, nil
}

// AuditKeys returns the audit keyed-hash keys held in memory, newest first:
// at most retainedVersions. Patient lookups use AuditKeyHistory, which
// covers every version.
func (v *Vault) AuditKeys(context.Context) ([]Key, error) {
	st, err := v.fresh()
	if err != nil {
		return nil, err
	}
	out := make([]Key, len(st.audits))
	for i, k := range st.audits {
		out[i] = k.clone()
	}
	return out, nil
}

// IDKey returns the resource id key (Layout.IDKeyPath, its newest version):
// the HMAC key of the opaque ids of imported FHIR resources
// (store.ResourceID). Its ID ("secret/custos/id-key@1") names the version;
// the catalog records it and refuses an import under another.
func (v *Vault) IDKey(context.Context) (Key, error) {
	st, err := v.fresh()
	if err != nil {
		return Key{}, err
	}
	if len(st.id.Bytes) == 0 {
		return Key{}, fmt.Errorf("%w: opened for audit tools only", ErrMissing)
	}
	return st.id.clone(), nil
}

// AuditKey returns the newest audit keyed-hash (HMAC) key.
func (v *Vault) AuditKey(context.Context) (Key, error) {
	st, err := v.fresh()
	if err != nil {
		return Key{}, err
	}
	return st.audit.clone(), nil
}

// KeyIDs lists the key versions in force, sorted ("cursor=secret/custos/
// cursor-key@3", ...): what the server records in every audit record.
func (v *Vault) KeyIDs() []string {
	st := v.state.Load()
	if st == nil {
		return nil
	}
	return st.ids(v.opts.Layout)
}

// Logins reports how many times the provider has logged in (AppRole).
func (v *Vault) Logins() int64 { return v.logins.Load() }

// Dev reports false: these are production keys.
func (v *Vault) Dev() bool { return false }

// Name describes the provider for the startup banner (no credentials).
func (v *Vault) Name() string {
	method := "token"
	if v.opts.AppRole != nil {
		method = "approle"
	}
	return "vault (" + v.opts.Address + ", " + method + ")"
}

// Sign signs msg with the Transit ed25519 key and returns the raw 64-byte
// signature and the key version that made it.
func (v *Vault) Sign(ctx context.Context, msg []byte) ([]byte, int, error) {
	if _, err := v.fresh(); err != nil {
		return nil, 0, err
	}
	return v.sign(ctx, msg)
}

func (v *Vault) sign(ctx context.Context, msg []byte) ([]byte, int, error) {
	api := v.opts.Layout.TransitPath("sign", v.opts.Layout.SigningKey)
	s, err := v.write(ctx, api, map[string]any{"input": base64.StdEncoding.EncodeToString(msg)})
	if err != nil {
		return nil, 0, err
	}
	ver, raw, err := parseVaultValue(s, "signature")
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %v", ErrUnavailable, api, err)
	}
	if len(raw) != ed25519.SignatureSize {
		return nil, 0, fmt.Errorf("%w: %s: signature of %d bytes", ErrUnavailable, api, len(raw))
	}
	if st := v.state.Load(); st != nil {
		if _, held := st.signing.public[ver]; !held {
			// Transit signs with a version rotated in since the last
			// refresh: read the keys now, so that the signature can be
			// checked (checkpoint.Signer asks for the version's public
			// key) rather than every checkpoint failing until the next
			// --key-refresh.
			if err := v.Refresh(ctx); err != nil {
				return nil, 0, err
			}
		}
	}
	return raw, ver, nil
}

// Verify checks sig over msg against the public key of version ver, held
// in memory (no Vault call).
func (v *Vault) Verify(msg, sig []byte, ver int) bool {
	st := v.state.Load()
	if st == nil {
		return false
	}
	pub, ok := st.signing.public[ver]
	return ok && ed25519.Verify(pub, msg, sig)
}

// SigningVersions lists the versions of the signing key whose public keys
// are held, ascending.
func (v *Vault) SigningVersions() []int {
	st := v.state.Load()
	if st == nil {
		return nil
	}
	out := make([]int, 0, len(st.signing.public))
	for ver := range st.signing.public {
		out = append(out, ver)
	}
	sort.Ints(out)
	return out
}

// SigningKeyID names version ver of the signing key as audit records do
// ("signing=transit/custos-audit-signing@2").
func (v *Vault) SigningKeyID(ver int) string { return v.opts.Layout.signingKeyID(ver) }

func (l Layout) signingKeyID(ver int) string {
	return "signing=" + l.TransitMount + "/" + l.SigningKey + "@" + strconv.Itoa(ver)
}

// PublicKey returns the signing key's public key for version ver (0 =
// newest) and the version.
func (v *Vault) PublicKey(ver int) (ed25519.PublicKey, int, error) {
	st := v.state.Load()
	if st == nil {
		return nil, 0, ErrStale
	}
	if ver == 0 {
		ver = st.signing.latest
	}
	pub, ok := st.signing.public[ver]
	if !ok {
		return nil, 0, fmt.Errorf("%w: no signing key version %d", ErrMissing, ver)
	}
	return append(ed25519.PublicKey(nil), pub...), ver, nil
}

// KEK names the blob key-encryption key (store.DataKeys).
func (v *Vault) KEK() string {
	return "vault-transit:" + v.opts.Layout.TransitMount + "/" + v.opts.Layout.BlobKey
}

// NewDataKey returns a fresh AES-256 data key and its wrapped form
// ("vault:vN:..."), from Transit datakey/wrapped and a decrypt of it.
func (v *Vault) NewDataKey(ctx context.Context) (key, wrapped []byte, err error) {
	if _, err := v.fresh(); err != nil {
		return nil, nil, err
	}
	key, wrapped, err = v.newDataKey(ctx)
	if err != nil {
		return nil, nil, err
	}
	v.datakeys.put(wrapped, key, v.opts.Now().Add(v.opts.DataKeyTTL))
	return key, wrapped, nil
}

func (v *Vault) newDataKey(ctx context.Context) (key, wrapped []byte, err error) {
	api := v.opts.Layout.TransitPath("datakey/wrapped", v.opts.Layout.BlobKey)
	s, err := v.write(ctx, api, map[string]any{"bits": 256})
	if err != nil {
		return nil, nil, err
	}
	ct, _ := s.Data["ciphertext"].(string)
	if !strings.HasPrefix(ct, "vault:v") {
		return nil, nil, fmt.Errorf("%w: %s: no ciphertext", ErrUnavailable, api)
	}
	key, err = v.unwrap(ctx, []byte(ct))
	if err != nil {
		return nil, nil, err
	}
	return key, []byte(ct), nil
}

// UnwrapDataKey returns the data key inside wrapped, from the in-memory
// cache when it is there (no Vault round trip), else from Transit decrypt.
func (v *Vault) UnwrapDataKey(ctx context.Context, wrapped []byte) ([]byte, error) {
	if _, err := v.fresh(); err != nil {
		return nil, err
	}
	now := v.opts.Now()
	if k, ok := v.datakeys.get(wrapped, now); ok {
		return k, nil
	}
	k, err := v.unwrap(ctx, wrapped)
	if err != nil {
		return nil, err
	}
	v.datakeys.put(wrapped, k, now.Add(v.opts.DataKeyTTL))
	return append([]byte(nil), k...), nil
}

func (v *Vault) unwrap(ctx context.Context, wrapped []byte) ([]byte, error) {
	api := v.opts.Layout.TransitPath("decrypt", v.opts.Layout.BlobKey)
	s, err := v.write(ctx, api, map[string]any{"ciphertext": string(wrapped)})
	if err != nil {
		return nil, err
	}
	pt, _ := s.Data["plaintext"].(string)
	k, err := base64.StdEncoding.DecodeString(pt)
	if err != nil || len(k) != KeySize {
		return nil, fmt.Errorf("%w: %s: the unwrapped data key is not %d bytes", ErrUnavailable, api, KeySize)
	}
	return k, nil
}

// RewrapDataKey re-wraps wrapped under the newest version of the
// key-encryption key; the data key itself never leaves Vault.
func (v *Vault) RewrapDataKey(ctx context.Context, wrapped []byte) ([]byte, error) {
	if _, err := v.fresh(); err != nil {
		return nil, err
	}
	return v.rewrap(ctx, wrapped)
}

func (v *Vault) rewrap(ctx context.Context, wrapped []byte) ([]byte, error) {
	api := v.opts.Layout.TransitPath("rewrap", v.opts.Layout.BlobKey)
	s, err := v.write(ctx, api, map[string]any{"ciphertext": string(wrapped)})
	if err != nil {
		return nil, err
	}
	ct, _ := s.Data["ciphertext"].(string)
	if !strings.HasPrefix(ct, "vault:v") {
		return nil, fmt.Errorf("%w: %s: no ciphertext", ErrUnavailable, api)
	}
	return []byte(ct), nil
}

// write is one Transit call under the request timeout.
func (v *Vault) write(ctx context.Context, api string, data map[string]any) (*vault.Secret, error) {
	cctx, cancel := context.WithTimeout(ctx, v.opts.RequestTimeout)
	defer cancel()
	s, err := v.client.Logical().WriteWithContext(cctx, api, data)
	if err != nil {
		return nil, vaultErr("update", api, err, "")
	}
	if s == nil || s.Data == nil {
		return nil, fmt.Errorf("%w: %s: empty response", ErrUnavailable, api)
	}
	return s, nil
}

// parseVaultValue splits "vault:vN:base64" from field of s.
func parseVaultValue(s *vault.Secret, field string) (int, []byte, error) {
	val, _ := s.Data[field].(string)
	rest, ok := strings.CutPrefix(val, "vault:v")
	if !ok {
		return 0, nil, fmt.Errorf("no %s", field)
	}
	vs, b64, ok := strings.Cut(rest, ":")
	ver, err := strconv.Atoi(vs)
	if !ok || err != nil || ver < 1 {
		return 0, nil, fmt.Errorf("malformed %s", field)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return 0, nil, fmt.Errorf("malformed %s", field)
	}
	return ver, raw, nil
}

// dataKeyCache holds unwrapped blob data keys, keyed by SHA-256 of the
// wrapped form, each until its expiry; at most max entries.
type dataKeyCache struct {
	mu  sync.Mutex
	max int
	m   map[[sha256.Size]byte]cachedKey
}

type cachedKey struct {
	key []byte
	exp time.Time
}

func newDataKeyCache(max int) *dataKeyCache {
	return &dataKeyCache{max: max, m: map[[sha256.Size]byte]cachedKey{}}
}

func (c *dataKeyCache) get(wrapped []byte, now time.Time) ([]byte, bool) {
	h := sha256.Sum256(wrapped)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[h]
	if !ok {
		return nil, false
	}
	if !now.Before(e.exp) {
		clear(e.key)
		delete(c.m, h)
		return nil, false
	}
	return append([]byte(nil), e.key...), true
}

func (c *dataKeyCache) put(wrapped, key []byte, exp time.Time) {
	h := sha256.Sum256(wrapped)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		// Drop an eighth of the entries (map order is random enough for a
		// bound; the cache is an optimisation, never a source of truth).
		n := max(1, c.max/8)
		for k, e := range c.m {
			clear(e.key)
			delete(c.m, k)
			if n--; n == 0 {
				break
			}
		}
	}
	c.m[h] = cachedKey{key: append([]byte(nil), key...), exp: exp}
}

func (c *dataKeyCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		clear(e.key)
		delete(c.m, k)
	}
}

func (k Key) clone() Key { return Key{ID: k.ID, Bytes: append([]byte(nil), k.Bytes...)} }
