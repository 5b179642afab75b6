package retryhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retryhttp/retryhttp/retrytest"
)

// trafficCase is one logical request of the scripted traffic below.
type trafficCase struct {
	method string
	script []retrytest.Step
	opts   []Option
	ctx    func() (context.Context, context.CancelFunc)
	body   string
}

func TestMetricsExactCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics()
	reg.MustRegister(m)
	reset := retrytest.Step{Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}}
	ra := func(v string) retrytest.Step { return retrytest.Step{Reply: retrytest.RetryAfter(503, v)} }
	traffic := []trafficCase{
		{method: "GET", script: steps(503, 503)},                                                      // 2 retries, success
		{method: "GET", script: []retrytest.Step{reset}},                                              // 1 retry, success
		{method: "POST", script: steps(503)},                                                          // unsafe_method
		{method: "GET", script: steps(503, 503, 503, 503)},                                            // attempts
		{method: "GET", script: []retrytest.Step{ra("100")}},                                          // retry_after
		{method: "PUT", script: steps(429), opts: []Option{WithBudget(NewBudget(0, 0))}},              // budget
		{method: "PUT", script: steps(502), opts: []Option{WithBodyBufferLimit(1)}, body: "too long"}, // body
		{method: "GET", script: []retrytest.Step{ra("5")}, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 2*time.Second)
		}}, // deadline
		{method: "FOO", script: steps(404)}, // other method, not retryable
	}
	for _, tc := range traffic {
		base := retrytest.NewScriptTransport(tc.script...)
		tr, _ := testTransport(base, append([]Option{WithMetrics(m), WithName("api"), WithBackoff(Constant(10 * time.Millisecond))}, tc.opts...)...)
		var body *strings.Reader
		req := newRequest(t, tc.method, "http://example.test/", nil)
		if tc.body != "" {
			body = strings.NewReader(tc.body)
			req = newRequest(t, tc.method, "http://example.test/", struct{ *strings.Reader }{body})
		}
		if tc.ctx != nil {
			ctx, cancel := tc.ctx()
			defer cancel()
			req = req.WithContext(ctx)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.method, err)
		}
		resp.Body.Close()
	}
	want := `
# HELP retryhttp_requests_total Logical requests sent through a retryhttp Transport (RoundTrip calls).
# TYPE retryhttp_requests_total counter
retryhttp_requests_total{criticality="default",method="GET",name="api"} 5
retryhttp_requests_total{criticality="default",method="POST",name="api"} 1
retryhttp_requests_total{criticality="default",method="PUT",name="api"} 2
retryhttp_requests_total{criticality="default",method="other",name="api"} 1
retryhttp_requests_total{criticality="default",method="CONNECT",name="api"} 0
retryhttp_requests_total{criticality="default",method="DELETE",name="api"} 0
retryhttp_requests_total{criticality="default",method="HEAD",name="api"} 0
retryhttp_requests_total{criticality="default",method="OPTIONS",name="api"} 0
retryhttp_requests_total{criticality="default",method="PATCH",name="api"} 0
retryhttp_requests_total{criticality="default",method="TRACE",name="api"} 0
# HELP retryhttp_attempts_total Attempts sent, first attempts and retries, by status code or error class.
# TYPE retryhttp_attempts_total counter
retryhttp_attempts_total{name="api",outcome="200"} 2
retryhttp_attempts_total{name="api",outcome="404"} 1
retryhttp_attempts_total{name="api",outcome="429"} 1
retryhttp_attempts_total{name="api",outcome="502"} 1
retryhttp_attempts_total{name="api",outcome="503"} 9
retryhttp_attempts_total{name="api",outcome="reset"} 1
# HELP retryhttp_retries_total Retries scheduled, by the outcome (status code or error class) of the attempt that failed.
# TYPE retryhttp_retries_total counter
retryhttp_retries_total{criticality="default",name="api",outcome="503"} 5
retryhttp_retries_total{criticality="default",name="api",outcome="reset"} 1
# HELP retryhttp_giveups_total Retryable failures that were not retried, by why.
# TYPE retryhttp_giveups_total counter
retryhttp_giveups_total{criticality="default",name="api",reason="attempts"} 1
retryhttp_giveups_total{criticality="default",name="api",reason="body"} 1
retryhttp_giveups_total{criticality="default",name="api",reason="breaker"} 0
retryhttp_giveups_total{criticality="default",name="api",reason="budget"} 1
retryhttp_giveups_total{criticality="default",name="api",reason="circuit_open"} 0
retryhttp_giveups_total{criticality="default",name="api",reason="deadline"} 1
retryhttp_giveups_total{criticality="default",name="api",reason="limit"} 0
retryhttp_giveups_total{criticality="default",name="api",reason="max_elapsed"} 0
retryhttp_giveups_total{criticality="default",name="api",reason="quota"} 0
retryhttp_giveups_total{criticality="default",name="api",reason="rate"} 0
retryhttp_giveups_total{criticality="default",name="api",reason="retry_after"} 1
retryhttp_giveups_total{criticality="default",name="api",reason="throttled"} 0
retryhttp_giveups_total{criticality="default",name="api",reason="unsafe_method"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"retryhttp_requests_total", "retryhttp_attempts_total", "retryhttp_retries_total", "retryhttp_giveups_total"); err != nil {
		t.Error(err)
	}
	// The deadline case: a 5s Retry-After with 2s left; the others wait 10ms.
	h := gatherHistogram(t, reg, "retryhttp_backoff_seconds")
	if h.GetSampleCount() != 6 || h.GetSampleSum() < 0.0599 || h.GetSampleSum() > 0.0601 {
		t.Errorf("backoff histogram: %d samples, sum %v; want 6 waits of 10ms", h.GetSampleCount(), h.GetSampleSum())
	}
	if problems, err := testutil.CollectAndLint(m); err != nil || len(problems) > 0 {
		t.Errorf("CollectAndLint: %v %v", problems, err)
	}
}

func gatherHistogram(t *testing.T, g prometheus.Gatherer, name string) interface {
	GetSampleCount() uint64
	GetSampleSum() float64
} {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetHistogram()
		}
	}
	t.Fatalf("no single %s series", name)
	return nil
}

func TestMetricsSharedByNamedTransports(t *testing.T) {
	m := NewMetrics()
	for _, name := range []string{"payments", "search", "payments"} {
		tr, _ := testTransport(retrytest.NewScriptTransport(steps(503)...), WithMetrics(m), WithName(name), WithBackoff(Constant(0)))
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://example.test/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for name, want := range map[string]float64{"payments": 2, "search": 1} {
		if got := testutil.ToFloat64(m.retries.WithLabelValues(name, "503", "default")); got != want {
			t.Errorf("retries{name=%q} = %v, want %v", name, got, want)
		}
	}
}

func TestLogRecordsNeverCarrySecrets(t *testing.T) { synctest.Test(t, testLogRecords) }

func testLogRecords(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	base := retrytest.NewScriptTransport(steps(503, 503, 503, 503)...)
	tr, _ := testTransport(base, WithLogger(logger), WithBackoff(Constant(time.Second)))
	req := newRequest(t, "GET", "http://user:pw@api.example.test/services/T0/B0/webhooksecret?token=hunter2", nil)
	req.Header.Set("Authorization", "Bearer s3cr3t")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	out := buf.String()
	for _, secret := range []string{"hunter2", "token", "s3cr3t", "Bearer", "pw@", "webhooksecret", "/services"} {
		if strings.Contains(out, secret) {
			t.Errorf("log contains %q:\n%s", secret, out)
		}
	}
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 4 {
		t.Fatalf("%d records, want 3 retries and 1 give-up:\n%s", len(recs), out)
	}
	for i, rec := range recs {
		level, reason := "INFO", "503"
		if i == 3 {
			level = "WARN"
		}
		if rec["level"] != level || rec["name"] != "default" || rec["method"] != "GET" || rec["host"] != "api.example.test" ||
			rec["path"] != nil || rec["route"] != nil || rec["attempt"] != float64(i+1) || rec["max_attempts"] != float64(4) ||
			rec["outcome"] != reason {
			t.Errorf("record %d = %v", i+1, rec)
		}
		if i < 3 && rec["delay_ms"] != float64(1000) {
			t.Errorf("record %d delay_ms = %v, want 1000", i+1, rec["delay_ms"])
		}
	}
	if recs[3]["reason"] != string(GiveUpAttempts) || recs[3]["outcome"] != "503" {
		t.Errorf("give-up record = %v, want reason=attempts, outcome=503", recs[3])
	}
}

// WithLogRoute adds what the user chooses, and WithName names the records.
func TestLogRoute(t *testing.T) {
	var buf bytes.Buffer
	tr, _ := testTransport(retrytest.NewScriptTransport(steps(503)...), WithName("users"),
		WithLogger(slog.New(slog.NewTextHandler(&buf, nil))),
		WithLogRoute(func(r *http.Request) string { return "/users/{id}" }))
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/users/42", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if out := buf.String(); !strings.Contains(out, "name=users method=GET host=h route=/users/{id}") || strings.Contains(out, "/users/42") {
		t.Errorf("log = %s; want the name and the route, not the path", out)
	}
}

var _ = http.MethodGet

func testutilCounter(m *Metrics, r GiveUpReason) float64 {
	return testutil.ToFloat64(m.giveups.WithLabelValues(defaultName, string(r), "default"))
}

// The doc of Metrics names every family it collects.
func TestMetricsDocNamesEveryFamily(t *testing.T) {
	ch := make(chan *prometheus.Desc, 32)
	NewMetrics().Describe(ch)
	close(ch)
	src, err := os.ReadFile("metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src[strings.Index(string(src), "// Metrics holds"):strings.Index(string(src), "type Metrics struct")])
	n := 0
	for d := range ch {
		n++
		name := regexp.MustCompile(`fqName: "([a-z_]+)"`).FindStringSubmatch(d.String())
		if name == nil || !strings.Contains(doc, "//\t"+name[1]+"{") {
			t.Errorf("the doc of Metrics does not name %v", d)
		}
	}
	if n < 10 {
		t.Errorf("%d families described", n)
	}
}

// ctxHandler is a context-aware handler, as an OpenTelemetry bridge is:
// it adds the trace id that the caller's context carries.
type ctxHandler struct{ slog.Handler }

type traceKey struct{}

func (h ctxHandler) Handle(ctx context.Context, r slog.Record) error {
	if id, ok := ctx.Value(traceKey{}).(string); ok {
		r.AddAttrs(slog.String("trace_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

// A Transport made from a policy names the dependency and the operation
// in its records, and writes them with the request's context, so that a
// context-aware handler adds the caller's trace id.
func TestLogsCarryCallersContext(t *testing.T) {
	var buf bytes.Buffer
	ps, err := LoadPolicies(strings.NewReader(`[
		{"dependency": "rates", "retry": {"max_attempts_total": 2, "backoff": "constant", "initial_delay_ms": 7}},
		{"dependency": "rates", "operation": "quote", "match": "GET /quote/*", "retry": {"max_attempts_total": 2, "backoff": "constant", "initial_delay_ms": 7}}]`))
	if err != nil {
		t.Fatal(err)
	}
	trs, err := ps.Transports(retrytest.NewScriptTransport(steps(503, 503, 503, 503)...),
		WithLogger(slog.New(ctxHandler{slog.NewJSONHandler(&buf, nil)})))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.WithValue(context.Background(), traceKey{}, "4bf92f3577b34da6")
	for _, path := range []string{"/quote/1", "/other"} {
		req := newRequest(t, "GET", "http://rates.test"+path, nil).WithContext(ctx)
		if resp, err := trs["rates"].RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 4 {
		t.Fatalf("%d records, want a retry and a give-up for each request:\n%s", len(recs), buf.String())
	}
	for i, rec := range recs {
		op := map[bool]any{true: "quote", false: nil}[i < 2]
		if rec["dependency"] != "rates" || rec["operation"] != op || rec["trace_id"] != "4bf92f3577b34da6" {
			t.Errorf("record %d = %v; want dependency rates, operation %v, the caller's trace id", i+1, rec, op)
		}
	}
	if recs[0]["delay_ms"] != float64(7) {
		t.Errorf("retry record's delay_ms = %v, want 7", recs[0]["delay_ms"])
	}
}
