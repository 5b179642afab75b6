package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Each path's 429 is retried by retryhttp after its Retry-After, once:
// the list and the server-side apply succeed after two sends.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	if want := "listed 1 pod after 2 sends, applied the config map after 2"; !strings.Contains(out.String(), want) {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

// A create is a POST that may have been done: its 503 goes back to the
// caller after one send, and client-go does not start it over.
func TestCreateIsNotRepeated(t *testing.T) {
	fake := &fakeAPI{failFirst: 1, status: http.StatusServiceUnavailable, retryAfter: "0", seen: map[string]int{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	cs, err := newClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}
	_, err = cs.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{})
	if n := fake.count("POST /api/v1/namespaces/default/configmaps"); n != 1 || err == nil {
		t.Errorf("a create answered 503: %d sends, error %v; want 1 and the 503", n, err)
	}
}

// A create answered 429 was not begun: client-go alone sends it again
// after Retry-After, and through the recipe retryhttp does; two sends
// either way, and the config map is created.
func TestCreateRetriedAfter429(t *testing.T) {
	for _, recipe := range []bool{false, true} {
		fake := &fakeAPI{failFirst: 1, status: http.StatusTooManyRequests, retryAfter: "0", seen: map[string]int{}}
		srv := httptest.NewServer(fake)
		cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
		if recipe {
			cs, err = newClient(srv.URL)
		}
		if err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}
		_, err = cs.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{})
		if n := fake.count("POST /api/v1/namespaces/default/configmaps"); n != 2 || err != nil {
			t.Errorf("recipe %v: a create answered 429 once: %d sends, error %v; want 2 and none", recipe, n, err)
		}
		srv.Close()
	}
}

// What the layers cost against a host that keeps answering 429 with
// Retry-After: 0 (client-go's rate limiter paces its tries): client-go
// alone (11 tries), retryhttp stacked under it as is, and the recipe
// (noRetryAfter). Logged for docs/recipes.md; asserted: the recipe sends
// no more than retryhttp's own schedule, 4.
func TestStackedRetries(t *testing.T) {
	list := func(wrap func(http.RoundTripper) http.RoundTripper) (int, time.Duration) {
		fake := &fakeAPI{failFirst: -1, status: http.StatusTooManyRequests, retryAfter: "0", seen: map[string]int{}}
		srv := httptest.NewServer(fake)
		defer srv.Close()
		cfg := &rest.Config{Host: srv.URL}
		if wrap != nil {
			cfg.Wrap(wrap)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		return fake.count("GET /api/v1/namespaces/default/pods"), time.Since(start)
	}
	aloneHits, aloneTook := list(nil)
	bothHits, bothTook := list(func(rt http.RoundTripper) http.RoundTripper { return retryhttp.New(rt) })
	recipeHits, recipeTook := list(func(rt http.RoundTripper) http.RoundTripper { return noRetryAfter{retryhttp.New(rt)} })
	t.Logf("a host that keeps answering 429: client-go alone %d sends in %v; retryhttp under it %d in %v; the recipe %d in %v",
		aloneHits, aloneTook.Round(time.Millisecond), bothHits, bothTook.Round(time.Millisecond), recipeHits, recipeTook.Round(time.Millisecond))
	if recipeHits > 4 {
		t.Errorf("the recipe sent %d, want at most retryhttp's 4 attempts", recipeHits)
	}
}
