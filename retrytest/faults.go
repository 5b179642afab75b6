// This file holds the network faults that a Reply can inject, and
// RefusedAddr for a connection that is refused. Every fault is bounded in
// time, so that a test using one cannot hang.

package retrytest

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// A Fault makes a Server fail an answer the way a network does. The
// Faults are the values and functions of this package.
type Fault interface {
	inject(w http.ResponseWriter, r *http.Request, reply Reply)
	String() string
}

type fault struct {
	name string
	f    func(w http.ResponseWriter, r *http.Request, reply Reply)
}

func (f *fault) inject(w http.ResponseWriter, r *http.Request, reply Reply) { f.f(w, r, reply) }
func (f *fault) String() string                                             { return f.name }

var (
	// Reset resets the connection (TCP RST) before any byte of the
	// response. Over HTTP/2 it resets the stream.
	Reset Fault = &fault{"reset", func(w http.ResponseWriter, r *http.Request, _ Reply) {
		conn, _ := hijack(w)
		resetConn(conn)
	}}

	// ResetAfterHeaders sends the status line, the headers and half of the
	// body (at least 2 bytes are declared), then resets the connection.
	// Over HTTP/2 it resets the stream after the headers.
	ResetAfterHeaders Fault = &fault{"reset after headers", func(w http.ResponseWriter, r *http.Request, reply Reply) {
		body := reply.Body
		if len(body) < 2 {
			body = "partial body"
		}
		if _, ok := w.(http.Hijacker); !ok || r.ProtoMajor != 1 {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(status(reply))
			w.Write([]byte(body[:len(body)/2]))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		conn, rw := hijack(w)
		fmt.Fprintf(rw, "HTTP/1.1 %d %s\r\nContent-Length: %d\r\n\r\n%s",
			status(reply), http.StatusText(status(reply)), len(body), body[:len(body)/2])
		rw.Flush()
		resetConn(conn)
	}}

	// Hang accepts the request and never answers, until the client gives
	// up or 30 seconds pass.
	Hang Fault = &fault{"hang", func(w http.ResponseWriter, r *http.Request, _ Reply) {
		t := time.NewTimer(maxFaultWait)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-t.C:
		}
	}}

	// CloseAfterReply sends the whole reply, then closes the connection
	// without saying so (no "Connection: close"), as a server that drops
	// idle keep-alive connections does.
	CloseAfterReply Fault = &fault{"close after reply", func(w http.ResponseWriter, r *http.Request, reply Reply) {
		if _, ok := w.(http.Hijacker); !ok || r.ProtoMajor != 1 {
			writeReply(w, reply)
			return
		}
		conn, rw := hijack(w)
		fmt.Fprintf(rw, "HTTP/1.1 %d %s\r\nContent-Length: %d\r\n\r\n%s",
			status(reply), http.StatusText(status(reply)), len(reply.Body), reply.Body)
		rw.Flush()
		conn.Close()
	}}
)

// SlowBody sends the headers at once, then the body one byte every
// interval, until it is done, the client goes away, or 30 seconds pass.
func SlowBody(interval time.Duration) Fault {
	return &fault{"slow body", func(w http.ResponseWriter, r *http.Request, reply Reply) {
		w.Header().Set("Content-Length", strconv.Itoa(len(reply.Body)))
		w.WriteHeader(status(reply))
		w.(http.Flusher).Flush()
		deadline := time.Now().Add(maxFaultWait)
		for i := 0; i < len(reply.Body) && time.Now().Before(deadline); i++ {
			t := time.NewTimer(interval)
			select {
			case <-r.Context().Done():
				t.Stop()
				return
			case <-t.C:
			}
			if _, err := w.Write([]byte{reply.Body[i]}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}}
}

func status(reply Reply) int {
	if reply.Status == 0 {
		return http.StatusOK
	}
	return reply.Status
}

// hijack takes the connection over, or aborts the handler (which resets an
// HTTP/2 stream) where that is not possible.
func hijack(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	return conn, rw
}

// resetConn closes conn with a TCP RST rather than a FIN.
func resetConn(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// RefusedAddr returns a loopback address ("127.0.0.1:port") where nothing
// listens, so that a connection to it is refused: it listens on a free
// port and closes the listener at once.
func RefusedAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}
