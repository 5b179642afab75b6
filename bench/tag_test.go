// This file holds the tests of how the contenders that know criticality
// are told it: each tagged request goes through (an option the library
// refused would fail it), failsafe-go's priority is the one its policies
// read, and the priority contenders stop calibrating once closed.

package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/failsafe-go/failsafe-go/priority"
)

func TestTags(t *testing.T) {
	if p := priority.FromContext(TagFailsafe(context.Background(), true)); p != priority.High {
		t.Errorf("critical: priority %v; want High", p)
	}
	if p := priority.FromContext(TagFailsafe(context.Background(), false)); p != priority.Low {
		t.Errorf("sheddable: priority %v; want Low", p)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	p := CommonPolicy
	for _, tc := range []struct {
		c      Contender
		closes bool // has a Prioritizer to stop
	}{{RetryHTTP, false}, {RetryHTTPThrottle, false}, {RetryHTTPLimit, false}, {FailsafePriorityThrottler(p), true}, {FailsafePriorityLimiter(p), true}} {
		c, b := tc.c, &http.Transport{}
		rt := c.New(b)
		for _, critical := range []bool{true, false} {
			req, _ := http.NewRequestWithContext(c.Tag(context.Background(), critical), "GET", srv.URL, nil)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatalf("%s, critical %v: %v", c.Name, critical, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("%s, critical %v: %d; want 200", c.Name, critical, resp.StatusCode)
			}
		}
		if closer, ok := rt.(io.Closer); ok {
			closer.Close()
		} else if tc.closes {
			t.Errorf("%s: not an io.Closer; its Prioritizer would calibrate until the process ends", c.Name)
		}
		b.CloseIdleConnections()
	}
}
