package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/retryhttp/retryhttp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The read is retried past the 502; the PUT that issues a certificate,
// declared unsafe by the policy, reaches Vault once.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"read secret/db: password hunter2 after 2 attempts",
		"issue a certificate: true after 1 attempt",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q, want %q", out.String(), want)
		}
	}
}

// With Vault's own retries left on (MaxRetries: 2, its default), the two
// layers multiply, and retryhttp sees Vault's retries arrive as the same
// request again right after a failure: counted, and warned of.
func TestVaultRetriesSeen(t *testing.T) {
	fake := &fakeVault{seen: map[string]int{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	m := retryhttp.NewMetrics()
	client, err := newClient(srv.URL, retryhttp.WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	client.SetMaxRetries(2)
	client.SetMinRetryWait(1)
	client.SetMaxRetryWait(1)
	defer client.CloneConfig().HttpClient.CloseIdleConnections()
	client.Logical().WriteWithContext(context.Background(), "pki/issue/web", map[string]any{"common_name": "a"})
	if n := fake.count("PUT /v1/pki/issue/web"); n < 2 {
		t.Fatalf("Vault's retries on: the PUT reached the server %d times; the test shows nothing", n)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var repeats float64
	for _, mf := range mfs {
		if mf.GetName() == "retryhttp_layered_retries_total" {
			for _, s := range mf.GetMetric() {
				repeats += s.GetCounter().GetValue()
			}
		}
	}
	if repeats == 0 {
		t.Error("Vault's own retries were not seen as a layer above")
	}
}
