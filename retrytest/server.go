// This file holds the scripted Server; faults.go holds the fault
// injectors and roundtripper.go an in-memory scripted RoundTripper.

package retrytest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"
)

// A Reply is one scripted answer of a Server.
type Reply struct {
	Status int         // 0 means 200
	Header http.Header // extra response headers, e.g. Retry-After
	Body   string
	Delay  time.Duration // wait before answering (bounded by the request's context)
	Fault  Fault         // a network fault instead of, or in the middle of, the answer
}

// Status returns a Reply with the given status and its text as body.
func Status(code int) Reply { return Reply{Status: code, Body: http.StatusText(code)} }

// RetryAfter returns a Reply with the given status and Retry-After value.
func RetryAfter(code int, value string) Reply {
	r := Status(code)
	r.Header = http.Header{"Retry-After": {value}}
	return r
}

// Attempt is what the Server received in one attempt.
type Attempt struct {
	Method     string
	Path       string // without the query
	Header     http.Header
	BodyLength int
	BodySHA256 string // hex
	At         time.Time
}

// Server is an httptest.Server that answers from a script: the n-th
// request it receives gets the n-th Reply, and once the script is used up
// every request gets Then (200 "ok" unless set). It records each attempt.
// Its methods are safe for concurrent use.
type Server struct {
	*httptest.Server
	Then Reply // the answer after the script is used up

	mu       sync.Mutex
	script   []Reply
	attempts []Attempt
	handler  http.Handler
	conns    map[net.Conn]http.ConnState
	newConns int
}

// NewServer starts a Server on a loopback address that answers with the
// given script. The caller must Close it.
func NewServer(script ...Reply) *Server {
	s := NewUnstartedServer(script...)
	s.Start()
	return s
}

// NewUnstartedServer returns a Server that is not started yet, so that its
// httptest.Server can be configured first; call Start or StartTLS.
func NewUnstartedServer(script ...Reply) *Server {
	s := newServer(script)
	s.Server = httptest.NewUnstartedServer(s)
	s.Server.Config.ConnState = s.connState
	return s
}

// NewTLSServer is NewServer over TLS, with HTTP/2 enabled; use its
// Client() or Certificate() to trust it.
func NewTLSServer(script ...Reply) *Server {
	s := NewUnstartedServer(script...)
	s.Server.EnableHTTP2 = true
	s.Server.StartTLS()
	return s
}

func newServer(script []Reply) *Server {
	return &Server{script: append([]Reply(nil), script...), Then: Reply{Body: "ok"},
		conns: make(map[net.Conn]http.ConnState)}
}

func (s *Server) connState(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch state {
	case http.StateNew:
		s.newConns++
		s.conns[c] = state
	case http.StateClosed, http.StateHijacked:
		delete(s.conns, c)
	default:
		s.conns[c] = state
	}
}

// NewConns returns how many connections the Server has accepted.
func (s *Server) NewConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newConns
}

// OpenConns returns how many of its connections are open now (new, active
// or idle; hijacked ones are no longer the Server's).
func (s *Server) OpenConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Handle makes the Server answer, once its script is used up, with h
// instead of Then. It must be called before any request arrives.
func (s *Server) Handle(h http.Handler) { s.handler = h }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := sha256.New()
	n, _ := io.Copy(h, io.LimitReader(r.Body, 64<<20))
	s.mu.Lock()
	i := len(s.attempts)
	s.attempts = append(s.attempts, Attempt{
		Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(),
		BodyLength: int(n), BodySHA256: hex.EncodeToString(h.Sum(nil)), At: time.Now(),
	})
	reply, scripted := s.Then, false
	if i < len(s.script) {
		reply, scripted = s.script[i], true
	}
	handler := s.handler
	s.mu.Unlock()
	if !scripted && handler != nil {
		handler.ServeHTTP(w, r)
		return
	}
	serve(w, r, reply)
}

// maxFaultWait bounds every wait a fault makes, so that no test can hang.
const maxFaultWait = 30 * time.Second

func serve(w http.ResponseWriter, r *http.Request, reply Reply) {
	if reply.Delay > 0 {
		t := time.NewTimer(min(reply.Delay, maxFaultWait))
		select {
		case <-r.Context().Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	if reply.Fault != nil {
		reply.Fault.inject(w, r, reply)
		return
	}
	writeReply(w, reply)
}

func writeReply(w http.ResponseWriter, reply Reply) {
	for k, v := range reply.Header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(reply.Body)))
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	io.WriteString(w, reply.Body)
}

// Attempts returns a copy of the attempts received so far, in order.
func (s *Server) Attempts() []Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Attempt(nil), s.attempts...)
}

// Count returns the number of attempts received so far.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.attempts)
}

// CheckCount returns an error unless the Server received exactly n attempts.
func (s *Server) CheckCount(n int) error {
	if got := s.Count(); got != n {
		return fmt.Errorf("retrytest: server received %d attempts, want %d", got, n)
	}
	return nil
}

// CheckSameBody returns an error unless every attempt carried the same
// body (same length and SHA-256), and that body is want if want is not nil.
func CheckSameBody(attempts []Attempt, want []byte) error {
	if len(attempts) == 0 {
		return fmt.Errorf("retrytest: no attempts")
	}
	first := attempts[0]
	if want != nil {
		sum := sha256.Sum256(want)
		if h := hex.EncodeToString(sum[:]); first.BodySHA256 != h || first.BodyLength != len(want) {
			return fmt.Errorf("retrytest: attempt 1 body: %d bytes sha256 %.12s, want %d bytes sha256 %.12s",
				first.BodyLength, first.BodySHA256, len(want), h)
		}
	}
	for i, a := range attempts[1:] {
		if a.BodySHA256 != first.BodySHA256 || a.BodyLength != first.BodyLength {
			return fmt.Errorf("retrytest: attempt %d body: %d bytes sha256 %.12s, attempt 1 had %d bytes sha256 %.12s",
				i+2, a.BodyLength, a.BodySHA256, first.BodyLength, first.BodySHA256)
		}
	}
	return nil
}

// CheckSameHeader returns an error unless every attempt carried the same
// non-empty value of the header name.
func CheckSameHeader(attempts []Attempt, name string) error {
	if len(attempts) == 0 {
		return fmt.Errorf("retrytest: no attempts")
	}
	first := attempts[0].Header.Get(name)
	if first == "" {
		return fmt.Errorf("retrytest: attempt 1 has no %s header", name)
	}
	for i, a := range attempts[1:] {
		if v := a.Header.Get(name); v != first {
			return fmt.Errorf("retrytest: attempt %d %s = %q, attempt 1 had %q", i+2, name, v, first)
		}
	}
	return nil
}
