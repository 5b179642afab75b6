// Command dynamodb wraps the AWS SDK for Go v2's DynamoDB client with
// retryhttp for an API that reads over POST: every DynamoDB operation is a
// POST, told apart by its X-Amz-Target header. The reads (GetItem, Query,
// Scan, BatchGetItem) are declared safe to repeat with WithIdempotentIf, so
// that retryhttp retries them like GETs; writes are not (a PutItem whose
// answer was lost may have been applied). A throttle, which DynamoDB sends
// as HTTP 400 with x-amzn-ErrorType ThrottlingException (or
// ProvisionedThroughputExceededException), is made worth retrying with
// WithRetryIf: it applies to the declared reads only, since the method gate
// still holds for the rest. The SDK's own retries are off (aws.NopRetryer),
// so that one layer retries. It runs against a fake DynamoDB on loopback
// that fails each operation's first request, and prints the attempts the
// fake saw.
//
//	cd examples/sdk && go run ./dynamodb
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/retryhttp/retryhttp"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// reads are the DynamoDB operations that change nothing: safe to repeat.
var reads = map[string]bool{"GetItem": true, "Query": true, "Scan": true, "BatchGetItem": true}

// dynamoRead reports whether a request is one of the reads.
func dynamoRead(r *http.Request) bool {
	_, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
	return reads[op]
}

// throttle makes DynamoDB's throttles (HTTP 400) worth retrying.
func throttle(resp *http.Response, err error) retryhttp.Decision {
	if resp != nil && resp.StatusCode == http.StatusBadRequest {
		switch t := resp.Header.Get("X-Amzn-Errortype"); {
		case strings.HasPrefix(t, "ThrottlingException"), strings.HasPrefix(t, "ProvisionedThroughputExceededException"):
			return retryhttp.Retry
		}
	}
	return retryhttp.NoOpinion
}

// newDynamo returns a DynamoDB client for endpoint whose requests go
// through retryhttp, the reads declared safe, throttles retried, and the
// SDK's own retries off.
func newDynamo(endpoint string, opts ...retryhttp.Option) *dynamodb.Client {
	opts = append([]retryhttp.Option{retryhttp.WithIdempotentIf(dynamoRead), retryhttp.WithRetryIf(throttle)}, opts...)
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""),
		HTTPClient:  &http.Client{Transport: retryhttp.New(nil, opts...)},
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} }, // retryhttp retries; the SDK does not
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// fakeDynamo fails the first request of each operation (first: a 503, or
// a throttle), then answers it.
type fakeDynamo struct {
	mu    sync.Mutex
	seen  map[string]int
	first map[string]string // operation: "503" or "throttle"
}

func (f *fakeDynamo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	_, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
	f.mu.Lock()
	f.seen[op]++
	n := f.seen[op]
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	if n == 1 {
		switch f.first[op] {
		case "throttle":
			w.Header().Set("X-Amzn-Errortype", "ThrottlingException")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate exceeded"}`)
			return
		case "503":
			w.Header().Set("X-Amzn-Errortype", "ServiceUnavailable")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ServiceUnavailable","message":"try again"}`)
			return
		}
	}
	switch op {
	case "GetItem":
		io.WriteString(w, `{"Item":{"id":{"S":"42"},"name":{"S":"Ada"}}}`)
	case "Query":
		io.WriteString(w, `{"Count":1,"ScannedCount":1,"Items":[{"id":{"S":"42"}}]}`)
	default:
		io.WriteString(w, `{}`)
	}
}

func (f *fakeDynamo) attempts(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[op]
}

func run(w io.Writer) error {
	fake := &fakeDynamo{seen: map[string]int{}, first: map[string]string{"GetItem": "503", "Query": "throttle", "PutItem": "503"}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	db := newDynamo(srv.URL, retryhttp.WithBackoff(retryhttp.Constant(10*time.Millisecond)))
	ctx := context.Background()
	key := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "42"}}

	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("users"), Key: key})
	if err != nil {
		return fmt.Errorf("GetItem: %w", err)
	}
	fmt.Fprintf(w, "GetItem (a read, 503 first): %d attempts, item %v\n", fake.attempts("GetItem"), got.Item["name"])

	q, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("users"),
		KeyConditionExpression:    aws.String("id = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberS{Value: "42"}}})
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	fmt.Fprintf(w, "Query (a read, throttled first): %d attempts, %d item(s)\n", fake.attempts("Query"), q.Count)

	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("users"), Item: key,
		ConditionExpression: aws.String("attribute_not_exists(id)")})
	fmt.Fprintf(w, "PutItem (a conditional write, 503 first): %d attempt(s), error returned: %v\n", fake.attempts("PutItem"), err != nil)
	return nil
}
