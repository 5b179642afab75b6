// Command minio wraps minio-go (v7.4) with retryhttp. minio-go retries by
// itself: MaxRetries is its attempts in all, and 0 (the zero value) means
// its default of 10, on 408, 429, 5xx, S3 error codes such as SlowDown
// whatever the status, and connection errors. So MaxRetries: 1 turns its
// retries off, and retryhttp retries (it still sleeps up to 200 ms after a
// failure before giving up). A PUT's body over plain HTTP is signed in
// chunks and has no GetBody: retryhttp keeps up to WithBodyBufferLimit of
// it to send again, and sends a larger part once. minio-go's requests
// say nothing of being retries, so with its retries left on retryhttp
// cannot tell them from new calls: turn them off. Against a fake S3 on
// loopback that answers each path 503 SlowDown once, a put, a stat and a
// get each succeed after two sends.
//
//	cd examples/sdk && go run ./minio
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/retryhttp/retryhttp"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// fakeS3 answers the first failFirst requests of each method and path
// 503 SlowDown (every one, if failFirst < 0), and counts them.
type fakeS3 struct {
	failFirst int
	mu        sync.Mutex
	seen      map[string]int
}

const object = "hello"

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	key := r.Method + " " + r.URL.Path
	f.seen[key]++
	n := f.seen[key]
	f.mu.Unlock()
	if f.failFirst < 0 || n <= f.failFirst {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>`)
		return
	}
	w.Header().Set("ETag", `"5d41402abc4b2a76b9719d911017c592"`)
	w.Header().Set("Last-Modified", "Mon, 07 Dec 2026 10:00:00 GMT")
	if r.Method == http.MethodPut {
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", fmt.Sprint(len(object)))
	if r.Method == http.MethodGet {
		io.WriteString(w, object)
	}
}

func (f *fakeS3) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[key]
}

// newClient returns a MinIO client for the server at rawURL whose requests
// go through retryhttp, with minio-go's own retries off.
func newClient(rawURL string, opts ...retryhttp.Option) (*minio.Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return minio.New(u.Host, &minio.Options{
		Creds:      credentials.NewStaticV4("AKIDEXAMPLE", "example-secret", ""),
		Region:     "us-east-1", // stated: no GetBucketLocation call first
		Transport:  retryhttp.New(nil, opts...),
		MaxRetries: 1, // one attempt: minio-go's retries off (0 means its default, 10)
	})
}

func run(w io.Writer) error {
	fake := &fakeS3{failFirst: 1, seen: map[string]int{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	client, err := newClient(srv.URL)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := client.PutObject(ctx, "reports", "daily.txt", bytes.NewReader([]byte(object)), int64(len(object)), minio.PutObjectOptions{}); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	if _, err := client.StatObject(ctx, "reports", "daily.txt", minio.StatObjectOptions{}); err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	obj, err := client.GetObject(ctx, "reports", "daily.txt", minio.GetObjectOptions{})
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	body, err := io.ReadAll(obj)
	obj.Close()
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	fmt.Fprintf(w, "put after %d sends, stat after %d, get %q after %d\n",
		fake.count("PUT /reports/daily.txt"), fake.count("HEAD /reports/daily.txt"), body, fake.count("GET /reports/daily.txt"))
	return nil
}
