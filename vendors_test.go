package retryhttp

import (
	"bytes"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/retryhttp/retryhttp/internal/vendors"
	"github.com/retryhttp/retryhttp/retrytest"
)

// updateDocs makes TestVendorTables write the tables of internal/vendors
// into the docs; without it, the test compares them.
var updateDocs = flag.Bool("update", false, "write internal/vendors' tables into docs/recipes.md and docs/retries.md")

// The SDK table that docs/recipes.md prints and the signal table that
// docs/retries.md prints are internal/vendors' tables, which the reader
// and the layered-retry warning use, not copies that drift from them.
func TestVendorTables(t *testing.T) {
	for _, d := range []struct{ page, marker, table string }{
		{"docs/recipes.md", "sdk-table", vendors.SDKTable()},
		{"docs/retries.md", "signal-table", vendors.SignalTable()},
	} {
		doc, err := os.ReadFile(d.page)
		if err != nil {
			t.Fatal(err)
		}
		want, err := withSection(string(doc), d.marker, d.table)
		if err != nil {
			t.Fatalf("%s: %v", d.page, err)
		}
		if *updateDocs {
			if err := os.WriteFile(d.page, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if string(doc) != want {
			t.Errorf("%s does not print internal/vendors' table between its %s markers (go test -run TestVendorTables -update rewrites it); want:\n%s", d.page, d.marker, d.table)
		}
	}
}

// withSection is page with body between the line that opens marker
// ("<!-- marker ... -->") and the line that closes it ("<!-- /marker -->").
func withSection(page, marker, body string) (string, error) {
	i := strings.Index(page, "<!-- "+marker)
	j := strings.Index(page, "<!-- /"+marker+" -->")
	if i < 0 || j < i {
		return "", fmt.Errorf("no %s markers", marker)
	}
	open := i + strings.Index(page[i:], "-->\n") + len("-->\n")
	if open > j {
		return "", fmt.Errorf("the %s marker does not end its line", marker)
	}
	return page[:open] + body + page[j:], nil
}

// Every signal of internal/vendors does what its row says: each example
// answer, then 200s, makes the call send what it says, after the least
// wait it says.
func TestVendorSignals(t *testing.T) {
	for _, s := range vendors.Signals {
		if len(s.Examples) == 0 {
			t.Errorf("%s: no example", s.Answer)
		}
		for _, ex := range s.Examples {
			t.Run(fmt.Sprintf("%s/%s %d %v", s.Answer, ex.Method, ex.Status, ex.Header), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { signalExample(t, ex) })
			})
		}
	}
}

func signalExample(t *testing.T, ex vendors.Example) {
	h := http.Header{}
	for k, v := range ex.Header {
		h.Set(k, v)
	}
	base := retrytest.NewScriptTransport(retrytest.Step{Reply: retrytest.Reply{Status: ex.Status, Header: h}})
	var opts []Option
	if ex.Declare {
		opts = append(opts, WithUnprocessedStatuses(ex.Status))
	}
	tr, sl := testTransport(base, opts...)
	req := newRequest(t, ex.Method, "http://h/", nil)
	if ex.Keyed {
		req.Header.Set(HeaderIdempotencyKey, "k-1")
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if base.Count() != ex.Sends {
		t.Errorf("%d sends, want %d", base.Count(), ex.Sends)
	}
	if ex.Wait > 0 && (len(sl.sleeps) == 0 || sl.sleeps[0] < ex.Wait) {
		t.Errorf("waits %v, want at least %v before the retry", sl.sleeps, ex.Wait)
	}
}

// The layered-retry warning names the SDK a request came from, by its
// mark in internal/vendors, and its switch: each SDK with a mark, its
// request seen again after a failure.
func TestLayeredWarningNamesTheSDK(t *testing.T) {
	for _, sdk := range vendors.SDKs {
		if sdk.Source != "" && !slices.Contains(layerLabels[:], sdk.Source) {
			t.Errorf("%s: source %q is no layered-retry source", sdk.Name, sdk.Source)
		}
		m := sdk.Marker
		if m == (vendors.Marker{}) {
			continue
		}
		var logs bytes.Buffer
		base := retrytest.NewScriptTransport(steps(503, 503)...)
		tr, _ := testTransport(base, WithMaxAttempts(1), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		host := "h"
		if m.Host != "" {
			host = "api." + m.Host
		}
		for range 2 {
			req := newRequest(t, "GET", "http://"+host+"/v1/things", nil)
			if m.Header != "" {
				req.Header.Set(m.Header, "x "+m.Contains+"1.0")
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if want := strings.ReplaceAll(sdk.Off, "`", ""); !strings.Contains(logs.String(), sdk.Name+" retries too") || !strings.Contains(logs.String(), want) {
			t.Errorf("%s: the warning does not name it and %q:\n%s", sdk.Name, want, logs.String())
		}
	}
}
