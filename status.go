// This file decides which outcomes of an attempt are worth retrying
// (classify): status codes (statusSet), the server's say (should-retry
// headers, throttles) and transport errors (classifyError), and the user's
// own condition (WithRetryIf): the Decision it returns, and the body it
// may read without taking it from the caller. Whether the request itself
// may be sent again is attempt.go's key and idempotency.go's business; the method gate that
// WithRetryIf cannot lift is in decide.go.

package retryhttp

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"syscall"

	"github.com/retryhttp/retryhttp/internal/admission"
	"github.com/retryhttp/retryhttp/internal/ratelimit"
)

// statusSet is a set of HTTP status codes 0..1023 as a bitmap, so that a
// lookup costs no allocation and no hashing.
type statusSet [16]uint64

func (s *statusSet) add(code int) { s[code>>6] |= 1 << (uint(code) & 63) }

func (s *statusSet) has(code int) bool {
	return code >= 0 && code < 1024 && s[code>>6]&(1<<(uint(code)&63)) != 0
}

// defaultStatuses: 408, 429 and every 5xx but the permanent ones. 501 Not
// Implemented, 505 HTTP Version Not Supported, 506 Variant Also Negotiates,
// 508 Loop Detected, 510 Not Extended and 511 Network Authentication
// Required will answer the same way however often they are asked.
var defaultStatuses = func() statusSet {
	var s statusSet
	s.add(408)
	s.add(429)
	for c := 500; c < 600; c++ {
		switch c {
		case 501, 505, 506, 508, 510, 511:
		default:
			s.add(c)
		}
	}
	return s
}()

// statusConflict is retried only for a request that carries an idempotency
// key: the IETF Idempotency-Key draft answers 409 while the original request
// with the same key is still being processed.
const statusConflict = 409

// errClass says what a transport error means for a retry.
type errClass uint8

const (
	// errRetryable: a transient failure (reset, refused, EOF, timeout, HTTP/2
	// stream reset or GOAWAY, ...). Whether the request may be sent again
	// is neverSent's and idempotency.go's business.
	errRetryable errClass = iota
	// errPermanent: asking again gives the same answer (certificate
	// verification, a TLS or DNS answer that says no, a malformed request).
	errPermanent
)

// classifyError sorts a transport error. The list of permanent errors is
// closed and checked by type with errors.As, never by matching message
// text; everything else a transport returns is taken as transient, because
// net/http reports HTTP/2 stream resets and GOAWAY with unexported types.
// The caller's own cancellation is handled before this is called.
//
// An error of a request whose header h net/http refuses is permanent:
// net/http reports that with an untyped error, so the header is checked
// instead, on the failure path only.
func classifyError(h http.Header, err error) errClass {
	if h != nil && !validHeader(h) {
		return errPermanent
	}
	var (
		verr  *tls.CertificateVerificationError
		uae   x509.UnknownAuthorityError
		herr  x509.HostnameError
		cie   x509.CertificateInvalidError
		sre   x509.SystemRootsError
		rhe   tls.RecordHeaderError
		alert tls.AlertError
		dns   *net.DNSError
		aerr  *net.AddrError
	)
	switch {
	case errors.As(err, &verr), errors.As(err, &uae), errors.As(err, &herr),
		errors.As(err, &cie), errors.As(err, &sre):
		return errPermanent
	case errors.As(err, &rhe): // TLS spoken to a server that does not speak it
		return errPermanent
	case errors.As(err, &alert): // the server refused the handshake
		return errPermanent
	case errors.As(err, &dns) && dns.IsNotFound:
		return errPermanent
	case errors.As(err, &aerr): // a malformed address
		return errPermanent
	}
	return errRetryable
}

// isDialError reports whether err says that no connection was established,
// so that no byte of the request can have reached the server.
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect") {
		return true
	}
	var dns *net.DNSError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dns)
}

// h2RefusedStream is HTTP/2's error code REFUSED_STREAM (RFC 9113 §7).
const h2RefusedStream = 0x7

// h2GoAwayText is the whole message of the error with which the HTTP/2
// transport of net/http (and of golang.org/x/net/http2) ends a request that
// a GOAWAY left unprocessed. It is an unexported errors.New value, so its
// text, compared whole, is the only sign of it; if it ever changes, such a
// request is handled as after any other transport error, which is safe.
const h2GoAwayText = "http2: Transport received Server's graceful shutdown GOAWAY"

// errorsNewType is the type of errors.New's values: only an error of that
// type is asked for its text.
var errorsNewType = reflect.TypeOf(errors.New(""))

// unprocessed reports whether err is HTTP/2's word that the server did not
// process the request, so that it may be sent again whatever its method
// (RFC 9113 §8.7): its stream was refused with REFUSED_STREAM, or a GOAWAY
// named a last stream below it. net/http's HTTP/2 transport resends such a
// request itself when it can rewind the body (retryhttp gives it the means,
// see send); this sees what reaches the Transport all the same: the error
// after net/http's own tries are spent, and the error of a base that does
// not resend, such as an http.ClientConn. Failure path
// only: it uses reflection.
func unprocessed(err error) bool {
	for i := 0; err != nil && i < 16; i++ { // a chain of wrappers, bounded
		if refusedStream(err) || reflect.TypeOf(err) == errorsNewType && err.Error() == h2GoAwayText {
			return true
		}
		err = errors.Unwrap(err)
	}
	return false
}

// refusedStream reports whether err is an HTTP/2 stream error with the code
// REFUSED_STREAM: net/http's http2StreamError, or a StreamError of a
// package named http2 (golang.org/x/net/http2's, a vendored copy's), all
// structs with a Code field.
func refusedStream(err error) bool {
	v := reflect.ValueOf(err)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return false
	}
	t := v.Type()
	switch {
	case t.PkgPath() == "net/http" && t.Name() == "http2StreamError":
	case t.Name() == "StreamError" && (t.PkgPath() == "http2" || strings.HasSuffix(t.PkgPath(), "/http2")):
	default:
		return false
	}
	code := v.FieldByName("Code")
	return code.IsValid() && code.CanUint() && code.Uint() == h2RefusedStream
}

// outcomeID names the outcome of an attempt with a small integer, so that
// metrics can index their series by it: a status code 100..999 stands for
// itself, 0 for any other code, and the values from outcomeError up for the
// classes of transport error.
type outcomeID uint16

const (
	outcomeOther outcomeID = 0
	outcomeError outcomeID = 1000 + iota
	outcomeTimeout
	outcomeCanceled
	outcomeRefused
	outcomeReset
	outcomeEOF
	numOutcomes
)

var errorLabels = [...]string{"error", "timeout", "canceled", "refused", "reset", "eof"}

// String returns the label value: the status code ("503"), "other", or the
// error class.
func (o outcomeID) String() string {
	switch {
	case o >= outcomeError && o < numOutcomes:
		return errorLabels[o-outcomeError]
	case o >= 100 && o < 1000:
		return codeLabels[o]
	}
	return "other"
}

// classify sorts what an attempt ended with into r: a response by its
// status (its outcome, the status code), an error by its class.
func (k *call) classify(r *result, resp *http.Response, err error, timedOut bool) {
	*r = result{resp: resp, err: err}
	if err == nil {
		r.outcome = outcomeOther
		if code := resp.StatusCode; code >= 100 && code < 1000 {
			r.outcome = outcomeID(code)
		}
		r.retryable = k.retryableResponse(resp)
		r.declined = r.retryable && k.c.unprocessed.has(resp.StatusCode)
	} else {
		r.outcome = errorOutcome(err, timedOut)
		r.retryable = k.ctx.Err() == nil && classifyError(k.header0(), err) == errRetryable &&
			!k.lengthMismatch()
		// Nothing was processed if no connection was had (the trace, for
		// a request where it matters, saw none, and the error says so) or
		// if HTTP/2 says so.
		r.notSent = r.retryable && k.neverSent(err)
	}
	if k.c.retryIf != nil {
		k.applyRetryIf(r)
	}
}

// retryableResponse reports whether a response is worth retrying for this
// request: by its status (a 409 for a keyed request, unless the statuses
// are the user's), unless the server says otherwise (the should-retry
// headers of internal/vendors: x-should-retry, Stripe-Should-Retry), or a
// 403 that is a throttle. A success looks at nothing but its status.
func (k *call) retryableResponse(resp *http.Response) bool {
	c, code := k.c, resp.StatusCode
	if code >= 400 {
		if retry, said := ratelimit.ShouldRetry(resp.Header); said {
			return retry
		}
	}
	if c.statuses.has(code) || (code == statusConflict && k.keyed && !c.customStatuses) {
		return true
	}
	return code >= 400 && (c.unprocessed.has(code) || ratelimit.Throttled(code, resp.Header))
}

// errorOutcome classifies an attempt that ended in err (a response's
// outcome is its status code, classify's). The class of an error is its
// low-cardinality kind, never its text, which may carry a URL.
func errorOutcome(err error, attemptTimedOut bool) outcomeID {
	var ne net.Error
	switch {
	case attemptTimedOut:
		return outcomeTimeout
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return outcomeCanceled
	case errors.Is(err, syscall.ECONNREFUSED), unprocessed(err):
		return outcomeRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return outcomeReset
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return outcomeEOF
	case errors.As(err, &ne) && ne.Timeout():
		return outcomeTimeout
	}
	return outcomeError
}

// validHeader reports whether net/http would send h: every name a token,
// every value free of control characters other than horizontal tab.
func validHeader(h http.Header) bool {
	for k, vv := range h {
		if !validHeaderName(k) {
			return false
		}
		for _, v := range vv {
			for i := 0; i < len(v); i++ {
				if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
					return false
				}
			}
		}
	}
	return true
}

// A Decision is what a condition given to WithRetryIf says of an attempt.
type Decision int8

const (
	// NoOpinion leaves the decision to the built-in rules (status codes
	// and transport errors, status.go): the condition has nothing to say
	// of this attempt.
	NoOpinion Decision = iota
	// Retry says the attempt failed in a way worth retrying. The request
	// is still retried only if it may be repeated (its method, its key)
	// and the policy lets it (attempts, deadline, budget, breaker).
	Retry
	// DontRetry says the attempt's outcome is final: it is returned as is.
	DontRetry
)

// WithRetryIf sets a condition that refines, attempt by attempt, what is
// worth retrying: it may widen the built-in rules (a 403 whose body says
// "try again") or narrow them. It never lifts the method gate, nor retries
// a request whose context is done. f runs on the goroutine of RoundTrip
// with the attempt's response (nil on an error) and error; it may read
// the body, which the caller still reads whole (docs/retries.md), but
// not close it. The default is none.
func WithRetryIf(f func(resp *http.Response, err error) Decision) RequestOption {
	return requestOption("WithRetryIf", func(c *config) error {
		c.retryIf = f
		return nil
	})
}

// applyRetryIf lets the user's condition refine r's classification.
func (k *call) applyRetryIf(r *result) {
	var peek *peekBody
	if r.resp != nil && r.resp.Body != nil && r.resp.Body != http.NoBody {
		peek = &peekBody{body: r.resp.Body}
		r.resp.Body = peek
	}
	d := k.c.retryIf(r.resp, r.err)
	if peek != nil {
		r.resp.Body = peek.rewound()
	}
	switch d {
	case Retry:
		r.retryable = k.ctx.Err() == nil
		if r.err != nil {
			r.notSent = r.retryable && k.neverSent(r.err)
		}
	case DontRetry:
		r.retryable, r.notSent = false, false
	}
}

// peekBody records what a condition reads of a response body, so that the
// caller can be given the whole body afterwards.
type peekBody struct {
	body io.ReadCloser
	read bytes.Buffer
}

func (p *peekBody) Read(b []byte) (int, error) {
	n, err := p.body.Read(b)
	p.read.Write(b[:n])
	return n, err
}

func (p *peekBody) Close() error { return nil } // the body is not the condition's to close

// rewound returns the body as the caller must see it: the original if
// nothing was read, else what was read followed by the rest.
func (p *peekBody) rewound() io.ReadCloser {
	if p.read.Len() == 0 {
		return p.body
	}
	return &prefixedBody{Reader: io.MultiReader(&p.read, p.body), Closer: p.body}
}

type prefixedBody struct {
	io.Reader
	io.Closer
}

// codeLabels are the status-code label values, made once.
var codeLabels = func() (l [1000]string) {
	for i := 100; i < len(l); i++ {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

// told fills o, a zero Outcome, with what admission is told of an
// attempt that ended with r: an answer, a fresh failure (one worth
// retrying that reached the host, a refused connection, which reached no
// application but says that the host serves no one, or a status by which
// the host turned it away, 429, 502, 503 or 504, even one the caller does
// not retry: the host's health is the host's word, not the caller's
// wish), and, for the pacers, whether it reached the host, whether it was
// rejected (the host turned it away, or could not take it: those
// statuses, a timeout, the attempt's or its context's deadline, or a
// connection error; any other answer, a 500 included, was served; a
// request its caller canceled says nothing), and what the answer said.
func (r *result) told(o *admission.Outcome) {
	// Field by field, into the caller's zero o: no copy of a temporary.
	if r.resp != nil {
		code := r.resp.StatusCode
		o.Rejected = code == http.StatusTooManyRequests || (code >= http.StatusBadGateway && code <= http.StatusGatewayTimeout)
		o.Failed, o.Sent, o.Header, o.Status = r.retryable || o.Rejected, true, r.resp.Header, code
		o.Answered = r.err == nil && !o.Failed
		return
	}
	o.Answered = r.err == nil && !r.retryable
	canceled := r.outcome == outcomeCanceled && !errors.Is(r.err, context.DeadlineExceeded)
	o.Failed = r.retryable && (!r.notSent || isDialError(r.err))
	o.Sent, o.Canceled, o.Rejected = !r.notSent && !canceled, canceled, r.err != nil && !canceled
}
