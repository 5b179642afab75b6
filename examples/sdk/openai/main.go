// Command openai wraps the OpenAI Go SDK (openai-go v3) with retryhttp.
// A chat completion is a POST that the caller may declare safe to repeat
// (a failed completion produced nothing to keep); retryhttp.Idempotent(ctx)
// does so for one call. The SDK's own retries are off
// (option.WithMaxRetries(0)), so that one layer retries, and the
// retry-after-ms header that OpenAI sends with a 429 is honoured. It runs
// against a fake API on loopback that answers the first request 429 with
// retry-after-ms: 300, and prints the attempts and the wait.
//
//	cd examples/sdk && go run ./openai
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

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/retryhttp/retryhttp"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// fakeOpenAI answers its first chat completion 429 with retry-after-ms.
type fakeOpenAI struct {
	mu   sync.Mutex
	seen []time.Time
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, time.Now())
	n := len(f.seen)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if n == 1 {
		w.Header().Set("Retry-After-Ms", "300")
		w.Header().Set("X-Ratelimit-Remaining-Requests", "0")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
		return
	}
	io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o",`+
		`"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hello!"}}]}`)
}

// newClient returns an OpenAI client whose requests go through retryhttp,
// with the SDK's retries off.
func newClient(baseURL string, opts ...retryhttp.Option) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(baseURL),
		option.WithAPIKey("sk-example"),
		option.WithHTTPClient(&http.Client{Transport: retryhttp.New(nil, opts...)}),
		option.WithMaxRetries(0), // retryhttp retries; the SDK does not
	)
}

func run(w io.Writer) error {
	fake := &fakeOpenAI{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	client := newClient(srv.URL+"/v1/", retryhttp.WithBackoff(retryhttp.Constant(time.Millisecond)))
	ctx := retryhttp.Idempotent(context.Background()) // this completion may be asked again
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "gpt-4o", // any model: the fake answers all
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
	})
	if err != nil {
		return fmt.Errorf("chat completion: %w", err)
	}
	fake.mu.Lock()
	seen := append([]time.Time(nil), fake.seen...)
	fake.mu.Unlock()
	wait := seen[len(seen)-1].Sub(seen[0])
	fmt.Fprintf(w, "chat completion: %q after %d attempts; waited at least retry-after-ms: %v\n",
		resp.Choices[0].Message.Content, len(seen), wait >= 300*time.Millisecond)
	return nil
}
