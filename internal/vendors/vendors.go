// Package vendors is the one place that says what each vendor and SDK
// the recipes cover does about retries: the SDKs, with their own retries
// and the switch that turns them off (the layered-retry warning names it,
// docs/recipes.md prints it), and the signals their servers answer with
// (should-retry headers, waits, throttles, statuses of requests not
// processed), which internal/ratelimit reads, docs/retries.md prints and
// the tests send. A fact here is one the vendor states, in its
// documentation or in its SDK's source.
package vendors

import "time"

// An SDK is a client library that retries, or may, on its own.
type SDK struct {
	Name    string // as the docs name it
	Retries string // markdown: its retries by default
	Off     string // markdown: the switch that turns them off
	Source  string // the layered-retry source that is its own mark, if any
	Marker  Marker // how its requests are known
}

// A Marker is how a request shows the SDK that sent it: a header it sets
// (with Contains in its value, if not ""), or the host it calls (or a
// subdomain of it). The zero Marker knows none.
type Marker struct {
	Header   string
	Contains string
	Host     string
}

// SDKs are the SDKs the recipes cover, and the gRPC clients whose retry
// count retryhttp reads.
var SDKs = []SDK{
	{Name: "stripe-go", Retries: "2 network retries", Off: "`BackendConfig.MaxNetworkRetries: stripe.Int64(0)`",
		Marker: Marker{Header: "User-Agent", Contains: "GoBindings/"}},
	{Name: "aws-sdk-go-v2", Retries: "standard retryer, 3 attempts", Off: "`aws.Config.Retryer: func() aws.Retryer { return aws.NopRetryer{} }`",
		Source: "aws-sdk", Marker: Marker{Header: "amz-sdk-request"}},
	{Name: "openai-go, anthropic-sdk-go (Stainless SDKs)", Retries: "2 retries", Off: "`option.WithMaxRetries(0)`",
		Source: "stainless-sdk", Marker: Marker{Header: "X-Stainless-Lang"}},
	{Name: "go-elasticsearch", Retries: "3 retries on 502, 503, 504 and connection errors, any method", Off: "`elasticsearch.Config{DisableRetry: true}`",
		Marker: Marker{Header: "User-Agent", Contains: "go-elasticsearch/"}},
	{Name: "go-retryablehttp", Retries: "4 retries", Off: "`client.RetryMax = 0` (or use retryhttp instead)"},
	{Name: "vault/api", Retries: "2 retries (go-retryablehttp), 412 included", Off: "`Config.MaxRetries = 0`",
		Marker: Marker{Header: "X-Vault-Request"}},
	{Name: "go-resty v2", Retries: "none unless `SetRetryCount`", Off: "`SetRetryCount(0)`",
		Marker: Marker{Header: "User-Agent", Contains: "go-resty/"}},
	{Name: "go-github", Retries: "none", Off: "nothing to turn off"},
	{Name: "client-go", Retries: "up to 10 on a 429 or 5xx with `Retry-After`, any verb; a GET's connection errors",
		Off:    "none on the clientset (`Request.MaxRetries(0)` per request on the REST client): take `Retry-After` off what retryhttp gives up with (`examples/sdk/kubernetes`)",
		Marker: Marker{Header: "User-Agent", Contains: ") kubernetes/"}},
	{Name: "azcore, azblob", Retries: "3 on 408, 429, 500, 502, 503, 504 and errors", Off: "`ClientOptions.Retry.MaxRetries: -1` (0 means 3)",
		Source: "azure-sdk", Marker: Marker{Header: "User-Agent", Contains: "azsdk-go-"}},
	{Name: "minio-go", Retries: "10 attempts in all, on statuses, S3 codes and errors", Off: "`Options.MaxRetries: 1` (0 means 10)",
		Marker: Marker{Header: "User-Agent", Contains: "minio-go/"}},
	{Name: "slack-go", Retries: "none unless `OptionRetry` or `OptionRetryConfig`", Off: "leave both out; declare its 429 unprocessed",
		Marker: Marker{Host: "slack.com"}},
	{Name: "gRPC clients", Retries: "per the service config's retry policy", Off: "`grpc.WithDisableRetry()` (grpc-go)",
		Source: "grpc", Marker: Marker{Header: "grpc-previous-rpc-attempts"}},
}

// A Kind is how the reader takes a signal's header.
type Kind uint8

const (
	Other       Kind = iota // read by a rule of its own (a throttle's form, a limit's reset), or not read
	ShouldRetry             // "true" or "false": the answer is worth retrying, or final
	Millis                  // the wait, in milliseconds
)

// A Signal is one way a vendor's answer says whether, or when, to retry.
type Signal struct {
	Answer   string // markdown: what the answer carries
	From     string // markdown: who sends it, and which SDK reads it
	Does     string // markdown: what retryhttp does with it
	Kind     Kind
	Header   string    // the header read, for ShouldRetry and Millis
	Examples []Example // answers that carry it, as the tests send them
}

// An Example is one call the tests make against an answer that carries a
// signal, every later answer a 200, under testing/synctest, whose clock
// starts at 2000-01-01 00:00:00 UTC.
type Example struct {
	Method  string
	Keyed   bool              // with an Idempotency-Key
	Status  int               // of the first answer
	Header  map[string]string // of the first answer
	Declare bool              // Status declared unprocessed (WithUnprocessedStatuses)
	Sends   int               // what the call sends
	Wait    time.Duration     // at least, before its second send
}

// Signals are the vendors' signals, the should-retry and millisecond
// headers in the order the reader prefers them.
var Signals = []Signal{
	{Answer: "`x-should-retry: false` or `true`", From: "OpenAI, Anthropic (their Stainless SDKs read it)", Kind: ShouldRetry, Header: "X-Should-Retry",
		Does: "`false`: final, whatever the status; `true`: a status of 400 or more is worth retrying, for a request retryhttp may repeat",
		Examples: []Example{{Method: "GET", Status: 503, Header: map[string]string{"X-Should-Retry": "false"}, Sends: 1},
			{Method: "GET", Status: 400, Header: map[string]string{"X-Should-Retry": "true"}, Sends: 2},
			{Method: "POST", Status: 400, Header: map[string]string{"X-Should-Retry": "true"}, Sends: 1}}},
	{Answer: "`Stripe-Should-Retry: false` or `true`", From: "Stripe (stripe-go reads it); `false` on a 500 it replays for the key", Kind: ShouldRetry, Header: "Stripe-Should-Retry",
		Does: "as `x-should-retry`; a `false` and a `true` on one answer: final",
		Examples: []Example{{Method: "POST", Keyed: true, Status: 500, Header: map[string]string{"Stripe-Should-Retry": "false"}, Sends: 1},
			{Method: "GET", Status: 503, Header: map[string]string{"Stripe-Should-Retry": "false"}, Sends: 1},
			{Method: "POST", Keyed: true, Status: 400, Header: map[string]string{"Stripe-Should-Retry": "true"}, Sends: 2},
			{Method: "POST", Status: 400, Header: map[string]string{"Stripe-Should-Retry": "true"}, Sends: 1},
			{Method: "GET", Status: 503, Header: map[string]string{"Stripe-Should-Retry": "true", "X-Should-Retry": "false"}, Sends: 1}}},
	{Answer: "`retry-after-ms`", From: "OpenAI, Anthropic, Azure", Kind: Millis, Header: "Retry-After-Ms", Does: "the wait, in milliseconds: the first hint read",
		Examples: []Example{{Method: "GET", Status: 503, Header: map[string]string{"Retry-After-Ms": "1500", "Retry-After": "9"}, Sends: 2, Wait: 1500 * time.Millisecond}}},
	{Answer: "`x-ms-retry-after-ms`", From: "Azure (azcore reads it)", Kind: Millis, Header: "X-Ms-Retry-After-Ms", Does: "the wait, in milliseconds",
		Examples: []Example{{Method: "GET", Status: 429, Header: map[string]string{"X-Ms-Retry-After-Ms": "1500"}, Sends: 2, Wait: 1500 * time.Millisecond}}},
	{Answer: "`x-amz-retry-after`", From: "AWS (aws-sdk-go-v2 reads it)", Kind: Millis, Header: "X-Amz-Retry-After", Does: "the wait, in milliseconds",
		Examples: []Example{{Method: "GET", Status: 503, Header: map[string]string{"X-Amz-Retry-After": "1500"}, Sends: 2, Wait: 1500 * time.Millisecond}}},
	{Answer: "`Retry-After`", From: "RFC 9110; Slack, GitHub, Kubernetes, Azure", Does: "the wait, in seconds or an HTTP-date, after the millisecond hints",
		Examples: []Example{{Method: "GET", Status: 429, Header: map[string]string{"Retry-After": "2"}, Sends: 2, Wait: 2 * time.Second}}},
	{Answer: "403 with `X-RateLimit-Remaining: 0`", From: "GitHub, its primary rate limit", Does: "a throttle: retried once `X-RateLimit-Reset` (a Unix time) has come",
		Examples: []Example{{Method: "GET", Status: 403, Header: map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "1"}, Sends: 2, Wait: time.Second},
			{Method: "GET", Status: 403, Sends: 1}}},
	{Answer: "403 with `Retry-After`", From: "GitHub, its secondary rate limit", Does: "a throttle: retried after the wait",
		Examples: []Example{{Method: "GET", Status: 403, Header: map[string]string{"Retry-After": "1", "X-Ratelimit-Remaining": "4999"}, Sends: 2, Wait: time.Second}}},
	{Answer: "`x-ratelimit-remaining-requests: 0` with `x-ratelimit-reset-requests`", From: "OpenAI", Does: "the wait: until the limit resets",
		Examples: []Example{{Method: "GET", Status: 429, Header: map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "1.5s"}, Sends: 2, Wait: 1500 * time.Millisecond}}},
	{Answer: "`anthropic-ratelimit-requests-reset`, nothing remaining", From: "Anthropic", Does: "the wait: until the limit resets (an RFC 3339 time)",
		Examples: []Example{{Method: "GET", Status: 429, Header: map[string]string{"Anthropic-Ratelimit-Requests-Remaining": "0", "Anthropic-Ratelimit-Requests-Reset": "2000-01-01T00:00:02Z"}, Sends: 2, Wait: 2 * time.Second}}},
	{Answer: "429 with `Retry-After`", From: "Slack: the request was not processed", Does: "retried whatever the method, after the wait, once declared: `WithUnprocessedStatuses(429)` (`examples/sdk/slack`)",
		Examples: []Example{{Method: "POST", Status: 429, Header: map[string]string{"Retry-After": "1"}, Declare: true, Sends: 2, Wait: time.Second},
			{Method: "POST", Status: 429, Header: map[string]string{"Retry-After": "1"}, Sends: 1}}},
	{Answer: "429 (`es_rejected_execution_exception`)", From: "Elasticsearch (go-elasticsearch does not retry it by default)", Does: "a 429: retried for a request retryhttp may repeat (a `_search` declared safe)",
		Examples: []Example{{Method: "GET", Status: 429, Sends: 2}}},
	{Answer: "400 with `x-amzn-ErrorType: ThrottlingException`", From: "AWS JSON APIs (DynamoDB)", Does: "not read: a 400 is final unless declared with `WithRetryIf` (`examples/sdk/dynamodb`)",
		Examples: []Example{{Method: "POST", Status: 400, Header: map[string]string{"X-Amzn-Errortype": "ThrottlingException"}, Sends: 1}}},
	{Answer: "412", From: "Vault, for an `X-Vault-Index` not yet replicated (vault/api retries it)", Does: "not read: final",
		Examples: []Example{{Method: "GET", Status: 412, Sends: 1}}},
}
