package ratelimit

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRateLimitWait(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	h := func(kv ...string) http.Header {
		hd := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			hd.Set(kv[i], kv[i+1])
		}
		return hd
	}
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{"retry-after-ms", h("retry-after-ms", "1500"), 1500 * time.Millisecond, true},
		{"retry-after-ms before Retry-After", h("retry-after-ms", "20", "Retry-After", "5"), 20 * time.Millisecond, true},
		{"Retry-After", h("Retry-After", "3"), 3 * time.Second, true},
		{"IETF RateLimit, none left", h("RateLimit", `"default";r=0;t=7`), 7 * time.Second, true},
		{"IETF RateLimit, some left", h("RateLimit", `"default";r=5;t=7`), 0, false},
		{"IETF RateLimit, two policies", h("RateLimit", `"a";r=3;t=1, "b";r=0;t=9`), 9 * time.Second, true},
		{"RateLimit, older form", h("RateLimit", "limit=10, remaining=0, reset=4"), 4 * time.Second, true},
		{"RateLimit-Reset with none left", h("RateLimit-Remaining", "0", "RateLimit-Reset", "6"), 6 * time.Second, true},
		{"RateLimit-Reset with some left", h("RateLimit-Remaining", "2", "RateLimit-Reset", "6"), 0, false},
		{"X-RateLimit-Reset, Unix time", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(now.Unix()+42, 10)), 42 * time.Second, true},
		{"X-RateLimit-Reset, seconds", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "8"), 8 * time.Second, true},
		{"X-RateLimit-Reset, past", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(now.Unix()-5, 10)), 0, true},
		{"OpenAI requests", h("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "6m0s"), 6 * time.Minute, true},
		{"OpenAI, the longer", h("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "20ms",
			"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "1.5s"), 1500 * time.Millisecond, true},
		{"OpenAI, some left", h("X-Ratelimit-Remaining-Tokens", "10", "X-Ratelimit-Reset-Tokens", "1s"), 0, false},
		{"malformed ignored", h("retry-after-ms", "soon", "Retry-After", "-1", "RateLimit", "r=x;t=y"), 0, false},
		{"x-amz-retry-after", h("x-amz-retry-after", "2500"), 2500 * time.Millisecond, true},
		{"Azure's x-ms-retry-after-ms", h("x-ms-retry-after-ms", "1500"), 1500 * time.Millisecond, true},
		{"x-ms-retry-after-ms before Retry-After", h("x-ms-retry-after-ms", "1500", "Retry-After", "9"), 1500 * time.Millisecond, true},
		{"retry-after-ms in exponent notation", h("retry-after-ms", "1.5e3"), 1500 * time.Millisecond, true},
		{"retry-after-ms too large, in exponent notation", h("retry-after-ms", "1e15"), MaxWait, true},
		{"x-amz-retry-after, a signed exponent", h("x-amz-retry-after", "25E+2"), 2500 * time.Millisecond, true},
		{"retry-after-ms, a bare exponent: malformed", h("retry-after-ms", "e3"), 0, false},
		{"retry-after-ms, a sign: malformed", h("retry-after-ms", "-1e3"), 0, false},
		{"RateLimit-Reset, Unix time (GitLab)", h("RateLimit-Remaining", "0", "RateLimit-Reset", strconv.FormatInt(now.Unix()+42, 10)), 42 * time.Second, true},
		{"RateLimit on two lines", http.Header{"Ratelimit": {`"a";r=3;t=1`, `"b";r=0;t=9`}}, 9 * time.Second, true},
		{"Anthropic reset, requests", h("anthropic-ratelimit-requests-remaining", "0",
			"anthropic-ratelimit-requests-reset", now.Add(3*time.Second).UTC().Format(time.RFC3339)), 3 * time.Second, true},
		{"Anthropic reset, remaining not given", h("anthropic-ratelimit-tokens-reset", now.Add(5*time.Second).UTC().Format(time.RFC3339)), 5 * time.Second, true},
		{"Anthropic reset, the latest exhausted", h("anthropic-ratelimit-requests-remaining", "10",
			"anthropic-ratelimit-requests-reset", now.Add(50*time.Second).UTC().Format(time.RFC3339),
			"anthropic-ratelimit-input-tokens-remaining", "0",
			"anthropic-ratelimit-input-tokens-reset", now.Add(4*time.Second).UTC().Format(time.RFC3339)), 4 * time.Second, true},
		// Too large to represent: the longest wait, never no hint.
		{"retry-after-ms, 10^12", h("retry-after-ms", "1000000000000"), 1e12 * time.Millisecond, true},
		{"retry-after-ms, beyond float64", h("retry-after-ms", "1"+strings.Repeat("0", 400)), MaxWait, true},
		{"X-RateLimit-Reset, 10^20", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "100000000000000000000"), MaxWait, true},
		{"RateLimit t, 10^20", h("RateLimit", `"d";r=0;t=100000000000000000000`), MaxWait, true},
		{"OpenAI, 9999999h", h("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "9999999h"), MaxWait, true},
		{"OpenAI, malformed", h("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "9999999 hours"), 0, false},
		// Milliseconds are digits, with a fraction at most: not Go's float syntax.
		{"retry-after-ms, inf", h("retry-after-ms", "inf"), 0, false},
		{"retry-after-ms, sign", h("retry-after-ms", "+100"), 0, false},
		{"retry-after-ms, hex", h("retry-after-ms", "0x10"), 0, false},
		{"retry-after-ms, underscores", h("retry-after-ms", "1_000"), 0, false},
		{"retry-after-ms, fraction", h("retry-after-ms", "1.5"), 1500 * time.Microsecond, true},
		// A Unix time long past (a stale cache, a skewed clock) is no wait.
		{"X-RateLimit-Reset, a Unix time a year ago", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(now.Unix()-365*86400, 10)), 0, true},
		// The older form on two lines: each line read alone.
		{"RateLimit, older form, two lines", http.Header{"Ratelimit": {"remaining=0, reset=4", "remaining=5, reset=60"}}, 4 * time.Second, true},
		{"RateLimit, older form, split over lines", http.Header{"Ratelimit": {"limit=10, remaining=0", "reset=5"}}, 5 * time.Second, true},
		{"none", h(), 0, false},
	}
	for _, tt := range tests {
		got, ok := Wait(tt.h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzRateLimitWait(f *testing.F) {
	for _, s := range []string{"1500", "0", `"d";r=0;t=5`, "remaining=0, reset=3", "6m0s", "-1", "1e400", "\x00",
		"1000000000000", "100000000000000000000", "9999999h", "2026-12-04T10:00:00Z", "1700000042", "NaN"} {
		f.Add(s, s)
	}
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, h := range []http.Header{
			{"Retry-After-Ms": {a}, "Retry-After": {b}},
			{"Ratelimit": {a}},
			{"Ratelimit-Remaining": {a}, "Ratelimit-Reset": {b}},
			{"X-Ratelimit-Remaining": {a}, "X-Ratelimit-Reset": {b}},
			{"X-Ratelimit-Remaining-Tokens": {a}, "X-Ratelimit-Reset-Tokens": {b}},
			{"X-Amz-Retry-After": {a}, "Ratelimit": {a, b}},
			{"Anthropic-Ratelimit-Tokens-Remaining": {a}, "Anthropic-Ratelimit-Tokens-Reset": {b}},
		} {
			if d, ok := Wait(h, now); d < 0 || d > MaxWait || (!ok && d != 0) {
				t.Fatalf("Wait(%v) = %v, %v", h, d, ok)
			}
		}
	})
}

// FuzzHintMillis: every millisecond hint (retry-after-ms, Azure's
// x-ms-retry-after-ms, AWS's x-amz-retry-after) follows one grammar, digits with a fraction and an
// exponent, no sign: what matches it is a hint (the longest wait there
// is, if too large), what does not is none, in either field alike.
func FuzzHintMillis(f *testing.F) {
	for _, s := range []string{"1500", "1e15", "1.5E3", "25e+2", "1e-3", "0", "-1", "e3", "1e", "1.e3", "inf", "0x10", "1_000", " 7 ", "1e400"} {
		f.Add(s)
	}
	grammar := regexp.MustCompile(`^[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := Millis(v)
		if want := grammar.MatchString(strings.TrimSpace(v)); ok != want {
			t.Fatalf("Millis(%q) ok = %v, want %v (the grammar)", v, ok, want)
		}
		if d < 0 || d > MaxWait || (!ok && d != 0) {
			t.Fatalf("Millis(%q) = %v, %v", v, d, ok)
		}
		for _, name := range []string{"Retry-After-Ms", "X-Ms-Retry-After-Ms", "X-Amz-Retry-After"} {
			if e, eok := Wait(http.Header{name: {v}}, now); eok != ok || e != d {
				t.Fatalf("%s: %q = %v, %v; Millis says %v, %v", name, v, e, eok, d, ok)
			}
		}
	})
}
