package temporalx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/flotilla-gitops/flotilla/internal/codec"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
)

// Defaults for ClientOptions.
const (
	DefaultAddress     = "127.0.0.1:7233"
	DefaultNamespace   = "default"
	DefaultDialTimeout = 10 * time.Second
)

// ClientOptions says how to reach a Temporal cluster. The worker and the CLI
// bind the same flags, so a user learns them once.
type ClientOptions struct {
	// Address is the frontend host:port. Optional: default 127.0.0.1:7233.
	Address string
	// Namespace is the Temporal namespace. Optional: default "default".
	Namespace string
	// TLS enables TLS even without any of the files below (e.g. Temporal
	// Cloud with an API key). Optional: default false; implied by any TLS
	// file or server name.
	TLS bool
	// TLSCertFile and TLSKeyFile are the client certificate and key for mTLS.
	TLSCertFile string
	TLSKeyFile  string
	// TLSCAFile verifies the server certificate. Optional: system roots.
	TLSCAFile string
	// TLSServerName overrides the name checked in the server certificate.
	TLSServerName string
	// TLSInsecureSkipVerify disables server certificate checks (tests only).
	TLSInsecureSkipVerify bool
	// APIKey authenticates with an API key (Temporal Cloud). Prefer
	// APIKeyFile or the environment: a flag value shows up in `ps`.
	APIKey string
	// APIKeyFile is a file holding the API key.
	APIKeyFile string
	// DialTimeout bounds the first connection. Optional: default 10s.
	DialTimeout time.Duration
	// PayloadKeys is a keyring directory (package keyring): every payload
	// and failure message the client writes is encrypted with its newest
	// key, and what any of its keys encrypted is decrypted (package codec).
	// Optional: default none; payloads are then written plain, and reading
	// an encrypted one fails with an error wrapping codec.ErrEncrypted.
	PayloadKeys string
	// RequireEncryption refuses every payload read that is not encrypted
	// with PayloadKeys (codec.Options.RequireEncryption): a value written
	// by a client without the keys is an error wrapping
	// *codec.PlaintextError. Needs PayloadKeys. Optional: default false.
	RequireEncryption bool
	// Metrics receives the SDK's metrics (NewPrometheusMetrics). Not a
	// flag. Optional: default none.
	Metrics client.MetricsHandler
	// EncodeFailures moves failure messages into a payload even without
	// PayloadKeys, so that a forwarder that encrypts payloads (an agent's
	// gateway) encrypts them too. Not a flag. Optional: default false.
	EncodeFailures bool
	// Plaintext never uses TLS, even with an API key (with which the SDK
	// otherwise turns TLS on): an agent's gateway served without TLS.
	// Not a flag. Optional: default false.
	Plaintext bool
	// dialOptions are extra gRPC options (DialForwarder).
	dialOptions []grpc.DialOption
}

// BindFlags registers the options as flags on fs. The values already in o
// are the flags' defaults, so a caller can choose its own (the worker leaves
// Address empty to mean "start an embedded dev server").
func (o *ClientOptions) BindFlags(fs *pflag.FlagSet) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	fs.StringVar(&o.Address, "temporal-address", o.Address, "Temporal frontend host:port")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Temporal namespace")
	fs.BoolVar(&o.TLS, "tls", false, "connect to Temporal with TLS (implied by any other --tls-* flag)")
	fs.StringVar(&o.TLSCertFile, "tls-cert", "", "client certificate file for mTLS")
	fs.StringVar(&o.TLSKeyFile, "tls-key", "", "client private key file for mTLS")
	fs.StringVar(&o.TLSCAFile, "tls-ca", "", "CA certificate file to verify the Temporal server (default: system roots)")
	fs.StringVar(&o.TLSServerName, "tls-server-name", "", "server name to verify in the Temporal server certificate")
	fs.BoolVar(&o.TLSInsecureSkipVerify, "tls-insecure-skip-verify", false, "do not verify the Temporal server certificate (testing only)")
	fs.StringVar(&o.APIKey, "api-key", "", "Temporal API key (prefer --api-key-file or FLOTILLA_API_KEY)")
	fs.StringVar(&o.APIKeyFile, "api-key-file", "", "file containing the Temporal API key")
	fs.DurationVar(&o.DialTimeout, "dial-timeout", o.DialTimeout, "how long to wait for the Temporal server")
	fs.StringVar(&o.PayloadKeys, "payload-keys", "", "directory of AES-256 keys (one file per key: name = key ID, content = base64 of 32 bytes) to encrypt Temporal payloads with; the worker, its agents and the CLI need the same keys")
	fs.BoolVar(&o.RequireEncryption, "require-encryption", false, "refuse every Temporal payload that is not encrypted with --payload-keys (a workflow start, signal, update or result written by a client without the keys); needs --payload-keys")
}

// ApplyDefaults fills unset fields with their documented defaults.
func (o *ClientOptions) ApplyDefaults() {
	if o.Address == "" {
		o.Address = DefaultAddress
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
}

// Validate reports inconsistent options.
func (o ClientOptions) Validate() error {
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return errors.New("--tls-cert and --tls-key must be given together")
	}
	if o.APIKey != "" && o.APIKeyFile != "" {
		return errors.New("--api-key and --api-key-file are mutually exclusive")
	}
	if o.RequireEncryption && o.PayloadKeys == "" {
		return errors.New("--require-encryption needs --payload-keys")
	}
	return nil
}

func (o ClientOptions) tlsEnabled() bool {
	return o.TLS || o.TLSCertFile != "" || o.TLSCAFile != "" || o.TLSServerName != "" || o.TLSInsecureSkipVerify
}

// ClientConfig builds the SDK client options. It reads the certificate,
// key and payload key files but does not connect.
func (o ClientOptions) ClientConfig(logger *zap.Logger) (client.Options, error) {
	o.ApplyDefaults()
	if err := o.Validate(); err != nil {
		return client.Options{}, err
	}
	opts := client.Options{
		HostPort:  o.Address,
		Namespace: o.Namespace,
		Logger:    NewLogger(logger),
	}
	if o.Metrics != nil {
		opts.MetricsHandler = o.Metrics
	}
	opts.ConnectionOptions.DialOptions = o.dialOptions
	if err := o.setConverters(&opts); err != nil {
		return client.Options{}, err
	}
	if o.tlsEnabled() {
		tlsCfg, err := o.tlsConfig()
		if err != nil {
			return client.Options{}, err
		}
		opts.ConnectionOptions.TLS = tlsCfg
	}
	key := o.APIKey
	if o.APIKeyFile != "" {
		b, err := os.ReadFile(o.APIKeyFile)
		if err != nil {
			return client.Options{}, fmt.Errorf("read API key file %s: %w", o.APIKeyFile, err)
		}
		key = strings.TrimSpace(string(b))
	}
	if key != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(key)
	}
	opts.ConnectionOptions.TLSDisabled = o.Plaintext && !o.tlsEnabled()
	return opts, nil
}

// DataConverter returns the data converter ClientConfig gives the client:
// for reading payloads the client hands over raw, such as memos.
func (o ClientOptions) DataConverter() (converter.DataConverter, error) {
	var opts client.Options
	if err := o.setConverters(&opts); err != nil {
		return nil, err
	}
	return opts.DataConverter, nil
}

// setConverters sets the data and failure converters of PayloadKeys.
func (o ClientOptions) setConverters(opts *client.Options) error {
	if o.PayloadKeys == "" {
		opts.DataConverter = codec.NewKeylessDataConverter()
		if o.EncodeFailures {
			opts.FailureConverter = codec.NewFailureConverter(opts.DataConverter)
		}
		return nil
	}
	ring, err := keyring.LoadDir(o.PayloadKeys) // its errors name the directory
	if err != nil {
		return fmt.Errorf("--payload-keys: %w", err)
	}
	dc, err := codec.NewDataConverter(ring, codec.Options{RequireEncryption: o.RequireEncryption})
	if err != nil {
		return fmt.Errorf("--payload-keys %s: %w", o.PayloadKeys, err)
	}
	opts.DataConverter = dc
	opts.FailureConverter = codec.NewFailureConverter(dc)
	return nil
}

// TLSConfig is the TLS configuration of the connection; nil without TLS.
func (o ClientOptions) TLSConfig() (*tls.Config, error) {
	if !o.tlsEnabled() {
		return nil, nil
	}
	return o.tlsConfig()
}

func (o ClientOptions) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         o.TLSServerName,
		InsecureSkipVerify: o.TLSInsecureSkipVerify, //nolint:gosec // explicit user opt-in for testing
	}
	if o.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load TLS client certificate %s: %w", o.TLSCertFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if o.TLSCAFile != "" {
		pem, err := os.ReadFile(o.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("read TLS CA file %s: %w", o.TLSCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA file %s holds no PEM certificate", o.TLSCAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// Dial connects to Temporal and checks that the server answers within
// DialTimeout. The error names the address and never carries credentials.
func (o ClientOptions) Dial(ctx context.Context, logger *zap.Logger) (client.Client, error) {
	o.ApplyDefaults()
	opts, err := o.ClientConfig(logger)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	// The SDK flattens transport errors into text; a plain TCP dial first
	// tells "nothing listens there" apart from a server that answered badly.
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", o.Address)
	if err != nil {
		return nil, fmt.Errorf("temporal server at %s is unreachable: %w", o.Address, err)
	}
	_ = conn.Close() // only reachability mattered
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("temporal server at %s is unreachable (no answer within %s)", o.Address, o.DialTimeout)
		}
		return nil, fmt.Errorf("connect to Temporal at %s (namespace %s): %w", o.Address, o.Namespace, err)
	}
	return c, nil
}

// DialForwarder connects like Dial, for a process that forwards other
// clients' calls (the agents' gateway): the returned client's
// WorkflowService encrypts every payload going out with the newest of
// PayloadKeys and decrypts every one coming in, so the clients it serves
// see plain payloads and hold no key. Without PayloadKeys payloads pass
// unchanged.
func (o ClientOptions) DialForwarder(ctx context.Context, logger *zap.Logger) (client.Client, error) {
	o.ApplyDefaults()
	if o.PayloadKeys == "" {
		return o.Dial(ctx, logger)
	}
	ring, err := keyring.LoadDir(o.PayloadKeys)
	if err != nil {
		return nil, fmt.Errorf("--payload-keys: %w", err)
	}
	enc, err := codec.New(ring)
	if err != nil {
		return nil, fmt.Errorf("--payload-keys %s: %w", o.PayloadKeys, err)
	}
	icpt, err := converter.NewPayloadCodecGRPCClientInterceptor(converter.PayloadCodecGRPCClientInterceptorOptions{
		Codecs: []converter.PayloadCodec{enc}})
	if err != nil {
		return nil, err
	}
	o.dialOptions = append(o.dialOptions, grpc.WithChainUnaryInterceptor(icpt))
	return o.Dial(ctx, logger)
}
