package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp/retrytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The server fails twice with 503, then answers: the program prints the
// answer, and the server saw three GETs for the one the program sent.
func TestPlainRetriesUntilOK(t *testing.T) {
	srv := retrytest.NewServer(retrytest.Status(503), retrytest.Status(503))
	defer srv.Close()
	var out bytes.Buffer
	if err := run(&out, srv.URL+"/hello"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "200 OK\n") {
		t.Errorf("output = %q, want the final 200", out.String())
	}
	if err := srv.CheckCount(3); err != nil {
		t.Error(err)
	}
	for i, a := range srv.Attempts() {
		if a.Method != "GET" || a.Path != "/hello" {
			t.Errorf("attempt %d: %s %s, want GET /hello", i+1, a.Method, a.Path)
		}
	}
}

// A 404 is an answer, not a failure: one attempt, and the program prints it.
func TestPlainDoesNotRetry404(t *testing.T) {
	srv := retrytest.NewServer(retrytest.Status(404))
	defer srv.Close()
	var out bytes.Buffer
	if err := run(&out, srv.URL); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "404 Not Found\n") {
		t.Errorf("output = %q, want the 404", out.String())
	}
	if err := srv.CheckCount(1); err != nil {
		t.Error(err)
	}
}
