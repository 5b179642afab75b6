package retryhttp

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/retryhttp/retryhttp/retrytest"
)

// A POST declared safe is retried like a GET, and no key is added, not
// even by a Transport that keys POSTs.
func TestIdempotentDeclaredPOSTRetried(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithIdempotencyKeys()}, {WithIdempotencyKeys(), WithIdempotentIf(func(*http.Request) bool { return true })}} {
		base := retrytest.NewScriptTransport(steps(503)...)
		tr, _ := testTransport(base, opts...)
		req := newRequest(t, "POST", "http://h/query", strings.NewReader(`{"q":1}`)).WithContext(Idempotent(context.Background()))
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v; want 200 after a retry", resp, err)
		}
		resp.Body.Close()
		at := base.Attempts()
		if len(at) != 2 || at[0].Header.Get(HeaderIdempotencyKey) != "" || at[1].Header.Get(HeaderIdempotencyKey) != "" || at[1].BodyLength != 7 {
			t.Errorf("%d options: %d attempts (%+v); want 2, the body replayed, no key added", len(opts), len(at), at)
		}
	}
	// The same POST without the declaration is sent once.
	base := retrytest.NewScriptTransport(steps(503)...)
	tr, _ := testTransport(base)
	resp, _ := tr.RoundTrip(newRequest(t, "POST", "http://h/query", strings.NewReader(`{"q":1}`)))
	resp.Body.Close()
	if base.Count() != 1 {
		t.Errorf("an undeclared POST was sent %d times", base.Count())
	}
}

// WithIdempotentIf declares requests by what they are: DynamoDB's reads,
// told by X-Amz-Target, and not its writes.
func TestIdempotentIfByTarget(t *testing.T) {
	reads := func(r *http.Request) bool {
		op := r.Header.Get("X-Amz-Target")
		return strings.HasSuffix(op, ".GetItem") || strings.HasSuffix(op, ".Query")
	}
	for _, tt := range []struct {
		target string
		want   int
	}{{"DynamoDB_20120810.GetItem", 2}, {"DynamoDB_20120810.Query", 2}, {"DynamoDB_20120810.PutItem", 1}} {
		base := retrytest.NewScriptTransport(steps(503)...)
		tr, _ := testTransport(base, WithIdempotentIf(reads))
		req := newRequest(t, "POST", "http://h/", strings.NewReader("{}"))
		req.Header.Set("X-Amz-Target", tt.target)
		resp, _ := tr.RoundTrip(req)
		resp.Body.Close()
		if base.Count() != tt.want {
			t.Errorf("%s: %d attempts, want %d", tt.target, base.Count(), tt.want)
		}
	}
}

// A policy lists its safe requests as "METHOD pattern" entries.
func TestPolicyIdempotentRequests(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"semantic_safety": {"idempotent_requests": ["POST /*/_search", "post /graphql"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	opts, err := p.Options()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		want int
	}{{"/logs/_search", 2}, {"/graphql", 2}, {"/logs/_doc", 1}, {"/a/b/_search", 1}} {
		base := retrytest.NewScriptTransport(steps(503)...)
		tr, _ := testTransport(base, opts...)
		resp, _ := tr.RoundTrip(newRequest(t, "POST", "http://h"+tt.path, strings.NewReader("{}")))
		resp.Body.Close()
		if base.Count() != tt.want {
			t.Errorf("POST %s: %d attempts, want %d", tt.path, base.Count(), tt.want)
		}
	}
	for _, bad := range []string{`["POST"]`, `["POST _search"]`, `["POST /[x"]`, `["PO ST /x"]`} {
		for _, safety := range []string{`{"idempotent_requests": ` + bad + `}`, `{"idempotent": true, "idempotent_requests": ` + bad + `}`} {
			_, err := mustPolicy(t, `{"semantic_safety": `+safety+`}`).Options()
			if err == nil || !strings.Contains(err.Error(), "field semantic_safety.idempotent_requests: ") {
				t.Errorf("%s: %v, want an error naming the field", safety, err)
			}
		}
	}
}

// WithIdempotencyKeys may be given for one request.
func TestIdempotencyKeysPerRequest(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503)...)
	tr, _ := testTransport(base)
	ctx := WithRequestOptions(context.Background(), WithIdempotencyKeys())
	resp, err := tr.RoundTrip(newRequest(t, "POST", "http://h/pay", strings.NewReader("x")).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	at := base.Attempts()
	if len(at) != 2 || at[0].Header.Get(HeaderIdempotencyKey) == "" || at[0].Header.Get(HeaderIdempotencyKey) != at[1].Header.Get(HeaderIdempotencyKey) {
		t.Errorf("%d attempts; want 2 with one injected key", len(at))
	}
}

// The layered-retry advice never tells the user to turn an SDK's retries
// off for a request that retryhttp would then not retry: it names the way
// to declare it.
func TestLayeredAdviceForUnretriedPOST(t *testing.T) {
	var logs bytes.Buffer
	tr, _ := testTransport(retrytest.NewScriptTransport(), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	req := newRequest(t, "POST", "http://dynamodb.test/", strings.NewReader("{}"))
	req.Header.Set("Amz-Sdk-Request", "attempt=2; max=3")
	resp, _ := tr.RoundTrip(req)
	resp.Body.Close()
	if !strings.Contains(logs.String(), "Idempotent(ctx)") {
		t.Errorf("advice for an unretried POST does not say how to declare it: %s", logs.String())
	}
}

// A request declared unsafe is sent again only when it provably never
// reached the server, or carries a key: a PUT that issues a certificate
// reaches the server once, whatever its method says.
func TestNotIdempotent(t *testing.T) {
	dialErr := &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}
	for _, tt := range []struct {
		name   string
		method string
		ctx    func(context.Context) context.Context
		policy string
		key    bool
		script []retrytest.Step
		want   int
	}{
		{"PUT, NotIdempotent, 502", "PUT", NotIdempotent, "", false, steps(502), 1},
		{"PUT, NotIdempotent, refused connection", "PUT", NotIdempotent, "", false, []retrytest.Step{fail(dialErr)}, 2},
		{"PUT, NotIdempotent over Idempotent, 502", "PUT", func(ctx context.Context) context.Context { return NotIdempotent(Idempotent(ctx)) }, "", false, steps(502), 1},
		{"GET, NotIdempotent, 503", "GET", NotIdempotent, "", false, steps(503), 1},
		{"PUT, NotIdempotent, a key of the caller's, 502", "PUT", NotIdempotent, "", true, steps(502), 2},
		{"PUT, the policy says side_effect, 502", "PUT", nil, `{"semantic_safety": {"idempotent": false, "side_effect": true}}`, false, steps(502), 1},
		{"PUT, undeclared, 502", "PUT", nil, "", false, steps(502), 2},
	} {
		base := retrytest.NewScriptTransport(tt.script...)
		var opts []Option
		if tt.policy != "" {
			popts, err := mustPolicy(t, tt.policy).Options()
			if err != nil {
				t.Fatal(err)
			}
			opts = popts
		}
		tr, _ := testTransport(base, opts...)
		req := newRequest(t, tt.method, "http://vault/v1/pki/issue/web", strings.NewReader(`{"common_name":"a"}`))
		if tt.ctx != nil {
			req = req.WithContext(tt.ctx(context.Background()))
		}
		if tt.key {
			req.Header.Set(HeaderIdempotencyKey, "k1")
		}
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if base.Count() != tt.want {
			t.Errorf("%s: %d attempts, want %d", tt.name, base.Count(), tt.want)
		}
	}
}

// A dependency whose requests have side effects keeps its keys: a POST
// keyed by WithIdempotencyKeys is still retried, since the server
// deduplicates it.
func TestSideEffectWithKeys(t *testing.T) {
	opts, err := mustPolicy(t, `{"semantic_safety": {"idempotent": false, "side_effect": true, "idempotency_keys": ["POST"]}}`).Options()
	if err != nil {
		t.Fatal(err)
	}
	base := retrytest.NewScriptTransport(steps(503)...)
	tr, _ := testTransport(base, opts...)
	resp, _ := tr.RoundTrip(newRequest(t, "POST", "http://pay/charges", strings.NewReader("x")))
	resp.Body.Close()
	if at := base.Attempts(); len(at) != 2 || at[1].Header.Get(HeaderIdempotencyKey) == "" {
		t.Errorf("%d attempts, want a keyed retry", len(at))
	}
}

// An operation that only says which methods get keys keeps its
// dependency's declaration that requests have side effects.
func TestOperationKeepsSideEffect(t *testing.T) {
	ps, err := LoadPolicies(strings.NewReader(`[
	  {"dependency": "vault", "semantic_safety": {"side_effect": true}},
	  {"dependency": "vault", "match": "* /v1/pki/*", "semantic_safety": {"idempotency_keys": ["POST"]}}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	opts, err := ps["vault"].Options()
	if err != nil {
		t.Fatal(err)
	}
	base := retrytest.NewScriptTransport(steps(502)...)
	tr, _ := testTransport(base, opts...)
	resp, _ := tr.RoundTrip(newRequest(t, "PUT", "http://vault/v1/pki/issue/web", strings.NewReader("{}")))
	resp.Body.Close()
	if base.Count() != 1 {
		t.Errorf("the PUT reached the server %d times, want once: the operation dropped the side effect", base.Count())
	}
}
