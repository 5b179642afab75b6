package retryhttp

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

// Every host has its own state, however many there are: a host failing
// past the first thousands spends no other host's budget and opens no
// other host's breaker.
func TestHostsIsolated(t *testing.T) {
	base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		code := 200
		if r.URL.Host == "h5000" {
			code = 503
		}
		return &http.Response{StatusCode: code, Body: http.NoBody, Header: http.Header{}}, nil
	})
	tr, _ := testTransport(base, WithBackoff(Constant(0)), WithBudget(NewBudget(0, 1)))
	for i := range 5000 {
		resp, _ := tr.RoundTrip(newRequest(t, "GET", fmt.Sprintf("http://h%d/", i), nil))
		resp.Body.Close()
	}
	for range 50 { // spends h5000's budget and opens its breaker
		time.Sleep(time.Millisecond) // failures over time
		resp, _ := tr.RoundTrip(newRequest(t, "GET", "http://h5000/", nil))
		resp.Body.Close()
	}
	if !hostOf(tr, "h5000").cb.isOpen.Load() {
		t.Fatal("the failing host's breaker did not open")
	}
	for _, h := range []string{"h0", "h1023", "h1024", "h4999"} {
		if hostOf(tr, h).cb.isOpen.Load() || !tr.c.budget.allowRetry(h, unixSecond()) {
			t.Errorf("%s: breaker open or budget spent by another host's failures", h)
		}
	}
	if n := tr.c.budget.hosts.len(); n != 5001 {
		t.Errorf("budget tracks %d hosts, want 5001", n)
	}
}

// Idle hosts are dropped when new ones come, so that memory follows the
// hosts in use; a host whose breaker is open is kept.
func TestHostsEvicted(t *testing.T) {
	c := newTestConfig(t)
	trip(c, c.gate.hosts.getKey("busy", nil, 0))
	for i := range 1000 {
		c.gate.hosts.getKey(fmt.Sprintf("old%d", i), nil, 0)
	}
	for i := range 1000 {
		c.gate.hosts.getKey(fmt.Sprintf("new%d", i), nil, evictAfter+1)
	}
	c.gate.hosts.mu.Lock()
	read := *c.gate.hosts.read.Load()
	c.gate.hosts.mu.Unlock()
	if _, ok := read["old0"]; ok {
		t.Error("an idle host was kept")
	}
	if _, ok := read["busy"]; !ok {
		t.Error("a host with an open breaker was dropped")
	}
	if n := c.gate.hosts.len(); n > 1001 {
		t.Errorf("%d hosts tracked, want at most the 1000 in use and the busy one", n)
	}
}

func TestCanonicalHost(t *testing.T) {
	var buf [maxHostKey]byte
	key := func(scheme, host string) string {
		s, b := canonicalHost(scheme, host, &buf)
		if b != nil {
			return string(b)
		}
		return s
	}
	same := [][2]string{
		{"https", "example.com"}, {"https", "Example.com"}, {"https", "example.com:443"}, {"https", "EXAMPLE.COM:443"},
	}
	for _, h := range same {
		if got := key(h[0], h[1]); got != "example.com" {
			t.Errorf("canonicalHost(%q, %q) = %q, want example.com", h[0], h[1], got)
		}
	}
	for _, tt := range [][3]string{
		{"http", "example.com:80", "example.com"},
		{"http", "example.com:443", "example.com:443"},
		{"https", "example.com:8443", "example.com:8443"},
		{"https", "[::1]:443", "[::1]"},
		{"https", "[FE80::1]", "[fe80::1]"},
	} {
		if got := key(tt[0], tt[1]); got != tt[2] {
			t.Errorf("canonicalHost(%q, %q) = %q, want %q", tt[0], tt[1], got, tt[2])
		}
	}
	// Requests to the same host by another spelling share its state.
	base := retrytest.NewScriptTransport(steps(503)...)
	tr, _ := testTransport(base, WithBudget(NewBudget(0, 0.1)), WithBackoff(Constant(0)))
	for _, u := range []string{"https://Example.com/", "https://example.com:443/"} {
		resp, _ := tr.RoundTrip(newRequest(t, "GET", u, nil))
		resp.Body.Close()
	}
	if n := tr.c.budget.hosts.len(); n != 1 {
		t.Errorf("%d budget entries for one host spelt two ways, want 1", n)
	}
	// A lookup by a spelling that needs changing allocates nothing.
	tr.RoundTrip(newRequest(t, "GET", "https://Example.com/", nil))
	req := newRequest(t, "GET", "https://Example.com:443/", nil)
	if a := testing.AllocsPerRun(100, func() { canonicalHost("https", req.URL.Host, &buf) }); a != 0 {
		t.Errorf("canonicalHost allocates %v times", a)
	}
}
