package retryhttp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/internal/admission"
)

// The simulator checks admission (internal/admission) as a whole: it draws seeded
// random option sets and fault scripts, runs 1 to 200 callers over a few
// hosts in virtual time, and checks the invariants after every run. A
// failure prints its seed and the command that runs it alone; seeds it
// found stay in simRegressions. The seeds are a fixed range, 1 to
// -sim.runs (300, and 2,000 with -load.full: make test), so that every run
// checks the same cases and a failure comes back; and -sim.fresh seeds
// from the clock, logged, so that new cases are still found.
var (
	simRuns  = flag.Int("sim.runs", 0, "simulator runs over the fixed seeds (0: 300, or 2,000 with -load.full)")
	simSeed  = flag.Uint64("sim.seed", 0, "first seed of the fixed range (default 1)")
	simFresh = flag.Int("sim.fresh", 8, "simulator runs over seeds from the clock")
)

// simRegressions are seeds that once failed: 10320 left a hedged
// request's kept 503 open when a copy panicked; 33 kept a quota count of
// an attempt whose base panicked; 8154 throttled a recovered host whose
// answers took 494 ms (its attempts in flight looked refused); 9737
// throttled a quiet client's requests after a recovery, on two late 503s
// in its short view; 1932 sent held retries as probes within the host's
// answer time of their deadlines (their callers got the deadline's error,
// not the 503 they held); 1033,
// 30149, 32267, 1796320411515408814, 882 and 7510 were the checker's own
// mistakes (FailFast refusals, a Retry-After the client never saw,
// timeouts counted as the outage's, recovery per host, a quota's 429s
// taken for 503s and for the outage's failures); 39 gave a sheddable
// held retry a ramp turn past its own deadline (criticalFirst), so that it
// gave up after the host answered again; 12268 refused a sheddable attempt
// on a guessed quota window (quotaReserve); 5852, 9692, 13096 and 23842
// released held retries into an outage on its 503s, which the caller had
// made final (WithNonRetryableStatuses): taken for the host's answers;
// 14406 kept throttling the sheddable seconds after a recovery, on its
// own refusals, counted as sent to the host; 19253 was the checker's: a
// slow host's timeouts, which the throttle counts as turned away, kept
// the sheddable out after its recovery; 14578 kept a flapping host's
// recovery slowed through its next outage, so that a held retry gave up
// at its limit after the host answered again.
var simRegressions = []uint64{10320, 33, 8154, 9737, 1932, 1033, 30149, 32267, 1796320411515408814, 882, 7510, 39, 12268,
	5852, 9692, 13096, 23842, 14406, 19253, 14578}

func TestSimulator(t *testing.T) {
	runs, first, fresh := *simRuns, *simSeed, *simFresh
	if runs == 0 {
		runs = loadSize(2000, 300)
	}
	var seeds []uint64
	if first == 0 {
		first = 1
		seeds = append(seeds, simRegressions...)
	} else {
		fresh = 0 // one seed asked for, alone
	}
	for i := range runs {
		seeds = append(seeds, first+uint64(i))
	}
	clock := uint64(time.Now().UnixNano())
	for i := range fresh {
		seeds = append(seeds, clock+uint64(i))
		t.Logf("fresh seed %d", clock+uint64(i))
	}
	for _, seed := range seeds {
		var failed bool
		synctest.Test(t, func(t *testing.T) {
			sim := drawSim(seed)
			if errs := sim.run(t); len(errs) > 0 {
				failed = true
				t.Errorf("seed %d: %s\n  %s\n  go test -run '^TestSimulator$' -sim.seed=%d -sim.runs=1 .",
					seed, sim, strings.Join(errs, "\n  "), seed)
			}
		})
		if failed {
			return
		}
	}
}

// simulation is one drawn run.
type simulation struct {
	seed          uint64
	opts          []Option
	desc          []string
	sharedKey     bool // a host's keyed callers share one key (drawVendorWords)
	failFast      bool
	budgetDefault bool
	huge          bool // a huge backoff, with WithMaxElapsed(2s)
	noBudget      bool
	ratio, floor  float64 // the budget's, when there is one
	maxAtt        int
	hedge         int // extra copies allowed
	perAtt        time.Duration
	wire          bool          // WithAttemptHeader and WithDeadlineHeader
	safeIf        bool          // WithIdempotentIf declares X-Safe: 1 requests safe
	unprocessed   bool          // WithUnprocessedStatuses(429): a POST's 429 is retried
	op            *simOp        // a policy's operation, for requests to /op
	final503      bool          // WithNonRetryableStatuses(503): the outages' answers are final
	noBuffer      bool          // WithBodyBufferLimit(0): a body without GetBody is sent once
	throttle      bool          // WithThrottle
	limited       bool          // WithConcurrencyLimit or WithRateLimit: waits bounded by deadlines only
	quotaWait     time.Duration // WithQuotaPacing's maxWait, 0: off
	concurrency   bool          // WithConcurrencyLimit, whose line grants the most critical first
	rated         bool          // WithRateLimit, whose line is first come, first served
	callers       []simCaller
	faults        simFaults
	crit          simCrit // criticality and fallback (drawCriticality, sim_criticality_test.go)

	mu       sync.Mutex
	releases []simRelease
	probes   []simProbe
	events   []breakerEvent
	hooked   bool                // an attempt hook is drawn: hook records what it was told
	hook     map[string][]string // per caller: "start n", "start n hedge", "end n retried", "end n give-up <reason>", "end n"
}

// attemptHook records, per caller, what the attempt hook is told.
func (s *simulation) attemptHook(ctx context.Context, a AttemptStart) (context.Context, func(AttemptEnd)) {
	id := a.Request.Header.Get("X-Sim")
	s.hookLevel(id, a.Criticality)
	start := fmt.Sprintf("start %d", a.Attempt)
	if a.Hedge {
		start += " hedge"
	}
	s.record(id, start)
	return ctx, func(e AttemptEnd) {
		end := fmt.Sprintf("end %d", a.Attempt)
		switch {
		case e.Retried && e.GiveUp != "":
			end += " retried and given up"
		case e.Retried:
			end += " retried"
		case e.GiveUp != "":
			end += " give-up " + string(e.GiveUp)
		}
		s.record(id, end)
	}
}

func (s *simulation) record(id, ev string) {
	s.mu.Lock()
	s.hook[id] = append(s.hook[id], ev)
	s.mu.Unlock()
}

// checkHook checks that the attempt hook tells what the metrics count: an
// end for every start, as many starts as attempts, and an attempt reported
// as retried only if its retry started.
func (s *simulation) checkHook(attempts, retries float64, fail func(string, ...any)) {
	if !s.hooked {
		return
	}
	var starts, retried int
	panics := false
	for _, c := range s.callers {
		if s.faults.panics[c.id] != 0 {
			panics = true // a panicking attempt's end is never told
			continue
		}
		evs := s.hook[c.id]
		open, giveUps := 0, 0
		for i, ev := range evs {
			var n int
			switch {
			case strings.HasPrefix(ev, "start"):
				starts++
				open++
			case strings.HasPrefix(ev, "end"):
				open--
				fmt.Sscanf(ev, "end %d", &n)
				if strings.HasSuffix(ev, " retried") {
					retried++
					if !slices.Contains(evs[i+1:], fmt.Sprintf("start %d", n+1)) {
						fail("caller %s: the hook was told attempt %d was retried, but attempt %d never started: %v", c.id, n, n+1, evs)
					}
				}
				if strings.Contains(ev, "give-up") || strings.Contains(ev, "given up") {
					giveUps++
				}
			}
		}
		if open != 0 || giveUps > 1 {
			fail("caller %s: the hook was told %v", c.id, evs)
		}
	}
	if !panics && (float64(starts) != attempts || float64(retried) != retries) {
		fail("the hook saw %d starts and %d retried ends; the metrics count %v attempts and %v retries", starts, retried, attempts, retries)
	}
}

// breakerEvent is one call of OnStateChange.
// simRelease is a held retry that a recovery released.
type simRelease struct {
	host string
	at   time.Duration
	lent bool // beyond the budget's share
}

// simProbe is a held retry sent as the probe: its caller, when, and how
// many attempts its request had sent before it.
type simProbe struct {
	id    string
	at    time.Duration
	prior int
}

// simCallerKey carries a caller's id in its request's context, for the
// probe hook.
type simCallerKey struct{}

type breakerEvent struct {
	host string
	open bool
}

func (s *simulation) event(host string, open bool) {
	s.mu.Lock()
	s.events = append(s.events, breakerEvent{host, open})
	s.mu.Unlock()
}

// checkEvents checks that each host's breaker events alternate, open
// first, and that the open-hosts gauge counts the hosts left open.
func (s *simulation) checkEvents(m *Metrics, fail func(string, ...any)) {
	last := map[string]bool{} // open
	for _, ev := range s.events {
		prev, ok := last[ev.host]
		if (!ok && !ev.open) || (ok && prev == ev.open) {
			fail("host %s: breaker open=%v after open=%v (seen before: %v)", ev.host, ev.open, prev, ok)
		}
		last[ev.host] = ev.open
	}
	open := 0
	for _, o := range last {
		if o {
			open++
		}
	}
	if g := gauge(nil, m, "retryhttp_breaker_open_hosts"); int(g) != open {
		fail("retryhttp_breaker_open_hosts = %v, but %d hosts were left open by their events", g, open)
	}
}

// simOp is a policy operation drawn for requests to /op: its own attempts,
// its declaration, its caller_deadline_ms.
type simOp struct {
	attempts int
	safe     bool
	elapsed  time.Duration // 0: none
}

type simCaller struct {
	id          string
	op          bool // to /op, the drawn operation's path
	streamed    bool // a POST body without GetBody (a pipe, say): the Transport keeps it to send it again
	host        string
	method      string
	keyed       bool
	declared    bool          // Idempotent(ctx)
	unsafe      bool          // NotIdempotent(ctx): a PUT reaches the server once
	safeHeader  bool          // X-Safe: 1, which the Transport's WithIdempotentIf declares safe, if drawn
	at          time.Duration // start (after follows ends, if set: the think time)
	follows     int           // a closed loop: starts when caller follows-1 has ended; 0: open loop
	deadline    time.Duration // 0: none
	noRetry     bool
	maxAttempts int           // per-request WithMaxAttempts, 0: none
	cancelAt    time.Duration // its caller cancels it this long after it starts, 0: never
	sdk         bool          // an SDK's second try (amz-sdk-request: attempt=2; max=3): its schedule is the SDK's
	sharedBody  bool          // its GetBody rewinds one shared reader (as azcore's does) instead of making a new one
	crit        simCallerCrit // its criticality and what the fallback makes of it (sim_criticality_test.go)
}

type simFaults struct {
	outages     [][2]time.Duration // host answers 503 (or refuses) in these windows
	failFirst   map[string]int     // a request's first n attempts get 503
	latency     time.Duration
	hangs       map[string]int // a request's n-th attempt hangs until its context ends
	panics      map[string]int // a request's n-th attempt panics
	ra          string         // the wait on 503s, in seconds
	raKind      int            // which header says it: Retry-After, retry-after-ms, RateLimit, X-RateLimit-*, x-amz-retry-after, RateLimit on two lines, RateLimit-Reset as a Unix time, Anthropic's reset, GitHub's 403
	shouldRetry string         // x-should-retry on every answer, if not ""
	shouldName  string         // the header that says it: X-Should-Retry, or Stripe's
	outageOnly  bool
	// failOnce: every request's first attempt fails and nothing else
	// does (a test's fake that fails once, a bad backend behind a
	// balancer): no retry can fail, so none may be lost to admission.
	failOnce bool
	spread   time.Duration // callers start within it
	// late: an attempt that arrives in an outage is answered 503 after
	// the latency even if the outage has ended by then (a late answer).
	late bool
	// refuse: the outages refuse connections instead of answering 503.
	refuse bool
	// quota: each host serves this many a second (windows from the
	// start), says what is left in RateLimit, and answers 429 beyond.
	quota int
	// capacity: each host serves this many per 100ms (windows from the
	// start) and answers 503 beyond: an overload, never an outage; from
	// weakFrom on, if it is set (a weak recovery).
	capacity int
	weakFrom time.Duration
	// wild: every wild-th answer says a billion of the quota are left.
	wild int
	// statePolicy: the quota's size and window are stated in RateLimit-Policy.
	statePolicy bool
	// policyWindow, policyQuota: a wild RateLimit-Policy for the quota,
	// stated in place of its true window (1 s) and size, on every answer
	// that states the quota, or on a host's first (policyOnce): a window
	// up to past a day, a size off by any factor; the RateLimit word of
	// every answer still tells the truth.
	policyWindow int64
	policyQuota  int64
	policyOnce   bool
	// lateClose: the base reads each request body's declared length,
	// answers, and only this long after reads on to EOF and closes it, on
	// a goroutine of its own, as net/http may. 0: at once, before it
	// answers.
	lateClose time.Duration
}

func (s *simulation) String() string { return strings.Join(s.desc, " ") }

func drawSim(seed uint64) *simulation {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := &simulation{seed: seed, faults: simFaults{failFirst: map[string]int{}, hangs: map[string]int{}, panics: map[string]int{}}}
	add := func(o Option, d string) { s.opts = append(s.opts, o); s.desc = append(s.desc, d) }
	ms := time.Millisecond
	base := time.Duration(r.IntN(100)) * ms
	switch r.IntN(6) {
	case 0:
		add(WithBackoff(Constant(0)), "Constant(0)")
	case 1:
		add(WithBackoff(Constant(base)), fmt.Sprintf("Constant(%v)", base))
	case 2:
		add(WithBackoff(FullJitter(base, 10*base+ms)), fmt.Sprintf("FullJitter(%v)", base))
	case 3:
		add(WithBackoff(EqualJitter(base, 10*base+ms)), fmt.Sprintf("EqualJitter(%v)", base))
	case 4:
		add(WithBackoff(Exponential(base, 10*base+ms)), fmt.Sprintf("Exponential(%v)", base))
	case 5:
		if r.IntN(3) == 0 {
			// Huge durations: a schedule that would overflow, bounded by
			// WithMaxElapsed (and a hold as long as it can be).
			s.huge = true
			s.opts = append(s.opts, WithBackoff(Constant(1<<61)), WithMaxElapsed(2*time.Second))
			s.desc = append(s.desc, "Constant(1<<61) max-elapsed=2s")
			break
		}
		s.desc = append(s.desc, "default-backoff")
	default:
		s.desc = append(s.desc, "default-backoff")
	}
	s.maxAtt = 1 + r.IntN(7)
	add(WithMaxAttempts(s.maxAtt), fmt.Sprintf("attempts=%d", s.maxAtt))
	switch r.IntN(4) {
	case 0:
		s.noBudget = true
		add(WithoutBudget(), "budget=off")
	case 1:
		ratio, floor := r.Float64()*0.5, float64(r.IntN(20))
		s.ratio, s.floor = ratio, floor
		add(WithBudget(NewBudget(ratio, floor)), fmt.Sprintf("budget=%.2f/%v", ratio, floor))
	default:
		s.budgetDefault = true
		s.ratio, s.floor = defaultBudgetRatio, defaultBudgetPerSecond
		s.desc = append(s.desc, "budget=default")
	}
	var pt time.Duration // ProbeTimeout: the default, or drawn
	if r.IntN(3) == 0 {
		pt = time.Duration(1+r.IntN(500)) * time.Millisecond
		s.desc = append(s.desc, fmt.Sprintf("probe-timeout=%v", pt))
	}
	switch r.IntN(5) {
	case 0:
		add(WithoutRetryBreaker(), "breaker=off")
	case 1:
		s.failFast = true
		add(WithRetryBreaker(BreakerConfig{FailFast: true, ProbeTimeout: pt, OnStateChange: s.event}), "breaker=failfast")
	case 2:
		th := 1 + r.IntN(20)
		add(WithRetryBreaker(BreakerConfig{Threshold: th, ProbeTimeout: pt, OnStateChange: s.event}), fmt.Sprintf("breaker=threshold%d", th))
	default:
		add(WithRetryBreaker(BreakerConfig{ProbeTimeout: pt, OnStateChange: s.event}), "breaker=default")
	}
	if r.IntN(4) == 0 {
		s.hedge = 1 + r.IntN(2)
		d := time.Duration(1+r.IntN(50)) * ms
		add(WithHedging(HedgeConfig{Delay: d, MaxExtra: s.hedge}), fmt.Sprintf("hedge=%v×%d", d, s.hedge))
	}
	if r.IntN(4) == 0 {
		d := time.Duration(5+r.IntN(200)) * ms
		s.perAtt = d
		add(WithPerAttemptTimeout(d), fmt.Sprintf("per-attempt=%v", d))
	}
	if r.IntN(4) == 0 {
		s.faults.ra = strconv.Itoa(r.IntN(3))
		s.faults.raKind = r.IntN(9)
		s.desc = append(s.desc, fmt.Sprintf("hint=%ss(kind %d)", s.faults.ra, s.faults.raKind))
	}
	if r.IntN(3) == 0 {
		s.safeIf = true
		add(WithIdempotentIf(func(r *http.Request) bool { return r.Header.Get("X-Safe") == "1" }), "idempotent-if=X-Safe")
	}
	if r.IntN(4) == 0 {
		op := &simOp{attempts: 1 + r.IntN(5), safe: r.IntN(2) == 0}
		doc := fmt.Sprintf(`{"dependency": "sim", "match": "* /op", "retry": {"max_attempts_total": %d}, "semantic_safety": {"idempotent": %v}`,
			op.attempts, op.safe)
		if r.IntN(2) == 0 {
			op.elapsed = time.Duration(1+r.IntN(1000)) * ms
			doc += fmt.Sprintf(`, "time_budget": {"caller_deadline_ms": %d}`, op.elapsed.Milliseconds())
		}
		ps, err := LoadPolicies(strings.NewReader(`[{"dependency": "sim"}, ` + doc + `}]`))
		if err != nil {
			panic(err)
		}
		popts, err := ps["sim"].Options()
		if err != nil {
			panic(err)
		}
		s.op = op
		s.opts = append(s.opts, popts...)
		s.desc = append(s.desc, fmt.Sprintf("operation=%+v", *op))
	}
	if r.IntN(8) == 0 {
		s.noBuffer = true
		add(WithBodyBufferLimit(0), "body-buffer=0")
	}
	if r.IntN(6) == 0 {
		s.wire = true
		add(WithAttemptHeader("X-Attempt", "{attempt}"), "attempt-header")
		add(WithDeadlineHeader("X-Deadline-Ms"), "deadline-header")
	}
	if r.IntN(8) == 0 {
		s.final503 = true
		add(WithNonRetryableStatuses(503), "non-retryable=503")
	}
	if r.IntN(2) == 0 {
		s.hooked, s.hook = true, map[string][]string{}
		add(WithAttemptHook(s.attemptHook), "attempt-hook")
	}
	if r.IntN(6) == 0 {
		s.faults.shouldRetry = []string{"false", "true"}[r.IntN(2)]
		s.desc = append(s.desc, "x-should-retry="+s.faults.shouldRetry)
	}
	s.drawPacers(r)
	s.drawFaults(r)
	s.drawCallers(r)
	// Drawn from their own stream, so that the seeds drawn before
	// these cases existed draw what they did.
	s.drawShapes(rand.New(rand.NewPCG(seed, seed^0x5bd1e995)))
	s.drawOwners(rand.New(rand.NewPCG(seed, seed^0x27d4eb2f)))
	s.drawBodies(rand.New(rand.NewPCG(seed, seed^0x85ebca6b)))
	s.drawQuotaWindow(rand.New(rand.NewPCG(seed, seed^0xc2b2ae35)))
	s.drawVendorWords(rand.New(rand.NewPCG(seed, seed^0x9e3779b9)))
	s.drawWeakRecovery(rand.New(rand.NewPCG(seed, seed^0x165667b1)))
	s.drawCriticality(rand.New(rand.NewPCG(seed, seed^0x7feb352d)))
	return s
}

// drawQuotaWindow draws, on a stream of its own, a wild RateLimit-Policy
// for a server quota: a window a day long (the longest followed), one
// anywhere up to it, or one past it (not followed); a size of one, the
// truth or a billion. Whatever it says, the host's RateLimit word on the
// next answer sets the pace.
func (s *simulation) drawQuotaWindow(r *rand.Rand) {
	f := &s.faults
	if f.quota == 0 || r.IntN(3) != 0 {
		return
	}
	f.policyWindow = []int64{86400, 1 + r.Int64N(86400), 86401 + r.Int64N(1<<40)}[r.IntN(3)]
	f.policyQuota = []int64{1, int64(f.quota), 1_000_000_000}[r.IntN(3)]
	f.policyOnce = r.IntN(2) == 0
	s.desc = append(s.desc, fmt.Sprintf("wild-ratelimit-policy=q%d/w%d once=%v", f.policyQuota, f.policyWindow, f.policyOnce))
}

// drawVendorWords draws, on a stream of its own, the vendor that says
// whether to retry (Stripe-Should-Retry read as x-should-retry is), and
// keyed callers that share one key, as an application that re-submits a
// keyed request does: a key seen again owns only its own request, and
// every invariant holds for the host's other callers.
func (s *simulation) drawVendorWords(r *rand.Rand) {
	s.faults.shouldName = "X-Should-Retry"
	if s.faults.shouldRetry != "" && r.IntN(2) == 0 {
		s.faults.shouldName = "Stripe-Should-Retry"
		s.desc = append(s.desc, "should-retry-header=stripe")
	}
	if r.IntN(4) == 0 {
		s.sharedKey = true
		s.desc = append(s.desc, "shared-key")
	}
}

// drawBodies draws, on a stream of its own, a base that closes request
// bodies late (as net/http may, after RoundTrip returned), and callers
// whose GetBody rewinds one shared reader: a retry must not rewind a body
// that is still being read.
func (s *simulation) drawBodies(r *rand.Rand) {
	if r.IntN(4) == 0 {
		s.faults.lateClose = time.Duration(1+r.IntN(30)) * time.Millisecond
		s.desc = append(s.desc, fmt.Sprintf("late-close=%v", s.faults.lateClose))
	}
	for i := range s.callers {
		if c := &s.callers[i]; c.method != "GET" && !c.streamed && r.IntN(2) == 0 {
			c.sharedBody = true
			s.desc = append(s.desc, "shared-body="+c.id)
		}
	}
}

// drawOwners draws, on a stream of its own, the callers that are an
// SDK's own retries (amz-sdk-request: attempt=2), which own their
// schedule, and a Transport for which a 429 means the request was not
// processed (WithUnprocessedStatuses), so that a POST's 429 is retried.
func (s *simulation) drawOwners(r *rand.Rand) {
	if r.IntN(6) == 0 {
		s.unprocessed = true
		s.opts = append(s.opts, WithUnprocessedStatuses(http.StatusTooManyRequests))
		s.desc = append(s.desc, "unprocessed=429")
	}
	if s.faults.failOnce || r.IntN(4) != 0 {
		return
	}
	for i := range s.callers {
		if c := &s.callers[i]; c.method == "GET" && r.IntN(5) == 0 {
			c.sdk = true
			s.desc = append(s.desc, "sdk-retry="+c.id)
		}
	}
}

// drawShapes draws the outages' and overloads' shapes that admission
// must tell apart: a host that flaps (down and up in turn), one that
// serves a few attempts a tenth of a second and answers 503 to the rest
// (an overload, deep or not: never an outage), and one that comes back
// from its outage weak (drawWeakRecovery, on a stream of its own).
func (s *simulation) drawShapes(r *rand.Rand) {
	f := &s.faults
	if f.failOnce || f.quota > 0 {
		return
	}
	switch r.IntN(8) {
	case 0:
		s.drawFlapping(r)
	case 1:
		f.capacity = 1 + r.IntN(10)
		f.outageOnly = false // the refusals of an overload are failures too
		s.desc = append(s.desc, fmt.Sprintf("overload: serves %d per 100ms, 503 beyond", f.capacity))
	}
	// Callers that cancel their own requests, often while they wait for a
	// pacer; and a quota that now and then says something wild.
	if s.throttle || s.limited || s.quotaWait > 0 {
		n := 0
		for i := range s.callers {
			if r.IntN(4) == 0 {
				s.callers[i].cancelAt = time.Duration(1+r.IntN(2000)) * time.Millisecond
				n++
			}
		}
		s.desc = append(s.desc, fmt.Sprintf("canceled-by-callers=%d", n))
	}
	if f.quota > 0 && r.IntN(2) == 0 {
		f.statePolicy = true
		s.desc = append(s.desc, "ratelimit-policy")
	}
	if f.quota > 0 && r.IntN(3) == 0 {
		f.wild = 5 + r.IntN(20)
		s.desc = append(s.desc, fmt.Sprintf("wild-quota-word-every=%d", f.wild))
	}
}

// drawWeakRecovery draws a host that comes back from its first outage
// weak: from the outage's end on it serves a few attempts a tenth of a
// second and answers 503 to the rest; and a steady stream of 200 to 500
// GETs to one host from the outage's start to a second past its end,
// whose held retries the recovery releases into it.
func (s *simulation) drawWeakRecovery(r *rand.Rand) {
	f := &s.faults
	if len(f.outages) == 0 || f.capacity > 0 || f.failOnce || f.quota > 0 || r.IntN(8) != 0 {
		return
	}
	o := f.outages[0]
	f.capacity, f.weakFrom = 1+r.IntN(10), o[1]
	f.outageOnly = false // the refusals after it are failures too
	n, span := 200+r.IntN(300), o[1]-o[0]+time.Second
	for i := range n {
		s.callers = append(s.callers, simCaller{id: strconv.Itoa(len(s.callers)), host: "h0", method: "GET",
			at: o[0] + span*time.Duration(i)/time.Duration(n)})
	}
	s.desc = append(s.desc, fmt.Sprintf("weak-recovery: serves %d per 100ms after the outage, stream=%d", f.capacity, n))
}

// drawFlapping draws a host that flaps: down and up in turn, for as long
// each time; and, half the time, a steady stream of 200 to 500 GETs to
// one host through its first two spells, so that recovery after
// recovery releases what the down spell before held, beyond what the
// budget's floor pays for: lent.
func (s *simulation) drawFlapping(r *rand.Rand) {
	f := &s.faults
	flap := time.Duration(100+r.IntN(900)) * time.Millisecond
	start := time.Duration(r.IntN(2000)) * time.Millisecond
	spells := 2 + r.IntN(6)
	f.outages = nil
	for i := range spells {
		at := start + time.Duration(2*i)*flap
		f.outages = append(f.outages, [2]time.Duration{at, at + flap})
	}
	s.desc = append(s.desc, fmt.Sprintf("flapping=%v", flap))
	if r.IntN(2) != 0 {
		return
	}
	n, span := 200+r.IntN(300), time.Duration(2*min(spells, 2))*flap
	for i := range n {
		s.callers = append(s.callers, simCaller{id: strconv.Itoa(len(s.callers)), host: "h0", method: "GET",
			at: start + span*time.Duration(i)/time.Duration(n)})
	}
	s.desc = append(s.desc, fmt.Sprintf("stream-through-flaps=%d", n))
}

// drawPacers draws the pacers (internal/admission), each on in a fifth of runs,
// and a server quota for them to pace to.
func (s *simulation) drawPacers(r *rand.Rand) {
	if r.IntN(5) == 0 {
		ratio := 1 + 2*r.Float64()
		s.throttle = true
		s.opts = append(s.opts, WithThrottle(ratio))
		s.desc = append(s.desc, fmt.Sprintf("throttle=%.2f", ratio))
	}
	if r.IntN(5) == 0 {
		hi := 1 + r.IntN(20)
		lo := hi
		if r.IntN(2) == 0 {
			lo = 1 + r.IntN(hi)
		}
		s.limited, s.concurrency = true, true
		s.opts = append(s.opts, WithConcurrencyLimit(lo, hi))
		s.desc = append(s.desc, fmt.Sprintf("limit=%d-%d", lo, hi))
	}
	if r.IntN(5) == 0 {
		s.quotaWait = time.Duration(1+r.IntN(3000)) * time.Millisecond
		spread := r.IntN(2) == 0
		s.opts = append(s.opts, WithQuotaPacing(s.quotaWait, spread))
		s.desc = append(s.desc, fmt.Sprintf("quota-pacing=%v spread=%v", s.quotaWait, spread))
	}
	if r.IntN(8) == 0 {
		rate, burst := float64(1+r.IntN(200)), 1+r.IntN(20)
		s.limited, s.rated = true, true
		s.opts = append(s.opts, WithRateLimit(rate, burst))
		s.desc = append(s.desc, fmt.Sprintf("rate=%v/%d", rate, burst))
	}
	if r.IntN(5) == 0 {
		s.faults.quota = 1 + r.IntN(50)
		s.desc = append(s.desc, fmt.Sprintf("server-quota=%d/s", s.faults.quota))
	}
}

func (s *simulation) drawFaults(r *rand.Rand) {
	f := &s.faults
	f.spread = 4000 * time.Millisecond
	if r.IntN(5) == 0 {
		f.failOnce = true
		f.spread = time.Duration(1+r.IntN(200)) * time.Millisecond
		if r.IntN(3) == 0 {
			f.latency = time.Duration(r.IntN(5)) * time.Millisecond
		}
		s.desc = append(s.desc, fmt.Sprintf("fail-once within %v latency=%v", f.spread, f.latency))
		return
	}
	if r.IntN(6) == 0 {
		f.outages = [][2]time.Duration{{0, 24 * time.Hour}} // a host that never answers
	} else {
		for range r.IntN(3) {
			start := time.Duration(r.IntN(3000)) * time.Millisecond
			f.outages = append(f.outages, [2]time.Duration{start, start + time.Duration(r.IntN(3000))*time.Millisecond})
		}
	}
	if r.IntN(3) == 0 {
		f.latency = time.Duration(r.IntN(30)) * time.Millisecond
	}
	f.outageOnly = len(f.outages) > 0 && r.IntN(2) == 0
	if r.IntN(4) == 0 {
		f.late = true
		f.latency = max(f.latency, time.Duration(50+r.IntN(500))*time.Millisecond)
		if f.outageOnly && s.perAtt > 0 && f.latency >= s.perAtt {
			f.latency = s.perAtt / 2 // no timeouts: every failure is the outage's
		}
		s.desc = append(s.desc, "late-answers")
	}
	if r.IntN(6) == 0 {
		f.refuse = true
		s.desc = append(s.desc, "outages-refuse-connections")
	}
	if f.outageOnly && s.perAtt > 0 && f.latency >= s.perAtt {
		f.latency = s.perAtt / 2 // no timeouts: every failure is the outage's
	}
	s.desc = append(s.desc, fmt.Sprintf("outages=%v latency=%v", f.outages, f.latency))
}

func (s *simulation) drawCallers(r *rand.Rand) {
	n := 1 + r.IntN(20)
	if r.IntN(4) == 0 {
		n = 1 + r.IntN(200)
	}
	hosts := 1 + r.IntN(3)
	for i := range n {
		c := simCaller{id: strconv.Itoa(i), host: "h" + strconv.Itoa(r.IntN(hosts)), method: "GET",
			at: time.Duration(r.Int64N(int64(s.faults.spread)))}
		switch r.IntN(10) {
		case 0:
			c.method = "POST"
		case 1:
			c.method, c.keyed = "POST", true
		case 2:
			c.method, c.declared = "POST", true
		case 3:
			c.method, c.safeHeader = "POST", true
		case 4:
			c.method, c.unsafe = "PUT", true
		}
		if r.IntN(3) == 0 {
			c.deadline = time.Duration(50+r.IntN(3000)) * time.Millisecond
		}
		if i > 0 && r.IntN(3) == 0 {
			// A closed loop: after the previous caller ends, and a think time.
			c.follows, c.at = i, time.Duration(r.IntN(100))*time.Millisecond
		}
		c.op = s.op != nil && r.IntN(2) == 0
		c.streamed = c.method == "POST" && r.IntN(3) == 0
		switch r.IntN(10) {
		case 0:
			c.noRetry = true
		case 1:
			c.maxAttempts = 1 + r.IntN(3)
		}
		if s.faults.outageOnly && c.deadline > 0 && r.IntN(8) == 0 {
			// A retry that hangs until its deadline: often the probe.
			s.faults.hangs[c.id] = 2 + r.IntN(2)
		}
		if s.faults.failOnce {
			s.faults.failFirst[c.id] = 1
		} else if !s.faults.outageOnly {
			if r.IntN(3) == 0 {
				s.faults.failFirst[c.id] = 1 + r.IntN(4)
			}
			if c.deadline > 0 && r.IntN(10) == 0 {
				s.faults.hangs[c.id] = 1 + r.IntN(3)
			}
			if r.IntN(40) == 0 {
				s.faults.panics[c.id] = 1 + r.IntN(2)
			}
		}
		s.callers = append(s.callers, c)
	}
	s.desc = append(s.desc, fmt.Sprintf("callers=%d hosts=%d", n, hosts))
}

// simBase is the fault-scripted base, shared by the run's callers.
type simBase struct {
	s          *simulation
	start      time.Time
	mu         sync.Mutex
	sent       map[string][]simAttempt
	oks        map[string][]time.Duration // when a 200 was answered, per host
	downs      map[string][]time.Duration // when an outage's failure was answered (or refused), per host
	timeouts   map[string][]time.Duration // when an attempt's deadline, the caller's or its own, ended it at the host, per host
	used       map[string]map[int64]int   // the server quota's use, per host and window
	quotaWords int                        // answers that stated the quota
	policySaid map[string]bool            // hosts that were told the wild RateLimit-Policy (faults.policyOnce)
	open       atomic.Int64               // response bodies handed out, not closed
	closing    sync.WaitGroup             // request bodies closed late (faults.lateClose)
}

// readBody reads what a request body carries, its declared length (all
// of it if it declares none), and closes it: at once, or faults.lateClose later
// on a goroutine of its own after reading on to EOF, as net/http may
// after RoundTrip has returned.
func (b *simBase) readBody(r *http.Request) string {
	if r.Body == nil {
		return ""
	}
	var got []byte
	if r.ContentLength > 0 { // 0 with a body: unknown, as net/http reads it
		got = make([]byte, r.ContentLength)
		n, _ := io.ReadFull(r.Body, got)
		got = got[:n]
	} else {
		got, _ = io.ReadAll(r.Body)
	}
	if d := b.s.faults.lateClose; d > 0 {
		b.closing.Go(func() {
			time.Sleep(d)
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		})
		return string(got)
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return string(got)
}

type simAttempt struct {
	number   string // X-Attempt, when drawn
	left     string // X-Deadline-Ms, when drawn
	at       time.Duration
	ra       time.Duration // the Retry-After it was answered with, if any
	answered bool          // the server answered it (any status)
	status   int           // the status it was answered with, 0 if none
	body     string        // the body it carried, if it had one
	level    string        // the criticality header it carried, when drawn
}

// timedOut notes an attempt that its deadline, the caller's or its own,
// ended while the host took its time: the client's throttle counts it as
// turned away.
func (b *simBase) timedOut(r *http.Request) {
	if c := context.Cause(r.Context()); errors.Is(c, context.DeadlineExceeded) || errors.Is(c, ErrAttemptTimeout) {
		b.mu.Lock()
		b.timeouts[r.URL.Host] = append(b.timeouts[r.URL.Host], time.Since(b.start))
		b.mu.Unlock()
	}
}

func (b *simBase) RoundTrip(r *http.Request) (*http.Response, error) {
	body := b.readBody(r)
	id := r.Header.Get("X-Sim")
	now := time.Since(b.start)
	b.mu.Lock()
	n := len(b.sent[id]) + 1
	b.sent[id] = append(b.sent[id], simAttempt{at: now, number: r.Header.Get("X-Attempt"), left: r.Header.Get("X-Deadline-Ms"), body: body,
		level: r.Header.Get(simLevelHeader)})
	b.mu.Unlock()
	f := &b.s.faults
	if f.panics[id] == n {
		panic("sim: base panics")
	}
	if f.hangs[id] == n {
		<-r.Context().Done()
		b.timedOut(r)
		return nil, r.Context().Err()
	}
	if f.latency > 0 {
		t := time.NewTimer(f.latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			b.timedOut(r)
			return nil, r.Context().Err()
		}
	}
	answered := time.Since(b.start)
	judged := answered
	if f.late {
		judged = now // the outage's answer, late
	}
	down := n <= f.failFirst[id]
	outage := false
	for _, o := range f.outages {
		outage = outage || (judged >= o[0] && judged < o[1])
	}
	if outage {
		b.mu.Lock()
		b.downs[r.URL.Host] = append(b.downs[r.URL.Host], answered)
		b.mu.Unlock()
	}
	if outage && f.refuse {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	down = down || outage || (f.capacity > 0 && answered >= f.weakFrom && !b.serve(r.URL.Host, answered))
	b.mu.Lock()
	b.sent[id][n-1].answered = true
	b.mu.Unlock()
	h := http.Header{}
	if f.shouldRetry != "" {
		h.Set(f.shouldName, f.shouldRetry)
	}
	code := 200
	if down {
		code = 503
		if f.ra != "" {
			ra, _ := strconv.Atoi(f.ra)
			wait := time.Duration(ra) * time.Second
			now := time.Now()
			switch f.raKind {
			case 0:
				h.Set("Retry-After", f.ra)
			case 1:
				h.Set("Retry-After-Ms", strconv.Itoa(ra*1000))
			case 2:
				h.Set("RateLimit", `"default";r=0;t=`+f.ra)
			case 3:
				h.Set("X-RateLimit-Remaining", "0")
				h.Set("X-RateLimit-Reset", f.ra)
			case 4:
				h.Set("X-Amz-Retry-After", strconv.Itoa(ra*1000))
			case 5:
				h.Add("RateLimit", `"other";r=5;t=60`)
				h.Add("RateLimit", `"default";r=0;t=`+f.ra)
			case 6: // a Unix time, whole seconds: the wait is what is left of it
				reset := now.Add(wait).Unix()
				h.Set("RateLimit-Remaining", "0")
				h.Set("RateLimit-Reset", strconv.FormatInt(reset, 10))
				wait = max(time.Unix(reset, 0).Sub(now), 0)
			case 7:
				reset := now.Add(wait).UTC().Format(time.RFC3339)
				h.Set("Anthropic-Ratelimit-Requests-Remaining", "0")
				h.Set("Anthropic-Ratelimit-Requests-Reset", reset)
				at, _ := time.Parse(time.RFC3339, reset)
				wait = max(at.Sub(now), 0)
			default: // GitHub's secondary rate limit, unless 503 is final
				h.Set("Retry-After", f.ra)
				h.Set("X-RateLimit-Remaining", "4999")
				if !b.s.final503 {
					code = 403
				}
			}
			b.mu.Lock()
			b.sent[id][n-1].ra = wait
			b.mu.Unlock()
		}
	} else {
		b.mu.Lock()
		b.oks[r.URL.Host] = append(b.oks[r.URL.Host], answered)
		b.mu.Unlock()
	}
	if f.quota > 0 && code == 200 {
		code = b.spend(r.URL.Host, answered, h)
	}
	b.mu.Lock()
	b.sent[id][n-1].status = code
	b.mu.Unlock()
	b.open.Add(1)
	return withBody(reply(r, code, h), &simBody{open: &b.open}, 0), nil
}

// serve takes one of the host's capacity for an answer at t, if any is
// left in its 100ms.
func (b *simBase) serve(host string, t time.Duration) bool {
	w := -1 - int64(t/(100*time.Millisecond)) // apart from the quota's windows
	b.mu.Lock()
	defer b.mu.Unlock()
	used := b.usedOf(host)
	if used[w] >= b.s.faults.capacity {
		return false
	}
	used[w]++
	return true
}

// usedOf is host's count of what it served, per window; mu is held.
func (b *simBase) usedOf(host string) map[int64]int {
	if b.used == nil {
		b.used = map[string]map[int64]int{}
	}
	if b.used[host] == nil {
		b.used[host] = map[int64]int{}
	}
	return b.used[host]
}

// spend takes one of the host's quota for an answer at t, and says what
// is left: a 200, or a 429 once it is spent.
func (b *simBase) spend(host string, t time.Duration, h http.Header) int {
	w := int64(t / time.Second)
	b.mu.Lock()
	defer b.mu.Unlock()
	used := b.usedOf(host)
	code := 200
	if used[w] < b.s.faults.quota {
		used[w]++
	} else {
		code = http.StatusTooManyRequests
	}
	left := time.Duration(w+1)*time.Second - t
	h.Set("RateLimit", fmt.Sprintf(`"q";r=%d;t=%d`, b.s.faults.quota-used[w], int(math.Ceil(left.Seconds()))))
	if f := &b.s.faults; f.policyWindow > 0 && (!f.policyOnce || !b.policySaid[host]) {
		h.Set("RateLimit-Policy", fmt.Sprintf(`"q";q=%d;w=%d`, f.policyQuota, f.policyWindow))
		b.policySaid[host] = true
	} else if f.statePolicy && f.policyWindow == 0 {
		h.Set("RateLimit-Policy", fmt.Sprintf(`"q";q=%d;w=1`, f.quota))
	}
	if b.quotaWords++; b.s.faults.wild > 0 && b.quotaWords%b.s.faults.wild == 0 {
		h.Set("RateLimit", fmt.Sprintf(`"q";r=1000000000;t=%d`, int(math.Ceil(left.Seconds()))))
	}
	return code
}

type simBody struct {
	open   *atomic.Int64
	closed atomic.Bool
}

func (b *simBody) Read([]byte) (int, error) { return 0, io.EOF }
func (b *simBody) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.open.Add(-1)
	}
	return nil
}

// giveUps records the give-up log records: when, and why.
type giveUps struct {
	mu    sync.Mutex
	start time.Time
	list  []simGiveUp
}

type simGiveUp struct {
	at           time.Duration
	reason, host string
	id           string // the caller's, from the request's context
	level        string // the record's criticality, "" if it has none
}

func (g *giveUps) Enabled(context.Context, slog.Level) bool { return true }
func (g *giveUps) WithAttrs([]slog.Attr) slog.Handler       { return g }
func (g *giveUps) WithGroup(string) slog.Handler            { return g }
func (g *giveUps) Handle(ctx context.Context, r slog.Record) error {
	if r.Message != "retryhttp: giving up" {
		return nil
	}
	var reason, host, level string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "reason":
			reason = a.Value.String()
		case "host":
			host = a.Value.String()
		case "criticality":
			level = a.Value.String()
		}
		return true
	})
	id, _ := ctx.Value(simCallerKey{}).(string)
	g.mu.Lock()
	g.list = append(g.list, simGiveUp{r.Time.Sub(g.start), reason, host, id, level})
	g.mu.Unlock()
	return nil
}

type simOutcome struct {
	start    time.Duration // when RoundTrip was called
	resp     *http.Response
	err      error
	panicked any
	end      time.Duration
	header   int
	fb       simFellBack // what RoundTrip returned, if a WithFallback function was called: resp and err are the request's own
}

// run runs the simulation and returns what it broke.
func (s *simulation) run(t *testing.T) []string {
	start := time.Now()
	b := &simBase{s: s, start: start, sent: map[string][]simAttempt{},
		oks: map[string][]time.Duration{}, downs: map[string][]time.Duration{}, timeouts: map[string][]time.Duration{}, policySaid: map[string]bool{}}
	m := NewMetrics()
	gu := &giveUps{start: start}
	observe := option("observe", func(c *config) error {
		c.onRelease = func(host string, lent bool) {
			s.mu.Lock()
			s.releases = append(s.releases, simRelease{host, time.Since(start), lent})
			s.mu.Unlock()
		}
		c.onProbe = func(ctx context.Context, _ string) {
			id := ctx.Value(simCallerKey{}).(string)
			b.mu.Lock()
			prior := len(b.sent[id])
			b.mu.Unlock()
			s.mu.Lock()
			s.probes = append(s.probes, simProbe{id, time.Since(start), prior})
			s.mu.Unlock()
		}
		return nil
	})
	opts := append(append([]Option(nil), s.opts...), WithMetrics(m), WithLogger(slog.New(gu)), observe)
	tr := New(b, opts...)
	outcomes := make([]simOutcome, len(s.callers))
	done := make([]chan struct{}, len(s.callers))
	for i := range done {
		done[i] = make(chan struct{})
	}
	var wg sync.WaitGroup
	for i, c := range s.callers {
		wg.Go(func() {
			defer close(done[i])
			if c.follows > 0 {
				<-done[c.follows-1]
			}
			outcomes[i] = s.call(t, tr, c, start)
		})
	}
	wg.Wait()
	b.closing.Wait()
	synctest.Wait()
	return s.check(tr, b, m, gu, outcomes)
}

func (s *simulation) call(t *testing.T, tr *Transport, c simCaller, start time.Time) (o simOutcome) {
	time.Sleep(c.at)
	ctx := context.WithValue(context.Background(), simCallerKey{}, c.id)
	if c.deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.deadline)
		defer cancel()
	}
	if c.noRetry {
		ctx = NoRetry(ctx)
	}
	if c.declared {
		ctx = Idempotent(ctx)
	}
	if c.unsafe {
		ctx = NotIdempotent(ctx)
	}
	if c.maxAttempts > 0 {
		ctx = WithRequestOptions(ctx, WithMaxAttempts(c.maxAttempts))
	}
	if c.crit.set {
		ctx = WithRequestOptions(ctx, WithCriticality(c.crit.level))
	}
	if c.cancelAt > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer time.AfterFunc(c.cancelAt, cancel).Stop()
		defer cancel()
	}
	var body io.Reader
	if c.method == "POST" || c.method == "PUT" {
		body = strings.NewReader("payload")
		if c.streamed {
			body = struct{ io.Reader }{body} // http.NewRequest sets no GetBody for it
		}
	}
	path := "/p"
	if c.op {
		path = "/op"
	}
	req, err := http.NewRequestWithContext(ctx, c.method, "http://"+c.host+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.sharedBody {
		sharedGetBody(req, "payload")
	}
	req.Header.Set("X-Sim", c.id)
	if c.safeHeader {
		req.Header.Set("X-Safe", "1")
	}
	if c.keyed {
		key := "key-" + c.id
		if s.sharedKey {
			key = "key-" + c.host // one key for a host's keyed callers
		}
		req.Header.Set(HeaderIdempotencyKey, key)
	}
	if c.sdk {
		req.Header.Set("Amz-Sdk-Request", "attempt=2; max=3")
	}
	o.header = len(req.Header)
	o.start = time.Since(start)
	defer func() {
		o.panicked = recover()
		o.end = time.Since(start)
		if len(req.Header) != o.header || req.URL.Host != c.host {
			o.err = errors.New("the caller's request changed")
		}
	}()
	o.resp, o.err = tr.RoundTrip(req)
	s.setAside(c, &o)
	if o.resp != nil {
		o.resp.Body.Close()
	}
	return o
}

// declined reports whether every attempt but the last was answered with a
// status declared unprocessed (429, with WithUnprocessedStatuses) or
// never reached the server: a POST may then be sent again.
func (s *simulation) declined(sent []simAttempt) bool {
	if !s.unprocessed {
		return false
	}
	for _, a := range sent[:len(sent)-1] {
		if a.answered && a.status != http.StatusTooManyRequests {
			return false
		}
	}
	return true
}

// check tests the invariants of one run.
func (s *simulation) check(tr *Transport, b *simBase, m *Metrics, gu *giveUps, outcomes []simOutcome) (errs []string) {
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	for i, c := range s.callers {
		o, sent := outcomes[i], b.sent[c.id]
		limit := s.maxAtt
		declared := c.declared || (c.safeHeader && s.safeIf)
		if c.op { // the operation's declaration replaces the Transport's
			limit, declared = s.op.attempts, c.declared || s.op.safe
		}
		if c.maxAttempts > 0 {
			limit = c.maxAttempts
		}
		if c.noRetry {
			limit = 1
		}
		if limit > 1 {
			limit += s.hedge
		}
		switch {
		case o.panicked != nil && s.faults.panics[c.id] == 0:
			fail("caller %s: unscripted panic %v", c.id, o.panicked)
		case o.panicked == nil && (o.resp == nil) == (o.err == nil):
			fail("caller %s: RoundTrip = %v, %v: want exactly one", c.id, o.resp, o.err)
		case o.err != nil && o.err.Error() == "the caller's request changed":
			fail("caller %s: the caller's request changed", c.id)
		}
		if len(sent) > limit {
			fail("caller %s: %d attempts, at most %d allowed", c.id, len(sent), limit)
		}
		if c.streamed && s.noBuffer && len(sent) > 1 {
			fail("caller %s: a body without GetBody, with nothing buffered, was sent %d times", c.id, len(sent))
		}
		for i, a := range sent {
			if c.method != "GET" && a.body != "payload" {
				fail("caller %s: attempt %d carried %q, want the whole body", c.id, i+1, a.body)
			}
		}
		// A 503 that is not retryable ends the call, unless the server
		// says x-should-retry: true; only errors (a hang, a timeout, a
		// panic) are retried then, and hedges are extra copies.
		// (A refused connection never reached the server: it is retried
		// whatever the method and status rules.)
		reached := 0
		for _, a := range sent {
			if a.answered || !s.faults.refuse {
				reached++
			}
		}
		if s.final503 && s.faults.shouldRetry != "true" && s.perAtt == 0 && s.faults.hangs[c.id] == 0 && s.faults.quota == 0 &&
			s.faults.panics[c.id] == 0 && reached > 1+s.hedge {
			fail("caller %s: %d attempts, but 503 is not retryable", c.id, reached)
		}
		if c.method == "POST" && !c.keyed && !declared && reached > 1 && !s.declined(sent) {
			fail("caller %s: an unkeyed POST reached the server %d times", c.id, reached)
		}
		if c.sdk && reached > 2+s.hedge {
			fail("caller %s: an SDK's own try reached the server %d times; one retry at most saves a transient failure", c.id, reached)
		}
		if c.unsafe && reached > 1 && !s.declined(sent) {
			fail("caller %s: a PUT declared NotIdempotent reached the server %d times", c.id, reached)
		}
		if s.wire && s.hedge == 0 {
			for j, a := range sent {
				if a.number != strconv.Itoa(j+1) {
					fail("caller %s: attempt %d carried X-Attempt %q", c.id, j+1, a.number)
				}
				bound, has := s.perAtt, s.perAtt > 0
				if c.deadline > 0 {
					if d := o.start + c.deadline - a.at; !has || d < bound {
						bound, has = max(d, 0), true
					}
				}
				if got, err := strconv.ParseInt(a.left, 10, 64); has != (a.left != "") || (has && (err != nil || got < 0 || time.Duration(got)*time.Millisecond > bound+time.Millisecond)) {
					fail("caller %s: attempt %d carried X-Deadline-Ms %q, want at most %v", c.id, j+1, a.left, bound)
				}
			}
		}
		at := o.start
		for j, a := range sent {
			if c.op && s.op.elapsed > 0 && s.hedge == 0 && a.at > sent[0].at+s.op.elapsed {
				fail("caller %s: attempt %d sent at %v, past the operation's caller_deadline_ms (%v after %v)", c.id, j+1, a.at, s.op.elapsed, sent[0].at)
			}
			if c.deadline > 0 && a.at > at+c.deadline {
				fail("caller %s: attempt %d sent at %v, after the deadline at %v", c.id, j+1, a.at, at+c.deadline)
			}
			// (A response that came as the per-attempt timeout struck was
			// not seen: nor was its Retry-After.)
			seen := s.perAtt == 0 || s.perAtt > s.faults.latency
			if j > 0 && sent[j-1].ra > 0 && a.at < sent[j-1].at+sent[j-1].ra && s.hedge == 0 && seen {
				fail("caller %s: attempt %d at %v, before the Retry-After of attempt %d (%v at %v)", c.id, j+1, a.at, j, sent[j-1].ra, sent[j-1].at)
			}
		}
		if c.deadline > 0 && o.end > at+c.deadline {
			fail("caller %s: ended at %v, after its deadline at %v", c.id, o.end, at+c.deadline)
		}
		if c.cancelAt > 0 && o.panicked == nil {
			var re *Error
			switch {
			case o.end > o.start+c.cancelAt:
				fail("caller %s: canceled at %v, ended at %v", c.id, o.start+c.cancelAt, o.end)
			case errors.As(o.err, &re) && re.Attempts == 0 && errors.Is(o.err, context.Canceled) && re.Reason != "":
				fail("caller %s: canceled by its caller before its first attempt, but given up as %q", c.id, re.Reason)
			}
		}
		s.checkBounds(tr, c, o, sent, limit, fail)
		if s.mustSucceed(c, limit, declared) && (o.resp == nil || o.resp.StatusCode != 200) {
			fail("caller %s: its retry would have succeeded, but it ended with %v, %v after %d attempts", c.id, simStatus(o.resp), o.err, len(sent))
		}
	}
	if n := b.open.Load(); n != 0 {
		fail("%d response bodies left open", n)
	}
	attempts := sumCounter(nil, m, "retryhttp_attempts_total")
	requests := sumCounter(nil, m, "retryhttp_requests_total")
	retries := sumCounter(nil, m, "retryhttp_retries_total")
	hedges := sumCounter(nil, m, "retryhttp_hedges_total")
	panics, refused := 0, 0
	for _, o := range outcomes {
		var re *Error
		switch {
		case o.panicked != nil:
			panics++
		case errors.As(o.err, &re) && re.Attempts == 0:
			refused++ // FailFast: a request that sent nothing
		}
	}
	if attempts != requests-float64(refused)+retries+hedges && panics == 0 {
		fail("attempts_total %v != requests %v - refused %d + retries %v + hedges %v", attempts, requests, refused, retries, hedges)
	}
	s.checkRecovery(b, gu, fail)
	s.checkReleases(b, fail)
	s.checkProbes(b, outcomes, fail)
	s.checkPacers(tr, fail)
	s.checkQuotaEvidence(b, gu, fail)
	s.checkEvents(m, fail)
	s.checkAlwaysFailing(tr, attempts, requests, fail)
	s.checkHook(attempts, retries, fail)
	s.checkCriticality(b, m, gu, outcomes, fail)
	return errs
}

// checkReleases checks what recoveries released: a held retry is never
// released while the host refuses, once the client has seen it refuse
// (in an outage window, a failure answered before the release, with no
// answer between them); and, per host, the retries lent beyond the
// budget's share are at most ratio × its first attempts plus one loan
// (twice the callers to the host: a loan is twice what was held), the
// bound lend (internal/admission/budget.go) promises for the lent retries
// the host did not answer, plus one a caller for those it answered (each
// owes nothing, and ends its request): a host that flaps is lent at every
// recovery whose retries it answers.
func (s *simulation) checkReleases(b *simBase, fail func(string, ...any)) {
	lent := map[string]int{}
	for _, rel := range s.releases {
		from, in := time.Duration(0), false
		for _, o := range s.faults.outages {
			if rel.at >= o[0] && rel.at < o[1] {
				from, in = o[0], true
			}
		}
		seen := time.Duration(-1) // the latest failure of this outage seen before the release
		for _, d := range b.downs[rel.host] {
			if in && d >= from && d < rel.at {
				seen = max(seen, d)
			}
		}
		answered := false
		for _, ok := range b.oks[rel.host] {
			answered = answered || (ok >= seen && ok <= rel.at)
		}
		if seen >= 0 && !answered {
			fail("a held retry to %s was released at %v, in an outage it was seen in at %v, with no answer since", rel.host, rel.at, seen)
		}
		if rel.lent {
			lent[rel.host]++
		}
	}
	for host, n := range lent {
		if s.noBudget {
			fail("%d retries to %s lent with no budget", n, host)
			continue
		}
		firsts, callers := 0, 0
		for _, c := range s.callers {
			if c.host == host {
				callers++
				if len(b.sent[c.id]) > 0 {
					firsts++
				}
			}
		}
		if limit := s.ratio*float64(firsts) + float64(3*callers) + 1; float64(n) > limit {
			fail("%d retries to %s lent beyond the share, for %d first attempts and %d callers: want at most %v", n, host, firsts, callers, limit)
		}
	}
}

// checkProbes checks that no held retry whose caller holds a response
// (its request's last attempt was answered) goes as the probe with no
// more time left before its deadline than the host takes to answer
// (every answer takes the script's latency): its caller would get the
// deadline's error instead of the response it holds.
func (s *simulation) checkProbes(b *simBase, outcomes []simOutcome, fail func(string, ...any)) {
	for _, p := range s.probes {
		i, _ := strconv.Atoi(p.id)
		c, sent := s.callers[i], b.sent[p.id]
		if c.deadline == 0 || s.faults.latency == 0 || p.prior == 0 || sent[p.prior-1].status == 0 {
			continue
		}
		if left := outcomes[i].start + c.deadline - p.at; left <= s.faults.latency {
			fail("caller %s: a held retry went as the probe at %v, %v before its deadline, within the host's answer time %v; its caller held a %d",
				c.id, p.at, left, s.faults.latency, sent[p.prior-1].status)
		}
	}
}

// checkPacers checks that, once every request has ended, the pacers hold
// nothing: no slot of the limit in use or awaited, no quota attempt in
// flight.
func (s *simulation) checkPacers(tr *Transport, fail func(string, ...any)) {
	if tr.c.gate == nil {
		return
	}
	for _, c := range s.callers {
		v := tr.c.gate.View(c.host)
		if v.InFlight != 0 || v.Waiting != 0 {
			fail("host %s: %d slots in use, %d waiting, after every request ended", c.host, v.InFlight, v.Waiting)
		}
		if v.QuotaInFlight != 0 {
			fail("host %s: quota pacing counts %d attempts in flight after every request ended", c.host, v.QuotaInFlight)
		}
	}
}

// checkQuotaEvidence checks, under a wild RateLimit-Policy, that quota
// pacing refuses nothing without evidence: every word the host says of
// the quota resets within a second, so a refusal stands on a word of the
// last second (an attempt sent within it and the latency), or on this
// client's own attempts in a window it rolled over, unanswered yet.
// (Without a hint: the hints state quotas of their own.)
func (s *simulation) checkQuotaEvidence(b *simBase, gu *giveUps, fail func(string, ...any)) {
	if s.quotaWait == 0 || s.faults.policyWindow == 0 || s.faults.ra != "" {
		return
	}
	for _, g := range gu.list {
		if g.reason != string(GiveUpQuota) {
			continue
		}
		evidence := false
		for _, c := range s.callers {
			for _, a := range b.sent[c.id] {
				recent := g.at-a.at <= time.Second+s.faults.latency+10*time.Millisecond
				evidence = evidence || (c.host == g.host && a.at <= g.at && (recent || !a.answered))
			}
		}
		if !evidence {
			fail("a request to %s refused (quota) at %v, with no attempt to it answered within the last second or in flight", g.host, g.at)
		}
	}
}

// checkBounds checks that every wait is bounded: a caller with no deadline
// ends within twice its schedule (its backoff's upper bounds: a hold, then
// the retries after it; WithMaxElapsed with a huge backoff), the servers'
// waits and the attempts' latency,
// whatever another request's probe does; and that a caller whose last
// attempt was answered, and that gave up, returns that answer, not an
// error.
func (s *simulation) checkBounds(tr *Transport, c simCaller, o simOutcome, sent []simAttempt, limit int, fail func(string, ...any)) {
	if o.panicked != nil || s.faults.panics[c.id] != 0 || s.faults.hangs[c.id] != 0 {
		return
	}
	if c.deadline == 0 && !s.limited {
		// (A concurrency limit's or a rate's wait is bounded only by
		// the deadline.) A hold lasts at most the schedule from the first failure; the
		// retries after it wait their own backoffs, within it again.
		bound := 2 * scheduleLength(tr.c.backoff, max(limit, s.maxAtt))
		if s.huge {
			bound = 2 * time.Second
		}
		ra := time.Duration(0)
		if s.faults.ra != "" {
			n, _ := strconv.Atoi(s.faults.ra)
			ra = time.Duration(n) * time.Second
		}
		if s.faults.quota > 0 {
			ra = max(ra, time.Second) // a 429's RateLimit: up to the window's end
		}
		bound += time.Duration(limit+1)*(ra+s.faults.latency+s.perAtt+50*time.Millisecond+admission.MaxQuotaTurns*s.quotaWait) + 10*time.Millisecond
		if took := o.end - o.start; took > bound {
			fail("caller %s: took %v, past its bound %v (schedule, servers' waits, latency): %v", c.id, took, bound, sent)
		}
	}
	if len(sent) > 0 && sent[len(sent)-1].answered && o.err != nil && o.resp == nil && s.hedge == 0 && s.perAtt == 0 &&
		!errors.Is(o.err, context.DeadlineExceeded) && !errors.Is(o.err, context.Canceled) {
		fail("caller %s: its last attempt was answered, but it ended with an error: %v", c.id, o.err)
	}
}

// mustSucceed reports whether a caller must end with a 200: in a
// fail-once script, where no retry fails, nothing but the caller's own
// limits (its deadline, its attempts, its method, the budget, FailFast's
// refusals, the server's x-should-retry: false) may cost it its success.
func (s *simulation) mustSucceed(c simCaller, limit int, declared bool) bool {
	f := &s.faults
	retryable := (c.method == "GET" || c.keyed || declared) && !c.unsafe
	// A keyed caller whose key another sends too is, as far as retryhttp
	// can tell, a layer above's retry: its schedule is the layer's.
	retryable = retryable && !(c.keyed && s.sharedKey)
	return f.failOnce && limit-s.hedge >= 2 && retryable && !(c.streamed && s.noBuffer) &&
		c.deadline == 0 && !(c.op && s.op.elapsed > 0) && !s.huge &&
		s.noBudget && !s.failFast && !s.final503 && f.shouldRetry != "false" &&
		!s.throttle && !s.limited && s.quotaWait == 0 && f.quota == 0 &&
		(s.perAtt == 0 || f.latency < s.perAtt)
}

func simStatus(r *http.Response) any {
	if r == nil {
		return "no response"
	}
	return r.StatusCode
}

// checkAlwaysFailing bounds what a host that never answers gets: the
// first attempts and a tenth more (the budget's ratio), or the floor of
// 3 s (30 retries), lent until the host counts as failing. Probes are
// retries: they are charged too.
func (s *simulation) checkAlwaysFailing(tr *Transport, attempts, requests float64, fail func(string, ...any)) {
	if !s.faults.outageOnly || !s.budgetDefault || s.hedge > 0 || s.faults.refuse || len(s.faults.outages) != 1 ||
		s.faults.outages[0][0] != 0 || s.faults.outages[0][1] < time.Hour {
		return
	}
	if limit := requests + max(0.1*requests, 30) + 1; attempts > limit {
		fail("always failing: %v attempts for %v requests, want at most %v", attempts, requests, limit)
	}
}

// checkRecovery checks the one that matters most: once the host has been
// seen answering again after the last outage, nothing is given up on by
// the breaker, and by the budget only once it is spent, as the run's own
// count of the host's attempts shows. (It holds for scripts whose
// failures are outages only, where a failure after that is not the
// host's.)
// budgetSpent reports whether the host's budget may have been spent at
// at, by the run's own count of its attempts: the retries (hedges and
// probes included) of the last 10 s fill ratio × the first attempts of
// the last 9 s (the budget's one-second buckets count between 9 and 10 s
// back), and those of the floor's span fill the floor. Retries sent soon
// after at count too: they were charged when decided, before their wait.
func (s *simulation) budgetSpent(b *simBase, host string, at time.Duration) bool {
	span := 3 * time.Second
	if s.floor > 0 && s.floor*3 < 1 {
		span = time.Duration(min(math.Ceil(1/s.floor), 10)) * time.Second
	}
	// A retry is charged when it is decided and sent when its wait ends:
	// those sent up to a wait after at were charged by then.
	wait := 2 * time.Second
	if s.faults.ra != "" {
		n, _ := strconv.Atoi(s.faults.ra)
		wait += time.Duration(n) * time.Second
	}
	var firsts, retries, recent int
	for _, c := range s.callers {
		if c.host != host {
			continue
		}
		for j, a := range b.sent[c.id] {
			if c.sdk {
				j++ // an SDK's own retry: charged as a retry if the share has room
			}
			age := at - a.at
			switch {
			case j > 0 && age < 0 && -age <= wait:
				retries++
				recent++
			case age < 0:
			case j == 0 && age < 9*time.Second:
				firsts++
			case j > 0 && age < 10*time.Second:
				retries++
				if age < span {
					recent++
				}
			}
		}
	}
	return float64(retries+1) > s.ratio*float64(firsts) && float64(recent+1) > s.floor*span.Seconds()
}

// lastTimeout is when the latest attempt to host that its deadline ended
// did, before at; 0 if none.
func (b *simBase) lastTimeout(host string, at time.Duration) time.Duration {
	var last time.Duration
	for _, d := range b.timeouts[host] {
		if d < at {
			last = max(last, d)
		}
	}
	return last
}

func (s *simulation) checkRecovery(b *simBase, gu *giveUps, fail func(string, ...any)) {
	if !s.faults.outageOnly || s.faults.quota > 0 { // a spent quota's 429s are failures too
		return
	}
	var end time.Duration
	for _, o := range s.faults.outages {
		end = max(end, o[1])
	}
	if s.faults.late {
		// An outage's answers come late: an answer within latency of its
		// end is to an attempt sent before it, and says nothing of after.
		end += s.faults.latency
	}
	for _, g := range gu.list {
		up := time.Duration(-1)
		for _, ok := range b.oks[g.host] {
			if ok >= end && (up < 0 || ok < up) {
				up = ok
			}
		}
		switch g.reason {
		case string(GiveUpBudget):
			if up >= 0 && g.at > up && !s.budgetSpent(b, g.host, g.at) {
				fail("a request to %s gave up (budget) at %v, after the host answered again at %v, with its budget not spent", g.host, g.at, up)
			}
		case string(GiveUpBreaker), string(GiveUpCircuitOpen):
			if up >= 0 && g.at > up {
				fail("a request to %s gave up (%s) at %v, after the host answered again at %v", g.host, g.reason, g.at, up)
			}
		case string(GiveUpThrottled):
			// The throttle forgets its refusals on the first answer it
			// sees after a spell of none; after a short outage, whose
			// refusals were few, or late ones, they fade within its long
			// view (2 s); and so do the timeouts of a slow host's
			// attempts, which it counts as turned away.
			if up >= 0 && g.at > max(up, b.lastTimeout(g.host, g.at))+s.faults.latency+admission.ThrottleLong {
				fail("a request to %s was throttled at %v, after the host answered again at %v", g.host, g.at, up)
			}
		}
	}
}
