// Command casedetail is the case study of docs/policy.md, runnable: a
// case-detail page that needs one dependency (party-service, "required")
// and can do without two (evidence-service and decision-service,
// "degradable"). Their policies are one JSON file (policies.json, in the
// template's shape), each with the message the page shows when the
// dependency cannot answer. The three dependencies are fakes on loopback
// that the program takes down: with evidence down the page is still
// served, with evidence's message in its place; with party down it is
// not. Then evidence-service is overloaded while critical and sheddable
// callers share one Transport: with a pacer on, the sheddable ones yield.
//
//	go run ./examples/casedetail
package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp"
)

// policyFile holds the three dependencies' policies.
//
//go:embed policies.json
var policyFile []byte

// pageDeadline bounds the whole page. It leaves room for each policy's
// caller_deadline_ms (800 ms for party) and one more read_timeout_ms
// (250 ms): caller_deadline_ms stops the waits between attempts, not the
// attempt that is under way, and a request that the page's own deadline
// cuts short ends with the context's error, which brings no fallback.
const pageDeadline = 1100 * time.Millisecond

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run tells the story: the page with every dependency up, with evidence
// down, with party down too; then the overload.
func run(w io.Writer) error {
	policies, err := retryhttp.LoadPolicies(bytes.NewReader(policyFile))
	if err != nil {
		return err
	}
	if err := pages(w, policies); err != nil {
		return err
	}
	fmt.Fprintln(w)
	_, err = overload(w, policies)
	return err
}

// pages asks for one case's page three times, taking a dependency down
// before the second and the third, and prints what the page answered.
func pages(w io.Writer, policies retryhttp.Policies) error {
	s, err := newSite(policies, w)
	if err != nil {
		return err
	}
	defer s.close()
	steps := []struct {
		title string
		down  string // the dependency taken down before the step, if any
	}{
		{"every dependency up", ""},
		{"evidence-service down (503 to every request)", "evidence-service"},
		{"party-service down too", "party-service"},
	}
	for i, st := range steps {
		if st.down != "" {
			s.deps[st.down].failing.Store(http.StatusServiceUnavailable)
		}
		fmt.Fprintf(w, "%d. GET /case/42, %s\n", i+1, st.title)
		status, body, err := s.get("42")
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "   %d %s\n", status, http.StatusText(status))
		for _, line := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
			fmt.Fprintf(w, "   | %s\n", line)
		}
	}
	return nil
}

// A dependency is the fake of one dependency, on loopback: it answers
// with a line of text, or, while it fails, with its failing status (503:
// down), or, given a capacity, 503 to the requests beyond the ones it
// serves at once.
type dependency struct {
	name     string
	body     string
	capacity int64         // requests served at once; 0: any number
	serve    time.Duration // how long serving one takes
	srv      *httptest.Server
	failing  atomic.Int32 // the status it answers every request with; 0: none, it serves

	inflight, served, refused atomic.Int64
}

func newDependency(name, body string, capacity int64, serve time.Duration) *dependency {
	d := &dependency{name: name, body: body, capacity: capacity, serve: serve}
	d.srv = httptest.NewServer(http.HandlerFunc(d.handle))
	return d
}

// handle answers r. A request leaves the count in flight before its
// answer is written, so that the client, once it has the answer, finds
// its place free.
func (d *dependency) handle(w http.ResponseWriter, r *http.Request) {
	n := d.inflight.Add(1)
	status := int(d.failing.Load())
	if status == 0 && d.capacity > 0 && n > d.capacity {
		status = http.StatusServiceUnavailable
	}
	if status != 0 {
		d.inflight.Add(-1)
		d.refused.Add(1)
		http.Error(w, d.name+" unavailable", status)
		return
	}
	time.Sleep(d.serve)
	d.inflight.Add(-1)
	d.served.Add(1)
	io.WriteString(w, d.body)
}

// A section is one part of the page: its dependency, its title, the path
// it is read from, and whether the page can be served without it.
type section struct {
	dep, title, path string
	// required repeats what the dependency's policy says (its
	// criticality): a Policy gives its criticality to the Transport, not
	// to the handler.
	required bool
}

var sections = []section{
	{"party-service", "Party", "/parties/%s", true},
	{"evidence-service", "Evidence", "/cases/%s/evidence", false},
	{"decision-service", "Decision", "/cases/%s/decision", false},
}

// A site is the page's server on loopback and the fakes it calls.
type site struct {
	deps       map[string]*dependency
	transports map[string]*retryhttp.Transport
	page       *httptest.Server
}

// newSite starts the fakes and the page, whose handler reports on w each
// fallback it serves.
func newSite(policies retryhttp.Policies, w io.Writer) (*site, error) {
	transports, err := policies.Transports(nil)
	if err != nil {
		return nil, err
	}
	s := &site{deps: map[string]*dependency{
		"party-service":    newDependency("party-service", "Ada Lovelace, claimant", 0, 0),
		"evidence-service": newDependency("evidence-service", "3 documents, last filed 2026-11-28", 0, 0),
		"decision-service": newDependency("decision-service", "granted on 2026-11-30", 0, 0),
	}, transports: transports}
	h := &caseDetail{clients: map[string]*http.Client{}, urls: map[string]string{}, log: log.New(w, "   ", 0)}
	for name, d := range s.deps {
		h.clients[name] = &http.Client{Transport: transports[name]}
		h.urls[name] = d.srv.URL
	}
	mux := http.NewServeMux()
	mux.Handle("GET /case/{id}", h)
	s.page = httptest.NewServer(mux)
	return s, nil
}

// get asks the page for case id, as a browser would.
func (s *site) get(id string) (status int, body string, err error) {
	resp, err := s.page.Client().Get(s.page.URL + "/case/" + id)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func (s *site) close() {
	s.page.Close()
	for _, d := range s.deps {
		d.srv.Close()
	}
	for _, tr := range s.transports {
		tr.CloseIdleConnections()
	}
}

// caseDetail serves /case/{id}: it asks the three dependencies at once,
// each through the client over its policy's Transport, and renders what
// came back, or each section's fallback.
type caseDetail struct {
	clients map[string]*http.Client
	urls    map[string]string
	log     *log.Logger // where the fallbacks served are reported
}

// A part is what one dependency gave the page: its text, or why not, with
// the fallback its policy gives, if the library handed one back.
type part struct {
	ok       bool
	text     string
	failure  string
	fallback *retryhttp.Fallback
}

func (h *caseDetail) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), pageDeadline)
	defer cancel()
	parts := make([]part, len(sections))
	var wg sync.WaitGroup
	for i, s := range sections {
		wg.Go(func() {
			parts[i] = h.fetch(ctx, s.dep, h.urls[s.dep]+fmt.Sprintf(s.path, id))
			if s.required && !parts[i].ok {
				cancel() // the page fails: the other calls need not go on
			}
		})
	}
	wg.Wait()

	var page strings.Builder
	fmt.Fprintf(&page, "Case %s\n", id)
	for i, s := range sections {
		p := parts[i]
		text := p.text
		if !p.ok {
			text = p.message(s.title)
			h.log.Printf("%s failed (%s): %s", s.dep, p.failure, p.served())
		}
		if s.required && !p.ok {
			http.Error(w, text, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(&page, "%-9s %s\n", s.title+":", text)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, page.String())
}

// fetch reads one section from its dependency. A request that gave up
// brings its policy's fallback: in the *retryhttp.Error, or, for a final
// response such as a 503 after its retries, through FallbackOf.
func (h *caseDetail) fetch(ctx context.Context, dep, url string) part {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return part{failure: err.Error()}
	}
	resp, err := h.clients[dep].Do(req)
	if err != nil {
		var re *retryhttp.Error
		if !errors.As(err, &re) {
			return part{failure: err.Error()}
		}
		failure := err.Error() // the page's deadline, say: the fallback comes with it too
		if re.Reason != "" {
			failure = fmt.Sprintf("gave up after %d attempts: %s", re.Attempts, re.Reason)
		}
		return part{failure: failure, fallback: re.Fallback}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	switch {
	case err != nil:
		return part{failure: err.Error()}
	case resp.StatusCode != http.StatusOK:
		return part{failure: resp.Status, fallback: retryhttp.FallbackOf(resp)}
	}
	return part{ok: true, text: strings.TrimSpace(string(body))}
}

// message is what the page shows in place of a section that failed: its
// policy's user message, or, with none handed back, a plain one.
func (p part) message(title string) string {
	if p.fallback != nil && p.fallback.UserMessage != "" {
		return p.fallback.UserMessage
	}
	return title + " unavailable"
}

// served says which fallback was served, for the report.
func (p part) served() string {
	if p.fallback == nil {
		return "no fallback from its policy, a plain message served"
	}
	return fmt.Sprintf("fallback %s served, %q", p.fallback.Type, p.fallback.UserMessage)
}

// The overload: evidence-service serves overloadCapacity requests at
// once, overloadServe each, and answers 503 to the rest, while
// overloadCallers callers of each criticality send it overloadRequests
// requests each, one every overloadGap: four times what it can serve.
const (
	overloadCapacity = 2
	overloadServe    = 20 * time.Millisecond
	overloadCallers  = 4
	overloadRequests = 25
	overloadGap      = 20 * time.Millisecond
	overloadTimeout  = 300 * time.Millisecond // each request's deadline
)

// A shedResult is what one run of the overload came to, for the critical
// callers ([0]) and the sheddable ones ([1]).
type shedResult struct {
	pacer          string
	ok             [2]int // requests served
	refused        [2]int // requests the pacer refused, sending nothing
	served, turned int64  // requests the server served, and answered with a 503
}

// overload runs the overload once without a pacer and once with each of
// two, and prints what each criticality got.
func overload(w io.Writer, policies retryhttp.Policies) ([]shedResult, error) {
	fmt.Fprintf(w, "4. evidence-service overloaded: it serves %d requests at once (%v each) and answers 503 beyond.\n"+
		"   %d critical and %d sheddable callers send it %d requests each, one every %v on average,\n"+
		"   through one Transport: %d requests of each criticality.\n",
		overloadCapacity, overloadServe, overloadCallers, overloadCallers, overloadRequests, overloadGap,
		overloadCallers*overloadRequests)
	pacers := []struct {
		name string
		opts []retryhttp.Option
	}{
		{"no pacer", nil},
		{"WithThrottle(2)", []retryhttp.Option{retryhttp.WithThrottle(2)}},
		{"WithConcurrencyLimit(2, 2)", []retryhttp.Option{retryhttp.WithConcurrencyLimit(2, 2)}},
	}
	const row = "   %-27s %8v %8v %10v %8v %9v %8v\n"
	fmt.Fprintf(w, "   %-27s %8v %19v %18v\n", "", "critical", "sheddable", "server")
	fmt.Fprintf(w, row, "", "served", "refused", "served", "refused", "served", "503")
	var results []shedResult
	for _, p := range pacers {
		r, err := shed(policies, p.name, p.opts...)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(w, row, p.name, r.ok[0], r.refused[0], r.ok[1], r.refused[1], r.served, r.turned)
		results = append(results, r)
	}
	fmt.Fprintln(w, "   (refused: by the Transport's pacer, before sending)")
	return results, nil
}

// shed runs the overload through evidence-service's Transport, made from
// its policy with opts.
func shed(policies retryhttp.Policies, pacer string, opts ...retryhttp.Option) (shedResult, error) {
	d := newDependency("evidence-service", "3 documents", overloadCapacity, overloadServe)
	defer d.srv.Close()
	transports, err := policies.Transports(nil, opts...)
	if err != nil {
		return shedResult{}, err
	}
	defer func() {
		for _, tr := range transports {
			tr.CloseIdleConnections()
		}
	}()
	client := &http.Client{Transport: transports["evidence-service"]}
	res := shedResult{pacer: pacer}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 2 * overloadCallers {
		side := i % 2
		c := [2]retryhttp.Criticality{retryhttp.Critical, retryhttp.Sheddable}[side]
		wg.Go(func() {
			for range overloadRequests {
				start := time.Now()
				ok, refused := call(client, d.srv.URL+"/cases/7/evidence", c)
				mu.Lock()
				res.ok[side] += btoi(ok)
				res.refused[side] += btoi(refused)
				mu.Unlock()
				// The next in overloadGap on average, at random: callers
				// in step would arrive together, and the first ones to
				// arrive would be served whatever their criticality.
				time.Sleep(rand.N(2*overloadGap) - time.Since(start))
			}
		})
	}
	wg.Wait()
	res.served, res.turned = d.served.Load(), d.refused.Load()
	return res, nil
}

// call sends one request of criticality c, chosen for this request over
// the Transport's own; it reports whether it was served, and whether the
// Transport's pacer refused it without sending it.
func call(client *http.Client, url string, c retryhttp.Criticality) (ok, refused bool) {
	ctx, cancel := context.WithTimeout(context.Background(), overloadTimeout)
	defer cancel()
	ctx = retryhttp.WithRequestOptions(ctx, retryhttp.WithCriticality(c))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, false
	}
	resp, err := client.Do(req)
	if err != nil {
		var re *retryhttp.Error
		return false, errors.As(err, &re) && (re.Reason == retryhttp.GiveUpThrottled || re.Reason == retryhttp.GiveUpLimit)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, false
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
