package replay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
)

// capture runs a tee as the first attempt would (the base reads the body
// to its end and closes it), then takes the whole body for a retry.
func capture(body io.ReadCloser, declared, limit int64, baseReads bool) (Chunks, error) {
	tee := NewTee(body, declared, limit)
	if baseReads {
		io.Copy(io.Discard, tee)
	}
	tee.Close()
	cs, err := tee.Rest(context.Background())
	tee.Release()
	return cs, err
}

// A body of declared length is kept in few Chunks (they double), holding
// exactly its length: nothing beyond it, nothing ahead of what arrived.
func TestTeeDeclaredLengthFewChunks(t *testing.T) {
	payload := make([]byte, 100000)
	cs, err := capture(io.NopCloser(bytes.NewReader(payload)), int64(len(payload)), 1<<20, true)
	var held int
	for _, c := range cs {
		held += cap(c)
	}
	if err != nil || len(cs) > 10 || held != len(payload) {
		t.Errorf("capture = %d Chunks holding %d bytes, %v; want at most 10 Chunks of exactly %d bytes in all", len(cs), held, err, len(payload))
	}
}

func TestTeeEdges(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		declared int64
		limit    int64
		wantBuf  string
		wantErr  error
	}{
		{"declared, exact", "hello", 5, 10, "hello", nil},
		{"declared, shorter", "hel", 5, 10, "hel", nil},
		{"declared, longer", "hello!!", 5, 10, "hello!!", nil},
		{"unknown, fits", "hello", -1, 10, "hello", nil},
		{"unknown, exactly the limit", "hello", 0, 5, "hello", nil},
		{"unknown, over the limit", "hello world", 0, 5, "", ErrTooLong},
		{"limit 0, empty", "", 0, 0, "", nil},
	}
	for _, tt := range tests {
		for _, baseReads := range []bool{true, false} {
			body := &opaqueBody{r: strings.NewReader(tt.body)}
			cs, err := capture(body, tt.declared, tt.limit, baseReads)
			if err != tt.wantErr || string(bytes.Join(cs, nil)) != tt.wantBuf || !body.closed.Load() {
				t.Errorf("%s (base reads %v): kept %q, %v (closed %v); want %q, %v, closed", tt.name, baseReads,
					bytes.Join(cs, nil), err, body.closed.Load(), tt.wantBuf, tt.wantErr)
			}
		}
	}
	stuck := &opaqueBody{r: zeroReader{}}
	if _, err := capture(stuck, -1, 10, false); !errors.Is(err, io.ErrNoProgress) {
		t.Errorf("a reader that returns nothing: %v, want io.ErrNoProgress", err)
	}
}

// A body of unknown length is kept in Chunks that are never copied: the
// memory they hold is within 4 KiB or a twelfth of the body's (the unused
// end of the last chunk), whatever its size, and replaying it gives the
// same bytes.
func TestTeeUnknownLengthOneCopy(t *testing.T) {
	for _, n := range []int{1, 511, 512, 1000, 64 << 10, 1<<20 + 3} {
		payload := bytes.Repeat([]byte("abcdefg"), n/7+1)[:n]
		cs, err := capture(io.NopCloser(struct{ io.Reader }{bytes.NewReader(payload)}), -1, 2<<20, true)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got, _ := io.ReadAll(NewReader(cs))
		var w bytes.Buffer
		io.Copy(&w, NewReader(cs))
		if !bytes.Equal(got, payload) || !bytes.Equal(w.Bytes(), payload) {
			t.Errorf("%d bytes: replayed %d and %d bytes that differ", n, len(got), w.Len())
		}
		held := 0
		for _, c := range cs {
			held += cap(c)
		}
		if limit := n + max(n/12, 4<<10); held > limit {
			t.Errorf("%d bytes: Chunks hold %d bytes, want at most %d", n, held, limit)
		}
	}
}

// BenchmarkTeeUnknownLength measures the bytes allocated to keep a 64 KiB
// body of unknown length while a base reads it: about 1.1 times the body.
func BenchmarkTeeUnknownLength(b *testing.B) {
	payload := make([]byte, 64<<10)
	r := bytes.NewReader(payload)
	body := io.NopCloser(struct{ io.Reader }{r})
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		r.Reset(payload)
		capture(body, -1, 1<<20, true)
	}
}

// opaqueBody is a caller's body of unknown kind, which says whether it
// was closed.
type opaqueBody struct {
	r      io.Reader
	closed atomic.Bool
}

func (b *opaqueBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *opaqueBody) Close() error { b.closed.Store(true); return nil }

// zeroReader reads nothing, for ever.
type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }
