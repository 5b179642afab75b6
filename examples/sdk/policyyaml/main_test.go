package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/retryhttp/retryhttp"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	sigsyaml "sigs.k8s.io/yaml"
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
	want := "payments: POST answered 200 after 2 attempts, Idempotency-Key sent: true\n" +
		"shipping-rates: POST answered 200 after 2 attempts, Idempotency-Key sent: false\n"
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
	os.WriteFile(file, []byte("rates:\n  retry: {backoff: linear}\n"), 0o644)
	if err := run(&bytes.Buffer{}, file); err == nil || !strings.Contains(err.Error(), `policy "rates", line 2: field retry.backoff`) {
		t.Errorf("run = %v, want an error naming the dependency and the field", err)
	}
}

// sigs.k8s.io/yaml turns the same documents into the JSON that
// retryhttp.LoadPolicies reads: it gets what yamlpolicy gets.
func TestYAMLToJSONLoadsTheSamePolicies(t *testing.T) {
	data, err := os.ReadFile("policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := load("policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var list []json.RawMessage
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		js, err := sigsyaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, js)
	}
	js, _ := json.Marshal(list)
	viaJSON, err := retryhttp.LoadPolicies(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 2 || !reflect.DeepEqual(viaJSON, want) {
		t.Errorf("sigs.k8s.io/yaml and LoadPolicies %+v\nyamlpolicy %+v", viaJSON, want)
	}
}
