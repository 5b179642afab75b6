// Command azblob wraps the Azure Blob Storage client (azblob v1.8,
// azcore v1.24) with retryhttp. azcore retries by itself, on 408, 429,
// 500, 502, 503, 504 and any transport error, whatever the method, and
// its MaxRetries of 0 (the zero value) means its default, 3 retries: -1
// turns them off. Its retry hints (retry-after-ms, x-ms-retry-after-ms,
// Retry-After) retryhttp reads too. A blob upload is a PUT of the whole
// blob, safe to send again. Against a fake Storage account on loopback
// that answers each path 503 ServerBusy once, an upload and a download
// each succeed after two sends.
//
//	cd examples/sdk && go run ./azblob
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/retryhttp/retryhttp"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// fakeStorage answers the first failFirst requests of each method and
// path 503 ServerBusy (every one, if failFirst < 0), and counts them.
type fakeStorage struct {
	failFirst int
	mu        sync.Mutex
	seen      map[string]int
}

const blob = "quarterly numbers"

func (f *fakeStorage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	key := r.Method + " " + r.URL.Path
	f.seen[key]++
	n := f.seen[key]
	f.mu.Unlock()
	if f.failFirst < 0 || n <= f.failFirst {
		w.Header().Set("x-ms-error-code", "ServerBusy")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>The server is busy.</Message></Error>`)
		return
	}
	w.Header().Set("ETag", `"0x8DB"`)
	w.Header().Set("Last-Modified", "Mon, 07 Dec 2026 10:00:00 GMT")
	if r.Method == http.MethodPut {
		w.WriteHeader(http.StatusCreated)
		return
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(blob)))
	io.WriteString(w, blob)
}

func (f *fakeStorage) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[key]
}

// newClient returns a Blob Storage client for the account at url whose
// requests go through retryhttp, with azcore's own retries off.
func newClient(url string, opts ...retryhttp.Option) (*azblob.Client, error) {
	return azblob.NewClientWithNoCredential(url, &azblob.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: &http.Client{Transport: retryhttp.New(nil, opts...)},
		Retry:     policy.RetryOptions{MaxRetries: -1}, // off: 0 would mean azcore's default, 3 retries
	}})
}

func run(w io.Writer) error {
	fake := &fakeStorage{failFirst: 1, seen: map[string]int{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	client, err := newClient(srv.URL + "/account")
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := client.UploadBuffer(ctx, "reports", "q3.txt", []byte(blob), nil); err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	resp, err := client.DownloadStream(ctx, "reports", "q3.txt", nil)
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	var got bytes.Buffer
	_, err = got.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	fmt.Fprintf(w, "uploaded after %d sends, downloaded %q after %d\n",
		fake.count("PUT /account/reports/q3.txt"), got.String(), fake.count("GET /account/reports/q3.txt"))
	return nil
}
