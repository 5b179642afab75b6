// Command vault wraps HashiCorp Vault's API client (vault/api v1.23) with
// retryhttp. Vault retries on its own (MaxRetries: 2, through
// go-retryablehttp), and its writes are PUTs, a method RFC 9110 calls
// idempotent, though pki/issue makes a new certificate each time it is
// reached. So: the client's retries off, TLS configured before the
// transport is wrapped (ConfigureTLS needs Vault's own *http.Transport),
// and a policy that declares the issuing PUTs unsafe. Against a fake
// Vault on loopback that answers 502 once to each path, a read is retried
// and issuing a certificate reaches the server once.
//
//	cd examples/sdk && go run ./vault
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"

	vault "github.com/hashicorp/vault/api"
	"github.com/retryhttp/retryhttp"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// fakeVault answers the first request to each path 502, and counts them.
type fakeVault struct {
	mu   sync.Mutex
	seen map[string]int
}

func (f *fakeVault) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	f.seen[r.Method+" "+r.URL.Path]++
	n := f.seen[r.Method+" "+r.URL.Path]
	f.mu.Unlock()
	if n == 1 {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if strings.HasPrefix(r.URL.Path, "/v1/pki/issue/") {
		io.WriteString(w, `{"data":{"certificate":"-----BEGIN CERTIFICATE-----","serial_number":"01"}}`)
		return
	}
	io.WriteString(w, `{"data":{"data":{"password":"hunter2"}}}`)
}

func (f *fakeVault) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[key]
}

// policy declares the PUTs that issue certificates unsafe to repeat: they
// are sent again only if they never reached Vault.
const policy = `[
  {"dependency": "vault", "retry": {"max_attempts_total": 3, "initial_delay_ms": 10}},
  {"dependency": "vault", "operation": "issueCertificate", "match": "PUT /v1/pki/issue/*",
   "semantic_safety": {"idempotent": false, "side_effect": true}}
]`

// newClient returns a Vault client whose requests go through retryhttp,
// with Vault's own retries off.
func newClient(addr string, opts ...retryhttp.Option) (*vault.Client, error) {
	cfg := vault.DefaultConfig()
	cfg.Address = addr
	cfg.MaxRetries = 0 // retryhttp retries; Vault does not
	// TLS first, on Vault's own *http.Transport: ConfigureTLS (and
	// SetMaxIdleConnections) need it, and cannot see through a wrapper.
	if err := cfg.ConfigureTLS(&vault.TLSConfig{}); err != nil {
		return nil, err
	}
	policies, err := retryhttp.LoadPolicies(strings.NewReader(policy))
	if err != nil {
		return nil, err
	}
	transports, err := policies.Transports(cfg.HttpClient.Transport, opts...)
	if err != nil {
		return nil, err
	}
	cfg.HttpClient.Transport = transports["vault"]
	client, err := vault.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	client.SetToken("s.example")
	return client, nil
}

func run(w io.Writer) error {
	fake := &fakeVault{seen: map[string]int{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	client, err := newClient(srv.URL)
	if err != nil {
		return err
	}
	defer client.CloneConfig().HttpClient.CloseIdleConnections()
	ctx := context.Background()
	secret, err := client.KVv2("secret").Get(ctx, "db")
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	fmt.Fprintf(w, "read secret/db: password %v after %d attempts\n", secret.Data["password"], fake.count("GET /v1/secret/data/db"))
	_, err = client.Logical().WriteWithContext(ctx, "pki/issue/web", map[string]any{"common_name": "web.example.com"})
	fmt.Fprintf(w, "issue a certificate: %v after %d attempt (a 502 may have issued one: not sent again)\n",
		err != nil, fake.count("PUT /v1/pki/issue/web"))
	return nil
}
