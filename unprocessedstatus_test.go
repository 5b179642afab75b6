package retryhttp

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

// A status declared unprocessed (Slack answers 429 with Retry-After to a
// call it did not run) is retried whatever the method, after the wait the
// server asked for, with the same body; nothing else about the method
// rule changes: a POST's 500 is still returned at once.
func TestUnprocessedStatusesRetryAnyMethod(t *testing.T) {
	limited := retrytest.Step{Reply: retrytest.RetryAfter(429, "2")}
	for _, tc := range []struct {
		name  string
		opts  []Option
		ctx   func(context.Context) context.Context
		step  retrytest.Step
		sends int
	}{
		{"a POST's 429, not declared", nil, nil, limited, 1},
		{"a POST's 429, declared", []Option{WithUnprocessedStatuses(429)}, nil, limited, 2},
		{"a POST's 500, 429 declared", []Option{WithUnprocessedStatuses(429)}, nil, answer(500), 1},
		{"a POST's 429, declared for the request", nil, func(ctx context.Context) context.Context {
			return WithRequestOptions(ctx, WithUnprocessedStatuses(429))
		}, limited, 2},
		{"a POST declared unsafe, its 429 declared", []Option{WithUnprocessedStatuses(429)}, NotIdempotent, limited, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := retrytest.NewScriptTransport(tc.step)
				tr, sl := testTransport(base, tc.opts...)
				req := newRequest(t, "POST", "http://h/chat.postMessage", strings.NewReader(`{"text":"hi"}`))
				if tc.ctx != nil {
					req = req.WithContext(tc.ctx(req.Context()))
				}
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if n := base.Count(); n != tc.sends {
					t.Fatalf("%d sends, want %d", n, tc.sends)
				}
				if tc.sends == 2 {
					a := base.Attempts()
					if a[0].BodySHA256 != a[1].BodySHA256 || a[1].BodyLength != len(`{"text":"hi"}`) {
						t.Errorf("the retry's body differs from the first: %+v, %+v", a[0], a[1])
					}
					if s := sl.Sleeps(); len(s) != 1 || s[0] < 2*time.Second {
						t.Errorf("waited %v before the retry, want at least the 2 s the server asked for", s)
					}
				}
			})
		})
	}
}

// Only error statuses may be declared unprocessed, and a policy declares
// them too.
func TestUnprocessedStatusesConfig(t *testing.T) {
	for _, code := range []int{200, 399, 1000} {
		func() {
			defer func() {
				if err, _ := recover().(error); err == nil || !strings.Contains(err.Error(), "WithUnprocessedStatuses") {
					t.Errorf("WithUnprocessedStatuses(%d): New panicked with %v, want an error naming it", code, err)
				}
			}()
			New(nil, WithUnprocessedStatuses(code))
		}()
	}
	p, err := ParsePolicy([]byte(`{"dependency": "slack", "semantic_safety": {"unprocessed_status": [429]}}`))
	if err != nil {
		t.Fatal(err)
	}
	opts, err := p.Options()
	if err != nil {
		t.Fatal(err)
	}
	base := retrytest.NewScriptTransport(retrytest.Step{Reply: retrytest.Status(429)})
	resp, err := New(base, append(opts, WithBackoff(Constant(0)))...).RoundTrip(newRequest(t, "POST", "http://h/", strings.NewReader("x")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if base.Count() != 2 {
		t.Errorf("a policy's unprocessed_status [429]: %d sends of a POST answered 429, want 2", base.Count())
	}
}
