package retryhttp

import (
	"encoding/json"
	"go/ast"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// policyFields maps every field of a policy, by its path in the file, to
// the Option it stands for ("" for a field kept for the caller), with a
// value to try it with. Policy names come from the template teams write;
// option names from Go; this table, checked below against the code and
// docs/policy.md, is their one-to-one correspondence.
var policyFields = []struct{ path, value, option string }{
	{"dependency", `"d"`, ""}, // names the Transport (Transports, observability.tag_dependency)
	{"operation", `"op"`, ""},
	{"match", `"GET /x"`, ""}, // selects an operation; see TestPolicyOperations
	{"interaction_type", `"synchronous-http"`, ""},
	{"criticality", `"required-for-case-detail"`, "WithCriticality"},
	{"owner", `"team"`, ""},
	{"fallback.type", `"partial_response"`, ""}, // handed to the caller: Error.Fallback, FallbackOf
	{"fallback.user_message", `"later"`, ""},    // the same
	{"semantic_safety.idempotent", `true`, "WithIdempotentIf"},
	{"semantic_safety.side_effect", `true`, "NotIdempotent"}, // without idempotent: true
	{"semantic_safety.idempotency_keys", `["POST"]`, "WithIdempotencyKeys"},
	{"semantic_safety.idempotent_requests", `["POST /q"]`, "WithIdempotentIf"},
	{"semantic_safety.unprocessed_status", `[429]`, "WithUnprocessedStatuses"},
	{"time_budget.caller_deadline_ms", `800`, "WithMaxElapsed"},
	{"time_budget.connect_timeout_ms", `100`, "WithDialTimeout"},
	{"time_budget.read_timeout_ms", `250`, "WithPerAttemptTimeout"},
	{"retry.max_attempts_total", `3`, "WithMaxAttempts"},
	{"retry.backoff", `"exponential"`, "WithBackoff"},
	{"retry.initial_delay_ms", `50`, "WithBackoff"},
	{"retry.max_delay_ms", `900`, "WithBackoff"},
	{"retry.retryable_status", `[503]`, "WithRetryableStatuses"},
	{"retry.non_retryable_status", `[500]`, "WithNonRetryableStatuses"},
	{"retry.max_retry_after_ms", `1000`, "WithMaxRetryAfter"},
	{"retry.body_buffer_limit_bytes", `0`, "WithBodyBufferLimit"},
	{"retry.address_rotation", `true`, "WithAddressRotation"},
	{"budget.max_retry_ratio", `0.2`, "WithBudget"},
	{"budget.min_retries_per_second", `1`, "WithBudget"},
	{"budget.disabled", `true`, "WithoutBudget"},
	{"breaker.disabled", `true`, "WithoutRetryBreaker"},
	{"breaker.fail_fast", `true`, "WithRetryBreaker"},
	{"breaker.threshold", `5`, "WithRetryBreaker"},
	{"breaker.max_hold_ms", `1000`, "WithRetryBreaker"},
	{"hedging.delay_ms", `20`, "WithHedging"},
	{"hedging.percentile", `0.9`, "WithHedging"},
	{"hedging.max_extra", `2`, "WithHedging"},
	{"overload.throttle_ratio", `1.5`, "WithThrottle"},
	{"overload.concurrency_min", `4`, "WithConcurrencyLimit"}, // with concurrency_max (alone, an error)
	{"overload.concurrency_max", `32`, "WithConcurrencyLimit"},
	{"overload.quota_max_wait_ms", `5000`, "WithQuotaPacing"},
	{"overload.quota_spread", `true`, "WithQuotaPacing"}, // with quota_max_wait_ms (alone, an error)
	{"overload.rate_per_second", `10`, "WithRateLimit"},
	{"overload.rate_burst", `5`, "WithRateLimit"}, // with rate_per_second (alone, an error)
	{"observability.emit_attempt_metric", `true`, "WithMetrics"},
	{"observability.tag_dependency", `true`, "WithName"},
	{"observability.trace_attempts", `true`, "WithAttemptHook"},
	{"observability.attempt_header", `"X-Attempt"`, "WithAttemptHeader"},
	{"observability.attempt_header_value", `"{retry}"`, "WithAttemptHeader"}, // with attempt_header (alone, an error)
	{"observability.deadline_header", `"X-Timeout-Ms"`, "WithDeadlineHeader"},
	{"observability.criticality_header", `"X-Criticality"`, "WithCriticalityHeader"},
}

// goOnly are the options without a policy field, and why.
var goOnly = map[string]string{
	"WithLogger":         "takes a *slog.Logger",
	"WithLogRoute":       "takes a function",
	"WithRetryIf":        "takes a function",
	"WithKeyGenerator":   "takes a function",
	"WithFallback":       "takes a function",
	"WithRequestOptions": "carries options in a context",
	"Idempotent":         "declares one request, in its context",
	"NotIdempotent":      "declares one request, in its context",
	"NoRetry":            "one request, in its context",
}

// Each policy field is in the table, and makes the Option it names.
func TestPolicyFieldsMatchOptions(t *testing.T) {
	var paths []string
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for f := range typ.Fields() {
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "-" || tag == "" {
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				walk(prefix+tag+".", ft)
				continue
			}
			paths = append(paths, prefix+tag)
		}
	}
	walk("", reflect.TypeFor[policyDoc]())
	var table []string
	for _, f := range policyFields {
		table = append(table, f.path)
	}
	slices.Sort(paths)
	slices.Sort(table)
	if !slices.Equal(paths, table) {
		t.Errorf("policy fields %v\nthe table lists %v", paths, table)
	}

	for _, f := range policyFields {
		doc := `{"dependency": "d"}`
		switch f.path {
		case "dependency":
		case "observability.attempt_header_value":
			doc = `{"dependency": "d", "observability": {"attempt_header": "X-A", "attempt_header_value": ` + f.value + `}}`
		case "overload.concurrency_min":
			doc = `{"dependency": "d", "overload": {"concurrency_max": 32, "concurrency_min": ` + f.value + `}}`
		case "overload.quota_spread":
			doc = `{"dependency": "d", "overload": {"quota_max_wait_ms": 100, "quota_spread": ` + f.value + `}}`
		case "overload.rate_burst":
			doc = `{"dependency": "d", "overload": {"rate_per_second": 1, "rate_burst": ` + f.value + `}}`
		default:
			doc = nest(f.path, f.value)
		}
		p, err := ParsePolicy([]byte(doc))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		opts, err := p.Options()
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		var names []string
		for _, o := range opts {
			if n := o.optionName(); n != "dependency" && n != "fallback" { // the logs' name, and the caller's fallback: no Option
				names = append(names, o.optionName())
			}
		}
		if f.option == "" && len(names) > 0 {
			t.Errorf("%s makes %v, want no option", doc, names)
		}
		if f.option != "" && !slices.Contains(names, f.option) {
			t.Errorf("%s makes %v, want %s", doc, names, f.option)
		}
	}
}

// nest writes a policy with value at path: "a.b", 1 is {"a": {"b": 1}}.
func nest(path, value string) string {
	parts := strings.Split(path, ".")
	s := value
	for i := len(parts) - 1; i >= 0; i-- {
		k, _ := json.Marshal(parts[i])
		s = "{" + string(k) + ": " + s + "}"
	}
	return `{"dependency": "d", ` + s[1:]
}

// Every option that takes plain data has a policy field, and the others
// say why they have none; docs/policy.md shows the table.
func TestEveryOptionHasAPolicyFieldOrAReason(t *testing.T) {
	inTable := map[string]bool{}
	for _, f := range policyFields {
		inTable[f.option] = true
	}
	for _, d := range packageDecls(t) {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || !fn.Name.IsExported() || fn.Type.Results == nil || len(fn.Type.Results.List) != 1 {
			continue
		}
		if id, ok := fn.Type.Results.List[0].Type.(*ast.Ident); !ok || (id.Name != "Option" && id.Name != "RequestOption") {
			continue
		}
		if !inTable[fn.Name.Name] && goOnly[fn.Name.Name] == "" {
			t.Errorf("option %s has no policy field and no reason in goOnly", fn.Name.Name)
		}
	}
	doc, err := os.ReadFile("docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range policyFields {
		row := ""
		for line := range strings.Lines(string(doc)) {
			if strings.HasPrefix(line, "| `"+f.path+"` |") {
				row = line
			}
		}
		switch {
		case row == "":
			t.Errorf("docs/policy.md has no row for %s", f.path)
		case f.option != "" && !strings.Contains(row, "`"+f.option+"`"):
			t.Errorf("docs/policy.md's row for %s does not name %s: %s", f.path, f.option, row)
		}
	}
}
