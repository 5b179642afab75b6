// Command s3 wraps the AWS SDK for Go v2's S3 client with retryhttp and
// makes retryhttp the only layer that retries: the SDK's retryer is
// replaced by aws.NopRetryer, which never retries. It runs against a fake
// S3 on loopback that answers its first request with 503 SlowDown, and
// prints how many attempts the fake saw for one PutObject and one
// GetObject, and that the retried PUT carried the same bytes.
//
//	cd examples/sdk && go run ./s3
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retrytest"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// newS3 returns an S3 client for endpoint whose requests go through
// retryhttp, with the SDK's retries off: one retry owner per path.
func newS3(endpoint string, opts ...retryhttp.Option) *s3.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""),
		HTTPClient:  &http.Client{Transport: retryhttp.New(nil, opts...)},
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} }, // retryhttp retries; the SDK does not
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	})
}

// slowDown is S3's answer when a client sends too fast.
var slowDown = retrytest.Reply{
	Status: http.StatusServiceUnavailable,
	Header: http.Header{"Content-Type": {"application/xml"}},
	Body:   `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`,
}

// fakeS3 returns a Server that answers its first request with 503
// SlowDown and every later one with 200 and body.
func fakeS3(body string) *retrytest.Server {
	srv := retrytest.NewUnstartedServer(slowDown)
	srv.Then = retrytest.Reply{Status: http.StatusOK, Body: body,
		Header: http.Header{"Etag": {`"0123456789abcdef"`}}}
	srv.Start()
	return srv
}

const object = "hello from the fake S3\n"

func run(w io.Writer) error {
	ctx := context.Background()
	fast := retryhttp.WithBackoff(retryhttp.FullJitter(10*time.Millisecond, 100*time.Millisecond))

	put := fakeS3("")
	_, err := newS3(put.URL, fast).PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String("examples"),
		Key:    aws.String("greeting.txt"),
		Body:   strings.NewReader(object),
	})
	put.Close()
	if err != nil {
		return fmt.Errorf("PutObject: %w", err)
	}
	attempts := put.Attempts()
	same := "the same body"
	if err := retrytest.CheckSameBody(attempts, nil); err != nil {
		same = err.Error()
	}
	fmt.Fprintf(w, "PutObject: the fake saw %d attempts (%s; the first answered 503 SlowDown), with %s\n",
		len(attempts), methods(attempts), same)

	get := fakeS3(object)
	out, err := newS3(get.URL, fast).GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String("examples"),
		Key:    aws.String("greeting.txt"),
	})
	if err != nil {
		get.Close()
		return fmt.Errorf("GetObject: %w", err)
	}
	body, err := io.ReadAll(out.Body)
	out.Body.Close()
	get.Close()
	if err != nil {
		return fmt.Errorf("GetObject body: %w", err)
	}
	fmt.Fprintf(w, "GetObject: the fake saw %d attempts (%s; the first answered 503 SlowDown), got %q\n", get.Count(), methods(get.Attempts()), body)
	return nil
}

func methods(as []retrytest.Attempt) string {
	var ms []string
	for _, a := range as {
		ms = append(ms, a.Method+" "+a.Path)
	}
	return strings.Join(ms, ", ")
}
