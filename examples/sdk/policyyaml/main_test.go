package main

import (
	"bytes"
	"context"
	"github.com/retryhttp/retryhttp"
	yamlv3 "gopkg.in/yaml.v3"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/retryhttp/retryhttp/retrytest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestYAMLPolicies(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, "policies.yaml"); err != nil {
		t.Fatal(err)
	}
	want := "payments: 5 attempts, decorrelated_jitter from 200ms to 5s\nshipping-rates: 3 attempts, exponential_full_jitter from 100ms to 2s\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	// The YAML policy drives a real Transport: 3 attempts for a 503.
	ps, err := load("policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	trs, err := ps.Transports(nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := retrytest.NewServer(retrytest.Status(503), retrytest.Status(503), retrytest.Status(503))
	defer srv.Close()
	req, _ := http.NewRequestWithContext(context.Background(), "GET", srv.URL, nil)
	resp, err := (&http.Client{Transport: trs["shipping-rates"]}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	trs["shipping-rates"].CloseIdleConnections()
	if srv.Count() != 3 {
		t.Errorf("%d attempts, want the policy's 3", srv.Count())
	}
}

func TestYAMLPolicyErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(file, []byte("rates:\n  backoff: linear\n"), 0o644)
	if err := run(&bytes.Buffer{}, file); err == nil || !strings.Contains(err.Error(), `policy "rates": field backoff`) {
		t.Errorf("run = %v, want an error naming the dependency and the field", err)
	}
}

// gopkg.in/yaml.v3 decodes the same file straight into retryhttp.Policies
// (the yaml tags, and Duration as text), and gets what the JSON loader
// gets.
func TestYAMLv3DecodesTheSamePolicies(t *testing.T) {
	data, err := os.ReadFile("policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var direct retryhttp.Policies
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&direct); err != nil {
		t.Fatal(err)
	}
	viaJSON, err := load("policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(direct) == 0 || !reflect.DeepEqual(direct, viaJSON) {
		t.Errorf("yaml.v3 decoded %+v, the JSON loader %+v", direct, viaJSON)
	}
}
