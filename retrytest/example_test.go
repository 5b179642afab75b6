package retrytest_test

import (
	"fmt"
	"net/http"

	"github.com/retryhttp/retryhttp/retrytest"
)

// A Server answers from its script and records what it received, so that a
// test can check how a client retried: here a client that retries 503s
// once by hand.
func ExampleServer() {
	srv := retrytest.NewServer(retrytest.Status(503), retrytest.Reply{Body: "ok"})
	defer srv.Close()

	for range 2 {
		resp, err := http.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			break
		}
	}
	fmt.Println(srv.CheckCount(2))
	fmt.Println(retrytest.CheckSameBody(srv.Attempts(), nil))
	// Output:
	// <nil>
	// <nil>
}

// A ScriptTransport answers in memory, with no network, and counts the
// response bodies that were not closed.
func ExampleScriptTransport() {
	st := retrytest.NewScriptTransport(retrytest.Step{Reply: retrytest.Status(502)})
	client := &http.Client{Transport: st}
	for range 2 {
		resp, err := client.Get("http://api.test/v1")
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(resp.StatusCode)
		resp.Body.Close()
	}
	fmt.Println(st.Count(), "attempts,", st.OpenBodies(), "bodies open")
	// Output:
	// 502
	// 200
	// 2 attempts, 0 bodies open
}
