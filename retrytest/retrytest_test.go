package retrytest

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, c *http.Client, url string) (int, string, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestServerScriptThenOK(t *testing.T) {
	s := NewServer(Status(503), RetryAfter(429, "7"))
	defer s.Close()
	c := s.Client()
	for i, want := range []int{503, 429, 200, 200} {
		code, body, err := get(t, c, s.URL+"/p?q=1")
		if err != nil || code != want {
			t.Fatalf("request %d: %d %q %v, want %d", i+1, code, body, err, want)
		}
	}
	if err := s.CheckCount(4); err != nil {
		t.Error(err)
	}
	if a := s.Attempts()[1]; a.Method != "GET" || a.Path != "/p" {
		t.Errorf("attempt 2 = %+v", a)
	}
	if s.NewConns() != 1 {
		t.Errorf("%d connections, want 1 (the script's replies keep the connection)", s.NewConns())
	}
}

func TestCheckers(t *testing.T) {
	same := []Attempt{{BodyLength: 3, BodySHA256: "a"}, {BodyLength: 3, BodySHA256: "a"}}
	differ := []Attempt{{BodyLength: 3, BodySHA256: "a"}, {BodyLength: 3, BodySHA256: "b"}}
	if err := CheckSameBody(same, nil); err != nil {
		t.Error(err)
	}
	if err := CheckSameBody(differ, nil); err == nil || !strings.Contains(err.Error(), "attempt 2") {
		t.Errorf("CheckSameBody(differing) = %v", err)
	}
	if err := CheckSameBody(nil, nil); err == nil {
		t.Error("CheckSameBody(no attempts) = nil")
	}
	h := func(v string) http.Header { return http.Header{"K": {v}} }
	if err := CheckSameHeader([]Attempt{{Header: h("1")}, {Header: h("1")}}, "K"); err != nil {
		t.Error(err)
	}
	if err := CheckSameHeader([]Attempt{{Header: h("1")}, {Header: h("2")}}, "K"); err == nil {
		t.Error("CheckSameHeader(differing) = nil")
	}
	if err := CheckSameHeader([]Attempt{{Header: http.Header{}}}, "K"); err == nil {
		t.Error("CheckSameHeader(missing) = nil")
	}
}

func TestFaults(t *testing.T) {
	t.Run("reset", func(t *testing.T) {
		s := NewServer(Reply{Fault: Reset})
		defer s.Close()
		_, _, err := get(t, s.Client(), s.URL)
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
			t.Errorf("reset: %v, want a connection reset", err)
		}
	})
	t.Run("reset after headers", func(t *testing.T) {
		s := NewServer(Reply{Body: "0123456789", Fault: ResetAfterHeaders})
		defer s.Close()
		code, body, err := get(t, s.Client(), s.URL)
		if code != 200 || err == nil || body != "01234" {
			t.Errorf("got %d %q %v; want 200, half the body, then an error", code, body, err)
		}
	})
	t.Run("hang", func(t *testing.T) {
		s := NewServer(Reply{Fault: Hang})
		defer s.Close()
		c := s.Client()
		c.Timeout = 50 * time.Millisecond
		start := time.Now()
		_, _, err := get(t, c, s.URL)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || time.Since(start) > 5*time.Second {
			t.Errorf("hang: %v after %v, want a client timeout", err, time.Since(start))
		}
	})
	t.Run("slow body", func(t *testing.T) {
		s := NewServer(Reply{Body: "abc", Fault: SlowBody(10 * time.Millisecond)})
		defer s.Close()
		start := time.Now()
		_, body, err := get(t, s.Client(), s.URL)
		if err != nil || body != "abc" || time.Since(start) < 25*time.Millisecond {
			t.Errorf("slow body: %q %v in %v", body, err, time.Since(start))
		}
	})
	t.Run("close after reply", func(t *testing.T) {
		s := NewServer(Reply{Body: "one", Fault: CloseAfterReply})
		defer s.Close()
		c := s.Client()
		for range 2 {
			if code, _, err := get(t, c, s.URL); err != nil || code != 200 {
				t.Fatalf("%d %v", code, err)
			}
		}
		if s.NewConns() != 2 {
			t.Errorf("%d connections, want 2: the first was closed after its reply", s.NewConns())
		}
	})
	t.Run("refused", func(t *testing.T) {
		addr, err := RefusedAddr()
		if err != nil {
			t.Fatal(err)
		}
		_, err = net.DialTimeout("tcp", addr, time.Second)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial %s: %v, want connection refused", addr, err)
		}
	})
}

func TestScriptTransport(t *testing.T) {
	boom := errors.New("boom")
	st := NewScriptTransport(Step{Err: boom}, Step{Reply: Status(503)})
	req, _ := http.NewRequest("PUT", "http://example.test/x", strings.NewReader("body"))
	if _, err := st.RoundTrip(req); !errors.Is(err, boom) {
		t.Fatalf("step 1: %v, want boom", err)
	}
	req, _ = http.NewRequest("PUT", "http://example.test/x", strings.NewReader("body"))
	resp, err := st.RoundTrip(req)
	if err != nil || resp.StatusCode != 503 || st.OpenBodies() != 1 {
		t.Fatalf("step 2: %v %v, %d open", resp, err, st.OpenBodies())
	}
	resp.Body.Close()
	resp.Body.Close()
	if st.OpenBodies() != 0 || st.Count() != 2 {
		t.Errorf("%d open bodies, %d attempts; want 0, 2", st.OpenBodies(), st.Count())
	}
	if err := CheckSameBody(st.Attempts(), []byte("body")); err != nil {
		t.Error(err)
	}
}
