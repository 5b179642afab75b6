// Command anthropic wraps the Anthropic Go SDK (anthropic-sdk-go v1.84)
// with retryhttp. A message is a POST that the caller may declare safe to
// repeat (a failed one produced nothing to keep): retryhttp.Idempotent(ctx)
// does so for one call. The SDK's own retries are off
// (option.WithMaxRetries(0)), so that one layer retries. Anthropic may
// answer a 429 with no Retry-After, only the time each exhausted limit
// resets (anthropic-ratelimit-requests-reset, RFC 3339): retryhttp waits
// for it. It runs against a fake API on loopback that answers the first
// request so, its requests limit resetting 2 s later.
//
//	cd examples/sdk && go run ./anthropic
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/retryhttp/retryhttp"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// fakeAnthropic answers its first message 429, with only the reset time
// of the requests limit, and the next ones with a message.
type fakeAnthropic struct {
	mu    sync.Mutex
	seen  []time.Time
	reset time.Time
}

func (f *fakeAnthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, time.Now())
	n := len(f.seen)
	if n == 1 {
		// Whole seconds, as RFC 3339 writes them: at least 1 s away.
		f.reset = time.Now().Add(2 * time.Second).Truncate(time.Second)
	}
	reset := f.reset
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if n == 1 {
		w.Header().Set("Anthropic-Ratelimit-Requests-Remaining", "0")
		w.Header().Set("Anthropic-Ratelimit-Requests-Reset", reset.UTC().Format(time.RFC3339))
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`)
		return
	}
	io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-5-5",`+
		`"content":[{"type":"text","text":"Hello!"}],"stop_reason":"end_turn","stop_sequence":null,`+
		`"usage":{"input_tokens":3,"output_tokens":2}}`)
}

// newClient returns an Anthropic client whose requests go through
// retryhttp, with the SDK's retries off.
func newClient(baseURL string, opts ...retryhttp.Option) anthropic.Client {
	return anthropic.NewClient(
		option.WithBaseURL(baseURL),
		option.WithAPIKey("sk-ant-example"),
		option.WithHTTPClient(&http.Client{Transport: retryhttp.New(nil, opts...)}),
		option.WithMaxRetries(0), // retryhttp retries; the SDK does not
	)
}

func run(w io.Writer) error {
	fake := &fakeAnthropic{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	client := newClient(srv.URL, retryhttp.WithBackoff(retryhttp.Constant(time.Millisecond)))
	ctx := retryhttp.Idempotent(context.Background()) // this message may be asked again
	msg, err := client.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     "claude-sonnet-5-5", // any model: the fake answers all
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
	})
	if err != nil {
		return fmt.Errorf("message: %w", err)
	}
	fake.mu.Lock()
	seen, reset := append([]time.Time(nil), fake.seen...), fake.reset
	fake.mu.Unlock()
	fmt.Fprintf(w, "message: %q after %d attempts; the retry waited for the limit's reset: %v\n",
		msg.Content[0].Text, len(seen), !seen[len(seen)-1].Before(reset))
	return nil
}
