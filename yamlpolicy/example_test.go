package yamlpolicy_test

import (
	"fmt"
	"strings"

	"github.com/retryhttp/retryhttp/yamlpolicy"
)

// A dependency written as the template, with one operation of its own.
func ExampleLoad() {
	const file = `
dependency: party-service
semantic_safety: {idempotent: true, side_effect: false}
time_budget: {caller_deadline_ms: 800, read_timeout_ms: 250}
retry: {max_attempts_total: 3, initial_delay_ms: 50, max_delay_ms: 200}
budget: {max_retry_ratio: 0.1}
fallback: {type: partial_response}
owner: case-platform-team
---
dependency: party-service
operation: searchParties
match: POST /parties/search
retry: {max_attempts_total: 2}
`
	ps, err := yamlpolicy.Load(strings.NewReader(file))
	if err != nil {
		fmt.Println(err)
		return
	}
	trs, err := ps.Transports(nil)
	fmt.Println(len(trs), err)
	// Output:
	// 1 <nil>
}
