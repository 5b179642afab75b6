//go:build !race

// The stacked measurement runs without the race detector: azcore rewinds
// a request body for its own retry while net/http's writer of the
// previous try may still read it (RoundTrip may return before the body is
// written), a race in the layers above retryhttp that the detector
// reports whether or not retryhttp is among them.

package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/retryhttp/retryhttp"
)

// What the two layers cost against a host that keeps failing: azcore
// alone (its default, 3 retries), retryhttp alone (azcore's off), and
// both, azcore's tries marked with one x-ms-client-request-id per call
// (runtime.NewRequestIDPolicy), which retryhttp reads as its retries.
// Logged for docs/recipes.md; asserted: retryhttp alone sends no more than
// azcore alone, and stacked, azcore's own tries are not held (each of
// them held to its limit took 11 s in all, where azcore alone takes 1).
func TestStackedRetries(t *testing.T) {
	var holds atomic.Int32 // tries given up after a hold, stacked
	hook := retryhttp.WithAttemptHook(func(ctx context.Context, a retryhttp.AttemptStart) (context.Context, func(retryhttp.AttemptEnd)) {
		return ctx, func(e retryhttp.AttemptEnd) {
			if e.GiveUp == retryhttp.GiveUpBreaker {
				holds.Add(1)
			}
		}
	})
	upload := func(sdkRetries int32, wrap bool) (int, time.Duration) {
		fake := &fakeStorage{failFirst: -1, seen: map[string]int{}}
		srv := httptest.NewServer(fake)
		defer srv.Close()
		co := azcore.ClientOptions{
			Retry:           policy.RetryOptions{MaxRetries: sdkRetries, RetryDelay: 100 * time.Millisecond},
			PerCallPolicies: []policy.Policy{runtime.NewRequestIDPolicy()},
		}
		if wrap {
			co.Transport = &http.Client{Transport: retryhttp.New(nil, hook)}
		}
		client, err := azblob.NewClientWithNoCredential(srv.URL+"/account", &azblob.ClientOptions{ClientOptions: co})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		client.UploadBuffer(context.Background(), "reports", "q3.txt", []byte(blob), nil)
		return fake.count("PUT /account/reports/q3.txt"), time.Since(start)
	}
	aloneHits, aloneTook := upload(0, false)
	oursHits, oursTook := upload(-1, true)
	holds.Store(0)
	bothHits, bothTook := upload(0, true)
	t.Logf("a host that keeps answering 503: azcore alone %d sends in %v; retryhttp alone %d in %v; both %d in %v",
		aloneHits, aloneTook.Round(time.Millisecond), oursHits, oursTook.Round(time.Millisecond), bothHits, bothTook.Round(time.Millisecond))
	if oursHits > aloneHits {
		t.Errorf("retryhttp alone sent %d, azcore alone %d", oursHits, aloneHits)
	}
	if n := holds.Load(); n > 1 {
		t.Errorf("%d tries given up after a hold; azcore's own (after its first) must not be held", n)
	}
}
