// Command demo starts an embedded flaky server on loopback, sends requests
// to it through a retryhttp Transport, and prints each retry with its delay
// and reason, what each request ended with, and the metrics at the end.
//
//	go run ./examples/demo
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retrytest"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// scenario is one request of the demo, against a server with its own script.
type scenario struct {
	title   string
	method  string
	body    string
	timeout time.Duration
	script  []retrytest.Reply
}

func run(w io.Writer) error {
	scenarios := []scenario{
		{title: "GET, two 503s then 200", method: "GET",
			script: []retrytest.Reply{retrytest.Status(503), retrytest.Status(503)}},
		{title: "GET, 429 with Retry-After: 1", method: "GET",
			script: []retrytest.Reply{retrytest.RetryAfter(429, "1")}},
		{title: "GET, connection reset, then 200", method: "GET",
			script: []retrytest.Reply{{Fault: retrytest.Reset}}},
		{title: "POST, 503 then 200: a key is injected, the same on both attempts", method: "POST", body: `{"amount":100}`,
			script: []retrytest.Reply{retrytest.Status(503)}},
		{title: "PATCH without a key, 503: not retried (it could apply twice)", method: "PATCH", body: `{"name":"x"}`,
			script: []retrytest.Reply{retrytest.Status(503)}},
		{title: "GET, 404: not retried (asking again gives the same answer)", method: "GET",
			script: []retrytest.Reply{retrytest.Status(404)}},
		{title: "GET, always 503: gives up after 4 attempts, returns the last 503", method: "GET",
			script: []retrytest.Reply{retrytest.Status(503), retrytest.Status(503), retrytest.Status(503), retrytest.Status(503)}},
		{title: "GET, 503 with Retry-After: 120: gives up at once (longer than the 30s cap)", method: "GET",
			script: []retrytest.Reply{retrytest.RetryAfter(503, "120")}},
		{title: "GET, 503 with Retry-After: 2, 500ms deadline: returns the 503 at once, not wait past it", method: "GET", timeout: 500 * time.Millisecond,
			script: []retrytest.Reply{retrytest.RetryAfter(503, "2")}},
	}

	reg := prometheus.NewRegistry()
	metrics := retryhttp.NewMetrics()
	reg.MustRegister(metrics)
	start := time.Now()
	lastOutcome := "" // the demo's requests go one at a time
	tr := retryhttp.New(nil,
		retryhttp.WithBackoff(retryhttp.FullJitter(100*time.Millisecond, time.Second)),
		retryhttp.WithIdempotencyKeys(),
		retryhttp.WithMetrics(metrics),
		retryhttp.WithName("demo"),
		retryhttp.WithAttemptHook(func(ctx context.Context, a retryhttp.AttemptStart) (context.Context, func(retryhttp.AttemptEnd)) {
			// Called as each attempt is sent: a retry (Attempt > 1) says
			// the wait it had; the end says what the attempt came to.
			if a.Attempt > 1 {
				fmt.Fprintf(w, "  %7s  attempt %d/%d failed (%s), retried after %v\n",
					since(start), a.Attempt-1, a.MaxAttempts, lastOutcome, a.Delay.Round(time.Millisecond))
			}
			return ctx, func(e retryhttp.AttemptEnd) { lastOutcome = e.Outcome }
		}),
	)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	for i, sc := range scenarios {
		srv := retrytest.NewServer(sc.script...)
		fmt.Fprintf(w, "%d. %s\n", i+1, sc.title)
		start = time.Now()
		err := send(w, client, srv, sc, start)
		srv.Close()
		if err != nil {
			return err
		}
	}

	fmt.Fprintln(w, "\nMetrics:")
	return printMetrics(w, reg)
}

func send(w io.Writer, client *http.Client, srv *retrytest.Server, sc scenario, start time.Time) error {
	ctx := context.Background()
	if sc.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, sc.timeout)
		defer cancel()
	}
	var body io.Reader
	if sc.body != "" {
		body = strings.NewReader(sc.body)
	}
	req, err := http.NewRequestWithContext(ctx, sc.method, srv.URL+"/orders", body)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(w, "  %7s  error: %v\n", since(start), err)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Fprintf(w, "  %7s  %s\n", since(start), resp.Status)
	}
	att := srv.Attempts()
	keys := map[string]bool{}
	for _, a := range att {
		if k := a.Header.Get("Idempotency-Key"); k != "" {
			keys[k] = true
		}
	}
	fmt.Fprintf(w, "           server received %d attempt(s)", len(att))
	if len(keys) > 0 {
		fmt.Fprintf(w, ", %d distinct Idempotency-Key", len(keys))
	}
	fmt.Fprintln(w)
	return nil
}

func since(t time.Time) string {
	return fmt.Sprintf("+%dms", time.Since(t).Milliseconds())
}

// printMetrics prints the retryhttp series that are not zero, one a line.
func printMetrics(w io.Writer, g prometheus.Gatherer) error {
	families, err := g.Gather()
	if err != nil {
		return err
	}
	var lines []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				if l.GetName() != "name" {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
			}
			lbl := "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil && m.GetCounter().GetValue() > 0:
				lines = append(lines, fmt.Sprintf("  %s%s %g", f.GetName(), lbl, m.GetCounter().GetValue()))
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				lines = append(lines, fmt.Sprintf("  %s_count %d", f.GetName(), h.GetSampleCount()),
					fmt.Sprintf("  %s_sum %.3f", f.GetName(), h.GetSampleSum()))
			}
		}
	}
	sort.Strings(lines)
	_, err = fmt.Fprintln(w, strings.Join(lines, "\n"))
	return err
}
