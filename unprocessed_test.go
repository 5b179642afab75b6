package retryhttp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// h2Peer is a minimal HTTP/2 server (prior knowledge, no TLS) on one end of
// a net.Pipe, so that net/http's own HTTP/2 transport can be driven in
// virtual time: it resets the first refuse streams with REFUSED_STREAM (or
// code), or answers them with a GOAWAY below them if goAway is set, and
// answers 200 to
// the rest once their body has arrived. Frames are written by hand (RFC 9113
// §4.1, §6): the only header block it sends is ":status: 200", which HPACK
// encodes as the one byte 0x88.
type h2Peer struct {
	refuse int
	goAway bool
	code   byte // the stream error code of a refusal; REFUSED_STREAM if 0

	mu        sync.Mutex
	streams   int
	processed [][]byte   // the bodies of the requests answered
	conns     []net.Conn // the client ends, closed by close
}

// close closes every connection: net/http may still hold one that is not
// idle, and a synctest bubble must end with no goroutine left.
func (p *h2Peer) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

const (
	h2Data, h2Headers, h2RST, h2Settings, h2Ping, h2GoAway, h2Window = 0, 1, 3, 4, 6, 7, 8
	h2EndStream, h2EndHeaders, h2Ack                                 = 1, 4, 1
)

// h2Frame encodes a frame.
func h2Frame(typ, flags byte, id uint32, payload []byte) []byte {
	h := make([]byte, 9, 9+len(payload))
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = typ, flags
	binary.BigEndian.PutUint32(h[5:], id)
	return append(h, payload...)
}

func (p *h2Peer) serve(c net.Conn) {
	defer c.Close()
	// A pipe has no buffer: frames are written by a goroutine of their
	// own, so that both ends may write at once.
	out := make(chan []byte, 64)
	defer close(out)
	go func() {
		for b := range out {
			if _, err := c.Write(b); err != nil {
				c.Close()
			}
		}
	}()
	send := func(typ, flags byte, id uint32, payload []byte) error {
		out <- h2Frame(typ, flags, id, payload)
		return nil
	}
	preface := make([]byte, 24)
	if _, err := io.ReadFull(c, preface); err != nil || !strings.HasPrefix(string(preface), "PRI * HTTP/2.0") {
		return
	}
	if send(h2Settings, 0, 0, nil) != nil {
		return
	}
	open := map[uint32]*bytes.Buffer{}
	answer := func(id uint32, body []byte) error {
		p.mu.Lock()
		p.processed = append(p.processed, body)
		p.mu.Unlock()
		return send(h2Headers, h2EndHeaders|h2EndStream, id, []byte{0x88})
	}
	head := make([]byte, 9)
	for {
		if _, err := io.ReadFull(c, head); err != nil {
			return
		}
		n := int(head[0])<<16 | int(head[1])<<8 | int(head[2])
		typ, flags, id := head[3], head[4], binary.BigEndian.Uint32(head[5:])&0x7fffffff
		payload := make([]byte, n)
		if _, err := io.ReadFull(c, payload); err != nil {
			return
		}
		var err error
		switch typ {
		case h2Settings:
			if flags&h2Ack == 0 {
				err = send(h2Settings, h2Ack, 0, nil)
			}
		case h2Ping:
			if flags&h2Ack == 0 {
				err = send(h2Ping, h2Ack, 0, payload)
			}
		case h2Headers:
			p.mu.Lock()
			p.streams++
			refused := p.streams <= p.refuse
			p.mu.Unlock()
			switch {
			case refused && p.goAway:
				var b [8]byte // last stream ID (the one before), NO_ERROR
				binary.BigEndian.PutUint32(b[:], max(id, 2)-2)
				err = send(h2GoAway, 0, 0, b[:])
			case refused:
				code := cmp.Or(p.code, 7) // REFUSED_STREAM
				err = send(h2RST, 0, id, []byte{0, 0, 0, code})
			case flags&h2EndStream != 0:
				err = answer(id, nil)
			default:
				open[id] = new(bytes.Buffer)
			}
		case h2Data:
			if n > 0 {
				var b [4]byte
				binary.BigEndian.PutUint32(b[:], uint32(n))
				err = send(h2Window, 0, 0, b[:])
			}
			if body := open[id]; body != nil && err == nil {
				body.Write(payload)
				if flags&h2EndStream != 0 {
					delete(open, id)
					err = answer(id, body.Bytes())
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// h2Base is net/http's transport speaking HTTP/2 to p over pipes.
func h2Base(p *h2Peer) *http.Transport {
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	return &http.Transport{Protocols: &protos, DialContext: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		p.mu.Lock()
		p.conns = append(p.conns, client)
		p.mu.Unlock()
		go p.serve(server)
		return client, nil
	}}
}

// TestHTTP2UnprocessedRetried drives net/http's own HTTP/2 transport against
// a server that refuses streams or sends GOAWAY, in virtual time. net/http
// resends a refused request itself, eight tries over 63 s, then returns its
// error, which retryhttp must see as "not processed" and retry, whatever the
// method. A request left by a GOAWAY net/http resends on a new connection,
// at once and without end (20 GOAWAYs here): retryhttp sees only the answer.
// Either way, the body is the caller's, whole, and is processed once.
func TestHTTP2UnprocessedRetried(t *testing.T) {
	const body = "charge 10 EUR"
	for _, tc := range []struct {
		name    string
		goAway  bool
		refuse  int
		getBody bool // the request has GetBody
		refused int  // attempts that retryhttp saw end refused
	}{
		{"REFUSED_STREAM, GetBody", false, 8, true, 1},
		{"REFUSED_STREAM, chunked", false, 8, false, 1},
		{"GOAWAY, GetBody", true, 20, true, 0},
		{"GOAWAY, chunked", true, 20, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &h2Peer{refuse: tc.refuse, goAway: tc.goAway}
				base := h2Base(p)
				defer p.close()
				defer base.CloseIdleConnections()
				m := NewMetrics()
				tr := New(base, WithMetrics(m), WithBackoff(Constant(time.Second)))
				var rd io.Reader = strings.NewReader(body)
				if !tc.getBody {
					rd = io.NopCloser(rd)
				}
				req, _ := http.NewRequest(http.MethodPost, "http://h2.test/pay", rd)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatalf("RoundTrip: %v", err)
				}
				resp.Body.Close()
				p.mu.Lock()
				defer p.mu.Unlock()
				if p.streams != tc.refuse+1 || len(p.processed) != 1 || string(p.processed[0]) != body {
					t.Errorf("%d streams, %d processed (%q), want %d streams, the body processed once",
						p.streams, len(p.processed), p.processed, tc.refuse+1)
				}
				if got := testutil.ToFloat64(m.attempts.WithLabelValues(defaultName, "refused")); got != float64(tc.refused) {
					t.Errorf("%v attempts ended refused, want %d", got, tc.refused)
				}
			})
		})
	}
}

// TestHTTP2StreamResetNotRetried: a stream reset with another code (here
// CANCEL) may come after the server began processing: net/http does not
// resend, and neither does retryhttp for a bare POST; a GET is retried.
func TestHTTP2StreamResetNotRetried(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		t.Run(method, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &h2Peer{refuse: 1, code: 8} // CANCEL
				base := h2Base(p)
				defer p.close()
				defer base.CloseIdleConnections()
				tr := New(base, WithBackoff(Constant(time.Second)))
				req, _ := http.NewRequest(method, "http://h2.test/pay", strings.NewReader("x"))
				resp, err := tr.RoundTrip(req)
				p.mu.Lock()
				defer p.mu.Unlock()
				if method == http.MethodGet {
					if err != nil || p.streams != 2 {
						t.Fatalf("GET: %v after %d streams, want a response after 2", err, p.streams)
					}
					resp.Body.Close()
					return
				}
				var re *Error
				if !errors.As(err, &re) || re.Reason != GiveUpUnsafeMethod || p.streams != 1 {
					t.Fatalf("POST: %v after %d streams, want a give-up for the method after 1", err, p.streams)
				}
			})
		})
	}
}
