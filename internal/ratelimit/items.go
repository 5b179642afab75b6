package ratelimit

import (
	"net/http"
	"strings"
	"time"
)

// An Item is one limit a response states: how much of it is left, and
// when it resets.
type Item struct {
	Key       string        // which limit: an IETF item's name and partition key, or the fields' family
	Remaining int64         // what is left; an Anthropic reset stated without its count: 0
	Reset     time.Duration // until it resets, from now
	Rank      Rank          // the signal it was read from
	Requests  bool          // a count of requests, both fields stated: a quota to pace by
}

// A Rank is a signal, in the order Wait prefers them: the most specific
// first.
type Rank uint8

const (
	RankIETF       Rank = iota + 1 // RateLimit: "name";r=0;t=30, or the older "remaining=0, reset=30"
	RankRateLimit                  // RateLimit-Remaining and RateLimit-Reset
	RankXRateLimit                 // X-RateLimit-Remaining and X-RateLimit-Reset
	RankOpenAI                     // x-ratelimit-remaining-requests or -tokens, with their -reset
	RankAnthropic                  // anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-remaining and -reset
)

// Items gives each limit h states to yield, in rank order.
func Items(h http.Header, now time.Time, yield func(Item)) {
	ietf(h.Values("Ratelimit"), yield)
	for i, family := range [...]string{"Ratelimit", "X-Ratelimit"} {
		left, ok1 := count(h.Get(family + "-Remaining"))
		reset, ok2 := resetAt(h.Get(family+"-Reset"), now)
		if ok1 && ok2 {
			yield(Item{family, left, reset, RankRateLimit + Rank(i), true})
		}
	}
	for _, kind := range [...]string{"Requests", "Tokens"} {
		left, ok1 := count(h.Get("X-Ratelimit-Remaining-" + kind))
		reset, ok2 := goDuration(h.Get("X-Ratelimit-Reset-" + kind))
		if ok1 && ok2 {
			key := "openai"
			if kind == "Tokens" {
				key += "-tokens"
			}
			yield(Item{key, left, reset, RankOpenAI, kind == "Requests"})
		}
	}
	anthropic(h, now, yield)
}

// anthropic gives Anthropic's limits: a reset stated without its count
// is read as a limit spent.
func anthropic(h http.Header, now time.Time, yield func(Item)) {
	for _, kind := range [...]string{"requests", "tokens", "input-tokens", "output-tokens"} {
		reset, ok := rfc3339(h.Get("Anthropic-Ratelimit-"+kind+"-Reset"), now)
		if !ok {
			continue
		}
		v := h.Get("Anthropic-Ratelimit-" + kind + "-Remaining")
		left, stated := count(v)
		if v != "" && !stated {
			continue
		}
		key := "anthropic"
		if kind != "requests" {
			key += "-" + kind
		}
		yield(Item{key, left, reset, RankAnthropic, kind == "requests" && stated})
	}
}

// ietf reads the IETF RateLimit field, one line at a time: items such as
// "default";r=0;t=30 (draft 7 on), and the older form's parameters
// ("limit=10, remaining=0, reset=5"), read per line, or over all lines
// if no line holds both.
func ietf(lines []string, yield func(Item)) {
	var all older
	found := false
	for _, line := range lines {
		var one older
		for _, item := range strings.Split(line, ",") {
			if strings.Contains(item, ";") {
				if it, ok := ietfItem(item); ok {
					yield(it)
				}
				continue
			}
			one.param(item)
			all.param(item)
		}
		found = one.yield(yield) || found
	}
	if !found && len(lines) > 1 {
		all.yield(yield)
	}
}

// older is the older RateLimit form's parameters, as read so far.
type older struct{ remaining, reset string }

func (o *older) param(item string) {
	k, v, _ := strings.Cut(strings.TrimSpace(item), "=")
	switch strings.ToLower(strings.TrimSpace(k)) {
	case "remaining":
		o.remaining = v
	case "reset":
		o.reset = v
	}
}

// yield gives the older form's limit, if both its parameters parse: not
// a quota to pace by (its window is unnamed).
func (o *older) yield(yield func(Item)) bool {
	left, ok1 := count(o.remaining)
	reset, ok2 := seconds(o.reset)
	if ok1 && ok2 {
		yield(Item{"Ratelimit", left, reset, RankIETF, false})
	}
	return ok1 && ok2
}

// ietfItem reads one item of the IETF RateLimit field (draft 7 on):
// "name";r=remaining;t=seconds;pk=:key:.
func ietfItem(item string) (Item, bool) {
	it := Item{Rank: RankIETF, Requests: true}
	var okR, okT bool
	key, ok := structuredItem(item, func(k, v string) {
		switch k {
		case "r":
			it.Remaining, okR = count(v)
		case "t":
			it.Reset, okT = seconds(v)
		}
	})
	it.Key = key
	return it, ok && okR && okT
}

// A Policy is one quota's size and window, as the IETF RateLimit-Policy
// field states them.
type Policy struct {
	Key    string
	Quota  int64
	Window time.Duration
}

// Policies appends to out, up to its capacity, the quotas RateLimit-Policy
// states (draft 8 on), with a window of at most maxWindow: items such as
// "burst";q=100;w=60;pk=:key:, keyed as RateLimit's items are.
func Policies(h http.Header, maxWindow time.Duration, out []Policy) []Policy {
	for _, line := range h.Values("Ratelimit-Policy") {
		for _, item := range strings.Split(line, ",") {
			if len(out) == cap(out) {
				return out
			}
			var p Policy
			var okQ, okW bool
			key, ok := structuredItem(item, func(k, v string) {
				switch k {
				case "q":
					p.Quota, okQ = count(v)
				case "w":
					p.Window, okW = seconds(v)
				}
			})
			p.Key = key
			if ok && okQ && okW && p.Quota > 0 && p.Window > 0 && p.Window <= maxWindow {
				out = append(out, p)
			}
		}
	}
	return out
}

// structuredItem reads one item of a RateLimit or RateLimit-Policy
// field, "name";k=v;...;pk=:key:: it gives each parameter (its name in
// lower case) to param, and returns the item's key, its name and
// partition key; ok is false for an item with no parameters.
func structuredItem(item string, param func(k, v string)) (key string, ok bool) {
	params := strings.Split(item, ";")
	if len(params) < 2 {
		return "", false
	}
	key = strings.TrimSpace(params[0])
	for _, p := range params[1:] {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if k == "pk" {
			key += ";" + strings.TrimSpace(v)
			continue
		}
		param(k, v)
	}
	return key, true
}
