// Command slack wraps slack-go (v0.36) with retryhttp. slack-go retries
// nothing unless OptionRetry is given (leave it out: retryhttp retries),
// and sends every call, reads included, as a form POST with the token in
// the body, which retryhttp does not repeat once it reached the server.
// Slack answers a call it will not run with 429 and Retry-After: the
// request was not processed. Declared with WithUnprocessedStatuses(429),
// such a 429 is retried after its wait, whatever the method, while a 500
// of a POST is not (the message may have been posted). Against a fake
// Slack on loopback that answers chat.postMessage 429 with Retry-After: 1
// once, the message is posted once, after two sends.
//
//	cd examples/sdk && go run ./slack
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

	"github.com/retryhttp/retryhttp"
	"github.com/slack-go/slack"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// fakeSlack answers chat.postMessage with first (429 with Retry-After: 1,
// or another status) once, then posts: it counts sends and messages.
type fakeSlack struct {
	first        int
	mu           sync.Mutex
	sends, posts int
}

func (f *fakeSlack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends++
	if f.sends == 1 && f.first != 0 {
		if f.first == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1") // not processed: try again in a second
		}
		w.WriteHeader(f.first)
		return
	}
	f.posts++
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true,"channel":"C1","ts":"1700000000.000100"}`)
}

func (f *fakeSlack) counts() (sends, posts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sends, f.posts
}

// newClient returns a Slack client whose calls go through retryhttp, for
// which a 429 means the call was not processed.
func newClient(apiURL string, opts ...retryhttp.Option) *slack.Client {
	opts = append([]retryhttp.Option{retryhttp.WithUnprocessedStatuses(http.StatusTooManyRequests)}, opts...)
	hc := &http.Client{Transport: retryhttp.New(nil, opts...)}
	return slack.New("xoxb-example", slack.OptionHTTPClient(hc), slack.OptionAPIURL(apiURL))
}

// post posts one message through a fake Slack that answers its first
// send with first, and reports the sends and the messages posted.
func post(first int) (sends, posts int, err error) {
	fake := &fakeSlack{first: first}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	_, _, err = newClient(srv.URL+"/api/").PostMessageContext(context.Background(), "C1", slack.MsgOptionText("deploy done", false))
	sends, posts = fake.counts()
	return sends, posts, err
}

func run(w io.Writer) error {
	sends, posts, err := post(http.StatusTooManyRequests)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "chat.postMessage answered 429 once: %d sends, %d message posted\n", sends, posts)
	sends, posts, err = post(http.StatusInternalServerError)
	fmt.Fprintf(w, "chat.postMessage answered 500 once: %d send, %d posted, the error returned (%v): it may have posted\n", sends, posts, err != nil)
	return nil
}
