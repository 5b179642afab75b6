// This file makes retries of other layers visible: a request that reaches
// the Transport as a retry of an SDK or another retrying layer above it is
// counted (retryhttp_layered_retries_total) and logged once per source, so
// that the retries hidden in a stack are known. Nothing here changes what
// is sent.

package retryhttp

import (
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// A layered retry's source: which layer above said it was retrying.
const (
	layerAWS       = iota // amz-sdk-request: attempt=N, N > 1 (AWS SDKs)
	layerStainless        // X-Stainless-Retry-Count > 0 (OpenAI, Anthropic SDKs)
	layerGRPC             // grpc-previous-rpc-attempts > 0 (gRPC over HTTP)
	layerRetryhttp        // the attempt header of another retryhttp Transport
	layerKey              // an Idempotency-Key seen again within a minute
	numLayers
)

var layerLabels = [numLayers]string{"aws-sdk", "stainless-sdk", "grpc", "retryhttp", "idempotency-key"}

// layerAdvice is the Warn log's advice for each source.
var layerAdvice = [numLayers]string{
	"the AWS SDK retries too: set Retryer to aws.NopRetryer{} (or retry.AddWithMaxAttempts(retry.NewStandard(), 1)) so that one layer retries",
	"the OpenAI or Anthropic SDK retries too: set its max retries to 0 (option.WithMaxRetries(0)) so that one layer retries",
	"gRPC retries too: disable its retry policy (grpc.WithDisableRetry()) so that one layer retries",
	"another retryhttp Transport retries too: wrap the inner one directly, or give middleware an Unwrap method, so that only the outermost retries",
	"a layer above sends the same Idempotency-Key again: it retries too; turn its retries off so that one layer retries",
}

// layers is one Transport's view of the layers above it.
type layers struct {
	warned [numLayers]atomic.Bool
	keys   recentKeys
}

// detectLayered looks at a request for the marks of a retry made above.
// A request that carries none of the headers looked at costs a few map
// lookups and no allocation.
func (k *call) detectLayered() {
	c, h := k.c, k.req.Header
	if len(h) == 0 {
		return
	}
	if v := h["Amz-Sdk-Request"]; len(v) > 0 && awsRetry(v[0]) {
		k.layered(layerAWS)
	}
	if v := h["X-Stainless-Retry-Count"]; len(v) > 0 && v[0] != "0" && v[0] != "" {
		k.layered(layerStainless)
	}
	if v := h["Grpc-Previous-Rpc-Attempts"]; len(v) > 0 && v[0] != "0" && v[0] != "" {
		k.layered(layerGRPC)
	}
	if c.attemptHeader != "" {
		// Our own header, from a Transport above: a retry if it says
		// other than its first attempt would.
		if v := h[c.attemptHeader]; len(v) > 0 && v[0] != c.attemptValueFor(1, c.maxAttempts) {
			k.layered(layerRetryhttp)
		}
	}
	if k.keyed && k.header == nil && k.req.Response == nil {
		// The caller's own key, not an injected one, and not on a
		// redirect's hop (http.Client copies the headers onto it).
		key := h.Get(HeaderIdempotencyKey)
		if key == "" {
			key = h.Get(headerXIdempotencyKey)
		}
		if key != "" && c.layers.keys.seen(k.req.URL.Host+" "+key, unixSecond()) {
			k.layered(layerKey)
		}
	}
}

// awsRetry reports whether an amz-sdk-request value ("attempt=2; max=3")
// names an attempt after the first.
func awsRetry(v string) bool {
	for part := range strings.SplitSeq(v, ";") {
		if n, ok := strings.CutPrefix(strings.TrimSpace(part), "attempt="); ok {
			a, err := strconv.Atoi(n)
			return err == nil && a > 1
		}
	}
	return false
}

func (k *call) layered(source int) {
	c := k.c
	c.metrics.layeredRetry(source)
	if c.logger != nil && c.layers.warned[source].CompareAndSwap(false, true) {
		advice := layerAdvice[source]
		if !k.replayable && source != layerRetryhttp {
			// Turning the layer above off would leave this request with
			// no retry at all: say how to declare it first.
			advice = advice + "; but this " + k.req.Method + " is one retryhttp does not retry (not idempotent, no key): if such requests are safe to repeat, " +
				"declare them first (retryhttp.Idempotent(ctx), WithIdempotentIf, or a policy's semantic_safety), or nothing will retry them"
		}
		c.logger.LogAttrs(k.ctx, slog.LevelWarn, "retryhttp: a layer above retries too",
			slog.String("name", c.displayName()),
			slog.String("source", layerLabels[source]),
			slog.String("host", k.req.URL.Host),
			slog.String("advice", advice))
	}
}

// recentKeys remembers the idempotency keys seen in the last minute,
// each with the second it was seen in, in two generations of at most
// maxRecentKeys each, so that memory is bounded whatever the traffic.
type recentKeys struct {
	mu        sync.Mutex
	cur, prev map[string]int64
	since     int64 // the second cur was started in
}

const (
	maxRecentKeys = 4096
	recentKeysFor = 60 // seconds a key is remembered; and a generation lasts
)

// seen records key in second sec and reports whether it was seen in the
// minute before.
func (r *recentKeys) seen(key string, sec int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil || sec-r.since >= recentKeysFor || len(r.cur) >= maxRecentKeys {
		r.prev = r.cur
		if sec-r.since >= 2*recentKeysFor {
			r.prev = nil // both generations are stale
		}
		r.cur, r.since = make(map[string]int64), sec
	}
	t, ok := r.cur[key]
	if !ok {
		t, ok = r.prev[key]
	}
	r.cur[key] = sec
	return ok && sec-t < recentKeysFor
}
