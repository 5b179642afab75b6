// Command policyyaml reads retry policies written per dependency in YAML
// with the yamlpolicy module (the same rules as the JSON form that
// retryhttp.LoadPolicies reads), and sends one POST through the Transport
// each dependency gets, to a local server that answers 503 once: both are
// retried, one because its dependency declares its requests idempotent,
// the other because it gets an Idempotency-Key. YAML needs a module that
// the library does not require, so this example lives in the
// examples/sdk module.
//
//	cd examples/sdk && go run ./policyyaml policyyaml/policies.yaml
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/yamlpolicy"
)

func main() {
	file := "policyyaml/policies.yaml"
	if len(os.Args) > 1 {
		file = os.Args[1]
	}
	if err := run(os.Stdout, file); err != nil {
		log.Fatal(err)
	}
}

// load reads a YAML file of policies with yamlpolicy, which refuses
// unknown fields and names the line, the dependency and the field at
// fault.
func load(file string) (retryhttp.Policies, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ps, err := yamlpolicy.Load(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return ps, nil
}

func run(w io.Writer, file string) error {
	policies, err := load(file)
	if err != nil {
		return err
	}
	transports, err := policies.Transports(nil)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(transports))
	for name := range transports {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		attempts, keyed, status, err := post(transports[name])
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(w, "%s: POST answered %d after %d attempts, Idempotency-Key sent: %v\n", name, status, attempts, keyed)
	}
	return nil
}

// post sends one POST through tr to a local server that answers 503 to
// its first attempt and 200 to the next.
func post(tr *retryhttp.Transport) (attempts int, keyed bool, status int, err error) {
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		attempts++
		n := attempts
		keyed = r.Header.Get("Idempotency-Key") != ""
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(srv.URL, "application/json", strings.NewReader(`{"amount": 100}`))
	if err != nil {
		return 0, false, 0, err
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	return attempts, keyed, resp.StatusCode, nil
}
