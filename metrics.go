// This file holds the Prometheus metrics: the Metrics collector that users
// register, and the per-Transport view of it that report.go, attempt.go
// and the others record into without allocating.

package retryhttp

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds the retryhttp metric families. It is a
// prometheus.Collector: register it on any prometheus.Registerer, then pass
// it to one or more Transports with WithMetrics; WithName tells their
// series apart. The families are:
//
//	retryhttp_requests_total{name,method,criticality}  logical requests (RoundTrip calls)
//	retryhttp_attempts_total{name,outcome}    attempts sent, by outcome: status code or error class
//	retryhttp_retries_total{name,outcome,criticality}  retries made, by the outcome of the attempt that failed
//	retryhttp_giveups_total{name,reason,criticality}   retryable failures not retried, by why
//	retryhttp_fallbacks_total{name,reason}    responses that WithFallback's function made, by the give-up reason
//	retryhttp_backoff_seconds{name}           waits before retries
//	retryhttp_layered_retries_total{name,source}  requests that arrived as retries of a layer above
//	retryhttp_hedges_total{name}              hedged copies sent (WithHedging)
//	retryhttp_hedges_won_total{name}          hedged copies whose answer was returned
//	retryhttp_breaker_open_hosts{name}        hosts whose retry breaker is open now
//	retryhttp_breaker_transitions_total{name,state}  breaker transitions, by the state entered
//	retryhttp_throttle_refusal_ratio{name}    WithThrottle: the share of first attempts it refuses now
//	retryhttp_quota_remaining{name}           WithQuotaPacing: the quota predicted to be left
//	retryhttp_concurrency_limit{name}         WithConcurrencyLimit: the limit now
//
// The last three are of the host that changed them last. What the pacers
// refuse is in retryhttp_giveups_total, reasons throttled, quota and
// limit.
//
// Criticality is "critical", "default" or "sheddable" (WithCriticality).
// Error classes are timeout, canceled, refused (a connection refused, or an
// HTTP/2 stream refused or beyond a GOAWAY), reset, eof and error; a
// method outside the standard ones is counted as "other". No label ever
// holds a URL or a header value. Metrics is safe for concurrent use.
type Metrics struct {
	requests *prometheus.CounterVec
	attempts *prometheus.CounterVec
	retries  *prometheus.CounterVec
	giveups  *prometheus.CounterVec
	fallback *prometheus.CounterVec
	backoff  *prometheus.HistogramVec
	layered  *prometheus.CounterVec
	hedges   *prometheus.CounterVec
	hedgeWon *prometheus.CounterVec
	openHost *prometheus.GaugeVec
	breakerT *prometheus.CounterVec
	pacer    [numGauges]*prometheus.GaugeVec

	mu     sync.Mutex
	byName map[string]*transportMetrics
}

// NewMetrics returns a Metrics with no series yet. Nothing is registered:
// the caller registers it, e.g. prometheus.MustRegister(m).
func NewMetrics() *Metrics {
	return &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryhttp_requests_total",
			Help: "Logical requests sent through a retryhttp Transport (RoundTrip calls).",
		}, []string{"name", "method", "criticality"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryhttp_attempts_total",
			Help: "Attempts sent, first attempts and retries, by status code or error class.",
		}, []string{"name", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryhttp_retries_total",
			Help: "Retries scheduled, by the outcome (status code or error class) of the attempt that failed.",
		}, []string{"name", "outcome", "criticality"}),
		giveups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryhttp_giveups_total",
			Help: "Retryable failures that were not retried, by why.",
		}, []string{"name", "reason", "criticality"}),
		fallback: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryhttp_fallbacks_total",
			Help: "Responses that WithFallback's function made for requests that gave up, by the give-up reason.",
		}, []string{"name", "reason"}),
		backoff: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "retryhttp_backoff_seconds",
			Help:    "Waits before retries, in seconds.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"name"}),
		layered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryhttp_layered_retries_total",
			Help: "Requests that arrived as retries of a layer above (an SDK, gRPC, another retryhttp), by source.",
		}, []string{"name", "source"}),
		hedges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryhttp_hedges_total",
			Help: "Hedged copies of first attempts sent (WithHedging).",
		}, []string{"name"}),
		hedgeWon: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryhttp_hedges_won_total",
			Help: "Hedged copies whose answer was the one returned.",
		}, []string{"name"}),
		openHost: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "retryhttp_breaker_open_hosts",
			Help: "Hosts whose retry breaker is open now.",
		}, []string{"name"}),
		breakerT: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryhttp_breaker_transitions_total",
			Help: "Retry breaker transitions, by the state entered (open, closed).",
		}, []string{"name", "state"}),
		pacer: [numGauges]*prometheus.GaugeVec{
			gaugeThrottle: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Name: "retryhttp_throttle_refusal_ratio",
				Help: "The share of first attempts that WithThrottle refuses now, of the host that changed it last.",
			}, []string{"name"}),
			gaugeQuota: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Name: "retryhttp_quota_remaining",
				Help: "The quota predicted to be left (WithQuotaPacing), of the host that changed it last.",
			}, []string{"name"}),
			gaugeLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Name: "retryhttp_concurrency_limit",
				Help: "The concurrency limit now (WithConcurrencyLimit), of the host that changed it last.",
			}, []string{"name"}),
		},
		byName: make(map[string]*transportMetrics),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.attempts.Describe(ch)
	m.retries.Describe(ch)
	m.giveups.Describe(ch)
	m.fallback.Describe(ch)
	m.backoff.Describe(ch)
	m.layered.Describe(ch)
	m.hedges.Describe(ch)
	m.hedgeWon.Describe(ch)
	m.openHost.Describe(ch)
	m.breakerT.Describe(ch)
	for _, g := range m.pacer {
		g.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.attempts.Collect(ch)
	m.retries.Collect(ch)
	m.giveups.Collect(ch)
	m.fallback.Collect(ch)
	m.backoff.Collect(ch)
	m.layered.Collect(ch)
	m.hedges.Collect(ch)
	m.hedgeWon.Collect(ch)
	m.openHost.Collect(ch)
	m.breakerT.Collect(ch)
	for _, g := range m.pacer {
		g.Collect(ch)
	}
}

// WithMetrics makes the Transport record into m. The default records
// nothing. Several Transports may share one Metrics; give them names with
// WithName.
func WithMetrics(m *Metrics) Option {
	return option("WithMetrics", func(c *config) error {
		c.metricsSrc = m
		return nil
	})
}

const defaultName = "default"

// forTransport returns the series of the Transport called name, made once
// and shared by every Transport of that name.
func (m *Metrics) forTransport(name string) *transportMetrics {
	if name == "" {
		name = defaultName
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if tm, ok := m.byName[name]; ok {
		return tm
	}
	tm := &transportMetrics{
		m:        m,
		name:     name,
		backoff:  m.backoff.WithLabelValues(name),
		attempts: labelCache{vec: m.attempts, name: name},
	}
	tm.level(0) // the default's series are shown from the start
	tm.hedges = m.hedges.WithLabelValues(name)
	tm.hedgesWon = m.hedgeWon.WithLabelValues(name)
	tm.openHosts = m.openHost.WithLabelValues(name)
	tm.opened = m.breakerT.WithLabelValues(name, breakerOpen)
	tm.closed = m.breakerT.WithLabelValues(name, breakerClosed)
	for i, source := range layerLabels {
		tm.layered[i] = m.layered.WithLabelValues(name, source)
	}
	for i, reason := range giveUpReasons {
		tm.fallbacks[i] = m.fallback.WithLabelValues(name, string(reason))
	}
	for i, g := range m.pacer {
		tm.pacer.g[i] = &stateGauge{g.WithLabelValues(name)}
	}
	m.byName[name] = tm
	return tm
}

var methodLabels = [...]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT", "other"}

func methodIndex(method string) int {
	for i, m := range methodLabels[:len(methodLabels)-1] {
		if m == method {
			return i
		}
	}
	return len(methodLabels) - 1
}

// transportMetrics is one name's series, resolved ahead so that recording
// is an atomic add: no label hashing, no allocation once a series exists.
// All its methods do nothing on a nil receiver, so that a Transport without
// metrics pays one comparison.
type transportMetrics struct {
	m         *Metrics
	name      string
	levels    [len(criticalityLevels)]atomic.Pointer[levelSeries] // made at the first request of each criticality
	fallbacks [len(giveUpReasons)]prometheus.Counter
	layered   [numLayers]prometheus.Counter
	hedges    prometheus.Counter
	hedgesWon prometheus.Counter
	openHosts prometheus.Gauge
	opened    prometheus.Counter
	closed    prometheus.Counter
	backoff   prometheus.Observer
	attempts  labelCache
	pacer     gauges
}

// levelSeries are the series of one name and criticality.
type levelSeries struct {
	requests [len(methodLabels)]prometheus.Counter
	giveups  [len(giveUpReasons)]prometheus.Counter
	retries  labelCache
}

// level is the series of criticality l, made at its first use.
func (tm *transportMetrics) level(l int8) *levelSeries {
	if ls := tm.levels[l+1].Load(); ls != nil {
		return ls
	}
	text := levelText(l)
	ls := &levelSeries{retries: labelCache{vec: tm.m.retries, name: tm.name, level: text}}
	for i, method := range methodLabels {
		ls.requests[i] = tm.m.requests.WithLabelValues(tm.name, method, text)
	}
	for i, reason := range giveUpReasons {
		ls.giveups[i] = tm.m.giveups.WithLabelValues(tm.name, string(reason), text)
	}
	tm.levels[l+1].CompareAndSwap(nil, ls)
	return tm.levels[l+1].Load()
}

// gaugeKind names a pacer's gauge.
type gaugeKind int

const (
	gaugeThrottle gaugeKind = iota
	gaugeQuota
	gaugeLimit
	numGauges
)

// gauges are a Transport's pacer gauges.
type gauges struct{ g [numGauges]*stateGauge }

// stateGauge is one; a nil one records nothing.
type stateGauge struct{ g prometheus.Gauge }

func (g *stateGauge) Set(v float64) {
	if g != nil {
		g.g.Set(v)
	}
}

// gauges returns the pacer gauges, nil without metrics.
func (tm *transportMetrics) gauges() *gauges {
	if tm == nil {
		return nil
	}
	return &tm.pacer
}

func (tm *transportMetrics) request(method string, level int8) {
	if tm != nil {
		tm.level(level).requests[methodIndex(method)].Inc()
	}
}

func (tm *transportMetrics) attempt(o outcomeID) {
	if tm != nil {
		tm.attempts.get(o).Inc()
	}
}

func (tm *transportMetrics) retry(o outcomeID, level int8, delay time.Duration) {
	if tm != nil {
		tm.level(level).retries.get(o).Inc()
		tm.backoff.Observe(delay.Seconds())
	}
}

func (tm *transportMetrics) hedge() {
	if tm != nil {
		tm.hedges.Inc()
	}
}

func (tm *transportMetrics) hedgeWon() {
	if tm != nil {
		tm.hedgesWon.Inc()
	}
}

func (tm *transportMetrics) breakerState(open bool) {
	if tm == nil {
		return
	}
	if open {
		tm.opened.Inc()
		tm.openHosts.Inc()
		return
	}
	tm.closed.Inc()
	tm.openHosts.Dec()
}

func (tm *transportMetrics) layeredRetry(source int) {
	if tm != nil {
		tm.layered[source].Inc()
	}
}

func (tm *transportMetrics) giveUp(reason GiveUpReason, level int8) {
	if tm == nil {
		return
	}
	if i := reasonIndex(reason); i >= 0 {
		tm.level(level).giveups[i].Inc()
	}
}

func (tm *transportMetrics) fallback(reason GiveUpReason) {
	if tm == nil {
		return
	}
	if i := reasonIndex(reason); i >= 0 {
		tm.fallbacks[i].Inc()
	}
}

// reasonIndex is reason's place in giveUpReasons, -1 if it has none.
func reasonIndex(reason GiveUpReason) int {
	for i, r := range giveUpReasons {
		if r == reason {
			return i
		}
	}
	return -1
}

// labelCache resolves a counter per outcome once and keeps it in a slot
// indexed by the outcome, so that later lookups are one atomic load.
type labelCache struct {
	vec   *prometheus.CounterVec
	name  string
	level string // the criticality label's value, if the family has one
	slots [numOutcomes]atomic.Pointer[prometheus.Counter]
}

func (lc *labelCache) get(o outcomeID) prometheus.Counter {
	if p := lc.slots[o].Load(); p != nil {
		return *p
	}
	var c prometheus.Counter
	if lc.level != "" {
		c = lc.vec.WithLabelValues(lc.name, o.String(), lc.level)
	} else {
		c = lc.vec.WithLabelValues(lc.name, o.String())
	}
	lc.slots[o].Store(&c)
	return c
}

// The states of a host's breaker, as metrics and logs name them.
const (
	breakerOpen   = "open"
	breakerClosed = "closed"
)
