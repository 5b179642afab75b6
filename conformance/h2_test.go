package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Server is an HTTP/2 server over TLS, written with golang.org/x/net/http2's
// Framer, for what no ordinary server does at will: refuse a stream with
// REFUSED_STREAM, or answer with a GOAWAY whose last stream ID is below the
// request's (RFC 9113 §8.7: in both cases the request was not processed).
// It answers every other request 200, after reading its body to the end,
// and records what it processed.
type h2Server struct {
	srv *httptest.Server

	mu      sync.Mutex
	script  []string // what the next streams get, in order: "refuse" or "goaway"; then answers
	streams int      // HEADERS received
	seen    []seen   // requests processed
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newH2Server() *h2Server {
	s := &h2Server{}
	s.srv = httptest.NewUnstartedServer(http.NotFoundHandler())
	s.srv.EnableHTTP2 = true
	s.srv.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
		"h2": func(_ *http.Server, c *tls.Conn, _ http.Handler) { s.serve(c) },
	}
	s.srv.StartTLS()
	return s
}

// close stops the server and ends every connection it still serves.
func (s *h2Server) close() {
	s.srv.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// next says what the next stream gets.
func (s *h2Server) next() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams++
	if len(s.script) == 0 {
		return "answer"
	}
	a := s.script[0]
	s.script = s.script[1:]
	return a
}

// reset starts a cell: the script for its streams, and nothing seen.
func (s *h2Server) reset(script ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script, s.streams, s.seen = script, 0, nil
}

func (s *h2Server) serve(c *tls.Conn) {
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer c.Close()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if fr.WriteSettings() != nil {
		return
	}
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	type stream struct {
		key  string
		body bytes.Buffer
	}
	open := map[uint32]*stream{}
	answer := func(id uint32, st *stream) error {
		sum := sha256.Sum256(st.body.Bytes())
		s.mu.Lock()
		s.seen = append(s.seen, seen{st.key, hex.EncodeToString(sum[:8])})
		s.mu.Unlock()
		hbuf.Reset()
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndHeaders: true}); err != nil {
			return err
		}
		return fr.WriteData(id, true, []byte("ok"))
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			id := f.StreamID
			switch s.next() {
			case "refuse":
				err = fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
			case "goaway":
				// The last stream processed is the one before this one.
				err = fr.WriteGoAway(max(id, 2)-2, http2.ErrCodeNo, nil)
			default:
				st := &stream{}
				for _, hf := range f.RegularFields() {
					if hf.Name == "idempotency-key" {
						st.key = hf.Value
					}
				}
				if f.StreamEnded() {
					err = answer(id, st)
				} else {
					open[id] = st
				}
			}
		case *http2.DataFrame:
			if n := uint32(len(f.Data())); n > 0 {
				// Flow control: what was received, of any stream, is
				// given back to the connection.
				err = fr.WriteWindowUpdate(0, n)
			}
			st := open[f.StreamID]
			if st == nil || err != nil {
				break
			}
			st.body.Write(f.Data())
			if f.StreamEnded() {
				delete(open, f.StreamID)
				err = answer(f.StreamID, st)
			} else if n := uint32(len(f.Data())); n > 0 {
				err = fr.WriteWindowUpdate(f.StreamID, n)
			}
		}
		if err != nil {
			return
		}
	}
}

// connBase sends each request on a new connection of its own, through
// net/http's ClientConn, or golang.org/x/net/http2's (deprecated, but still
// in use) if xnet is set. Unlike a Transport, neither resends a request
// itself: what the server said reaches retryhttp as the client reported it.
type connBase struct {
	addr string
	tr   *http.Transport
	xnet bool
}

// conn is what both ClientConns offer.
type conn interface {
	http.RoundTripper
	io.Closer
}

func (b connBase) RoundTrip(req *http.Request) (*http.Response, error) {
	cc, err := b.dial(req.Context())
	if err != nil {
		closeReq(req)
		return nil, err
	}
	resp, err := cc.RoundTrip(req)
	if err != nil {
		cc.Close()
		return nil, err
	}
	resp.Body = closeConn{resp.Body, cc}
	return resp, nil
}

// dial opens a new connection of the client's kind.
func (b connBase) dial(ctx context.Context) (conn, error) {
	if !b.xnet {
		return b.tr.NewClientConn(ctx, "https", b.addr)
	}
	conf := b.tr.TLSClientConfig.Clone()
	conf.NextProtos = []string{"h2"}
	d := tls.Dialer{Config: conf}
	c, err := d.DialContext(ctx, "tcp", b.addr)
	if err != nil {
		return nil, err
	}
	//lint:ignore SA1019 the x/net client is deprecated, and still in use: its errors are checked too
	cc, err := (&http2.Transport{}).NewClientConn(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return cc, nil
}

func closeReq(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

type closeConn struct {
	io.ReadCloser
	cc io.Closer
}

func (c closeConn) Close() error {
	err := c.ReadCloser.Close()
	c.cc.Close()
	return err
}

// h2Kinds are the conformance kinds, and two more that only the HTTP/2
// faults tell apart: a chunked POST without GetBody and without a key,
// within and over the buffer limit.
var h2Kinds = append(kinds[:len(kinds):len(kinds)],
	kind{"chunked POST without GetBody, no key", nil, func(u string) *http.Request {
		r, _ := http.NewRequest("POST", u, io.NopCloser(strings.NewReader(payload)))
		return r
	}},
	kind{"the same, over the buffer limit", []retryhttp.Option{retryhttp.WithBodyBufferLimit(int64(len(payload) / 2))}, func(u string) *http.Request {
		r, _ := http.NewRequest("POST", u, io.NopCloser(strings.NewReader(payload)))
		return r
	}},
)

// h2Fault is what the server does with the first streams of a request, and
// what each kind must see: the attempts retryhttp sends and the requests
// the server processes, in h2Kinds' order.
type h2Fault struct {
	name          string
	script        []string
	base          string // "" for net/http's Transport, else connBase: "net/http" or "x/net"
	sent, handled [6]int
}

var h2Faults = []h2Fault{
	{name: "answered", sent: [6]int{1, 1, 1, 1, 1, 1}, handled: [6]int{1, 1, 1, 1, 1, 1}},
	// net/http resends these itself, once it can rewind the body: retryhttp
	// gives it the means, up to the buffer limit, for a request that it
	// would not retry otherwise; it resends a keyed request without GetBody
	// itself, so that the resend is counted.
	{name: "REFUSED_STREAM", script: []string{"refuse"},
		sent: [6]int{1, 1, 1, 2, 1, 1}, handled: [6]int{1, 1, 1, 1, 1, 0}},
	{name: "GOAWAY below the request's stream", script: []string{"goaway"},
		sent: [6]int{1, 1, 1, 2, 1, 1}, handled: [6]int{1, 1, 1, 1, 1, 0}},
	// A ClientConn does not: retryhttp retries whatever the method.
	{name: "REFUSED_STREAM, net/http ClientConn as the base", script: []string{"refuse"}, base: "net/http",
		sent: [6]int{2, 2, 2, 2, 2, 1}, handled: [6]int{1, 1, 1, 1, 1, 0}},
	{name: "GOAWAY below the request's stream, net/http ClientConn as the base", script: []string{"goaway"}, base: "net/http",
		sent: [6]int{2, 2, 2, 2, 2, 1}, handled: [6]int{1, 1, 1, 1, 1, 0}},
	{name: "REFUSED_STREAM, x/net/http2 ClientConn as the base", script: []string{"refuse"}, base: "x/net",
		sent: [6]int{2, 2, 2, 2, 2, 1}, handled: [6]int{1, 1, 1, 1, 1, 0}},
	{name: "GOAWAY below the request's stream, x/net/http2 ClientConn as the base", script: []string{"goaway"}, base: "x/net",
		sent: [6]int{2, 2, 2, 2, 2, 1}, handled: [6]int{1, 1, 1, 1, 1, 0}},
}

// TestHTTP2Unprocessed checks that a request that HTTP/2 says was not
// processed is sent again whatever its method, once, with the same body
// and key, and never when its body cannot be replayed.
func TestHTTP2Unprocessed(t *testing.T) {
	s := newH2Server()
	defer s.close()
	addr := s.srv.Listener.Addr().String()
	h := sha256.Sum256([]byte(payload))
	wantSum := hex.EncodeToString(h[:8])

	var table strings.Builder
	var heads []string
	for _, k := range h2Kinds {
		heads = append(heads, k.name)
	}
	fmt.Fprintf(&table, "| server | %s |\n|---|%s\n", strings.Join(heads, " | "), strings.Repeat("---|", len(h2Kinds)))
	for _, f := range h2Faults {
		row := []string{f.name}
		for i, k := range h2Kinds {
			s.reset(f.script...)
			var base http.RoundTripper
			tr := s.srv.Client().Transport.(*http.Transport).Clone()
			if f.base != "" {
				base = connBase{addr: addr, tr: tr, xnet: f.base == "x/net"}
			} else {
				base = tr
			}
			m := retryhttp.NewMetrics()
			rt := retryhttp.New(base, append([]retryhttp.Option{retryhttp.WithMetrics(m),
				retryhttp.WithBackoff(retryhttp.Constant(10 * time.Millisecond)), retryhttp.WithoutBudget(),
				retryhttp.WithoutRetryBreaker()}, k.opts...)...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := rt.RoundTrip(k.req("https://" + addr + "/").WithContext(ctx))
			outcome := ""
			if err != nil {
				outcome = "error"
				var re *retryhttp.Error
				if f.handled[i] == 0 && (!errors.As(err, &re) || re.Reason != retryhttp.GiveUpBody) {
					t.Errorf("%s, %s: %v, want a give-up for the body", f.name, k.name, err)
				}
			} else {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				outcome = fmt.Sprint(resp.StatusCode)
				if resp.StatusCode != 200 || string(body) != "ok" {
					t.Errorf("%s, %s: %d %q, want 200 ok", f.name, k.name, resp.StatusCode, body)
				}
			}
			cancel()
			tr.CloseIdleConnections()

			sent := int(sum(t, m, "retryhttp_attempts_total"))
			s.mu.Lock()
			got, streams := s.seen, s.streams
			s.mu.Unlock()
			if sent != f.sent[i] || len(got) != f.handled[i] {
				t.Errorf("%s, %s: %d attempts sent, %d processed; want %d, %d", f.name, k.name, sent, len(got), f.sent[i], f.handled[i])
			}
			for _, g := range got {
				if k.name != "GET" && g.sum != wantSum {
					t.Errorf("%s, %s: the server processed a body other than the caller's", f.name, k.name)
				}
				if strings.Contains(k.name, "injected key") && g.key == "" {
					t.Errorf("%s, %s: processed without its key", f.name, k.name)
				}
			}
			row = append(row, fmt.Sprintf("%s; %d sent, %d streams, %d processed", outcome, sent, streams, len(got)))
		}
		fmt.Fprintf(&table, "| %s |\n", strings.Join(row, " | "))
	}
	t.Log("\n" + table.String())
	if !t.Failed() {
		head := "Made by `make conformance-update`: an HTTP/2 server over TLS written with golang.org/x/net/http2's Framer, " +
			"which refuses the request's first stream or answers it with a GOAWAY, then answers 200. " +
			"Each cell: what the caller got; the attempts retryhttp sent (its metrics); the streams the server saw; the requests it processed.\n\n"
		if err := writeSection(t, "results-http2.md", "HTTP/2 conformance results", "conformance-http2", head, table.String()); err != nil {
			t.Fatal(err)
		}
	}
}
