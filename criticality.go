// This file holds criticality: how much a request matters to its caller,
// per dependency (a policy's criticality), per Transport or per request
// (WithCriticality), which decides who yields first once a host is failing
// or overloaded (internal/admission), and the opt-in header that tells the
// server (WithCriticalityHeader).

package retryhttp

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/retryhttp/retryhttp/internal/strictjson"
)

// A Criticality says how much a request matters to its caller. Once its
// host is failing or overloaded, a Sheddable request yields first and a
// Critical one last, wherever admission decides: the retry budget, the
// throttle, the concurrency limit, quota pacing and the release after an
// outage (docs/overload.md, "Criticality"). On a healthy host it changes
// nothing. The zero value is the default, between the two: what a request
// is unless told otherwise. Its text is what metrics, logs and
// WithCriticalityHeader show: "critical", "default" or "sheddable".
type Criticality string

// The criticalities besides the default (""): three levels, where Google
// SRE has four, because a client that orders its own requests needs only
// one above the rest and one below (docs/api.md).
const (
	// Critical requests are the last to yield: a page cannot be served
	// without them.
	Critical Criticality = "critical"
	// Sheddable requests yield first: a page can be served without them,
	// or they can be done later.
	Sheddable Criticality = "sheddable"
)

// criticalityLevels are the levels' texts, by admission's level + 1.
var criticalityLevels = [3]string{"sheddable", "default", "critical"}

// level is c's admission level: -1 sheddable, 0 default, 1 critical; ok
// is false if c is none of them.
func (c Criticality) level() (l int8, ok bool) {
	switch c {
	case Critical:
		return 1, true
	case Sheddable:
		return -1, true
	case "", "default":
		return 0, true
	}
	return 0, false
}

// levelCriticality is level l's Criticality.
func levelCriticality(l int8) Criticality {
	switch l {
	case 1:
		return Critical
	case -1:
		return Sheddable
	}
	return ""
}

// levelText is level l's text.
func levelText(l int8) string { return criticalityLevels[l+1] }

// WithCriticality sets the criticality of requests: of every request of
// the Transport, or, through WithRequestOptions, of one. A value other
// than Critical, Sheddable, "" and "default" is invalid. The default is
// "" (the default criticality); a policy's criticality field sets it.
func WithCriticality(c Criticality) RequestOption {
	return requestOption("WithCriticality", func(cfg *config) error {
		l, ok := c.level()
		if !ok {
			return optErr(fmt.Sprintf("WithCriticality(%q)", string(c)), "not a criticality: %s, default or %s%s", Critical, Sheddable, nearestLevel(string(c)))
		}
		cfg.level = l
		return nil
	})
}

// WithCriticalityHeader makes every attempt carry the request header
// name with its criticality ("critical", "default" or "sheddable"), so
// that a server can shed by it too. Each attempt then copies the header
// map. An invalid name is invalid. The default adds none.
func WithCriticalityHeader(name string) Option {
	return option("WithCriticalityHeader", func(c *config) error {
		if !validHeaderName(name) {
			return optErr(fmt.Sprintf("WithCriticalityHeader(%q)", name), "not a valid header name")
		}
		c.levelHeader = http.CanonicalHeaderKey(name)
		return nil
	})
}

// policyCriticality is the Criticality that a policy's free text stands
// for. Case and the separators '-' and '_' do not matter. Critical:
// "critical", "critical_plus" (SRE's), "required" and "required-…" (the
// template's "required-for-case-detail"). Sheddable: "sheddable",
// "sheddable_plus", "optional…", "degradable…", "best_effort".
// Default: "default". Anything else is an error that suggests the
// nearest.
func policyCriticality(text string) (Criticality, error) {
	t := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(text)), "_", "-")
	word, _, _ := strings.Cut(t, "-")
	switch {
	case t == "critical" || t == "critical-plus" || word == "required":
		return Critical, nil
	case t == "sheddable" || t == "sheddable-plus" || t == "best-effort" || word == "optional" || word == "degradable":
		return Sheddable, nil
	case t == "default":
		return "", nil
	}
	return "", fmt.Errorf("%q is not a criticality: critical (or required-…), default or sheddable (or optional-…, degradable-…)%s", text, nearestLevel(word))
}

// nearestLevel suggests the criticality nearest to w, if one is.
func nearestLevel(w string) string {
	if n := strictjson.Nearest(w, "critical", "default", "sheddable", "required", "optional", "degradable"); n != "" {
		return ": did you mean " + n + "?"
	}
	return ""
}
