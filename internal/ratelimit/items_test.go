package ratelimit

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

// One reading of every field family: the quotas to pace by are the
// request counts stated with their reset; token counts, the older IETF
// form and an Anthropic reset without its count are limits for the wait
// only.
func TestItemsSayWhichLimitsAreQuotas(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	h := http.Header{
		"Ratelimit":                              {`"a";r=3;t=10;pk=:k:, remaining=0, reset=4`},
		"Ratelimit-Remaining":                    {"5"},
		"Ratelimit-Reset":                        {"6"},
		"X-Ratelimit-Remaining":                  {"7"},
		"X-Ratelimit-Reset":                      {"1700000042"},
		"X-Ratelimit-Remaining-Requests":         {"8"},
		"X-Ratelimit-Reset-Requests":             {"1m"},
		"X-Ratelimit-Remaining-Tokens":           {"0"},
		"X-Ratelimit-Reset-Tokens":               {"2s"},
		"Anthropic-Ratelimit-Requests-Remaining": {"9"},
		"Anthropic-Ratelimit-Requests-Reset":     {"2023-11-14T22:13:40Z"},
		"Anthropic-Ratelimit-Tokens-Reset":       {"2023-11-14T22:13:30Z"},
	}
	var got []Item
	Items(h, now, func(it Item) { got = append(got, it) })
	want := []Item{
		{`"a";:k:`, 3, 10 * time.Second, RankIETF, true},
		{"Ratelimit", 0, 4 * time.Second, RankIETF, false},
		{"Ratelimit", 5, 6 * time.Second, RankRateLimit, true},
		{"X-Ratelimit", 7, 42 * time.Second, RankXRateLimit, true},
		{"openai", 8, time.Minute, RankOpenAI, true},
		{"openai-tokens", 0, 2 * time.Second, RankOpenAI, false},
		{"anthropic", 9, 20 * time.Second, RankAnthropic, true},
		{"anthropic-tokens", 0, 10 * time.Second, RankAnthropic, false},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Items:\n got %v\nwant %v", got, want)
	}
	// The wait reads the first rank with a limit spent: the older IETF
	// form's 4 s, not the tokens' 2 s nor Anthropic's 10 s.
	if d, ok := Wait(h, now); d != 4*time.Second || !ok {
		t.Errorf("Wait = %v, %v; want 4s", d, ok)
	}
}

// A malformed count is no limit, in the wait and the quotas alike.
func TestItemsSkipMalformedCounts(t *testing.T) {
	h := http.Header{"Anthropic-Ratelimit-Requests-Remaining": {"many"}, "Anthropic-Ratelimit-Requests-Reset": {"2023-11-14T22:13:40Z"},
		"Ratelimit-Remaining": {"-1"}, "Ratelimit-Reset": {"5"}}
	n := 0
	Items(h, time.Unix(1_700_000_000, 0), func(Item) { n++ })
	if n != 0 {
		t.Errorf("%d limits read from malformed counts", n)
	}
}
