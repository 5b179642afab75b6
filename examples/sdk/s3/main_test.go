package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retrytest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var fast = retryhttp.WithBackoff(retryhttp.Constant(time.Millisecond))

// A PUT that met SlowDown is sent again by retryhttp, once, with the
// same signed bytes, and the SDK sees the success.
func TestPutObjectRetriedOnceWithSameBody(t *testing.T) {
	srv := fakeS3("")
	defer srv.Close()
	_, err := newS3(srv.URL, fast).PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String("b"), Key: aws.String("k"), Body: strings.NewReader(object),
	})
	if err != nil {
		t.Fatal(err)
	}
	as := srv.Attempts()
	if err := srv.CheckCount(2); err != nil {
		t.Fatal(err)
	}
	if err := retrytest.CheckSameBody(as, nil); err != nil {
		t.Error(err)
	}
	if err := retrytest.CheckSameHeader(as, "Authorization"); err != nil {
		t.Error(err)
	}
	if as[0].BodyLength < len(object) {
		t.Errorf("the fake received %d body bytes, want at least the object's %d", as[0].BodyLength, len(object))
	}
	for i, a := range as {
		if a.Method != "PUT" || a.Path != "/b/k" {
			t.Errorf("attempt %d: %s %s, want PUT /b/k", i+1, a.Method, a.Path)
		}
	}
}

// The SDK's retryer is off: with retryhttp limited to one attempt,
// SlowDown reaches the caller after one attempt. With the SDK's standard
// retryer in place the fake would see 3.
func TestSDKAloneDoesNotRetry(t *testing.T) {
	srv := fakeS3(object)
	defer srv.Close()
	c := newS3(srv.URL, retryhttp.WithMaxAttempts(1))
	_, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	if err == nil || !strings.Contains(err.Error(), "SlowDown") {
		t.Errorf("err = %v, want the SlowDown error", err)
	}
	if err := srv.CheckCount(1); err != nil {
		t.Error(err)
	}
}

func TestGetObjectRetried(t *testing.T) {
	srv := fakeS3(object)
	defer srv.Close()
	out, err := newS3(srv.URL, fast).GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(out.Body)
	if err != nil || string(body) != object {
		t.Errorf("body = %q, %v; want %q", body, err, object)
	}
	if err := srv.CheckCount(2); err != nil {
		t.Error(err)
	}
}

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"PutObject: the fake saw 2 attempts (PUT /examples/greeting.txt, PUT /examples/greeting.txt; the first answered 503 SlowDown), with the same body",
		`GetObject: the fake saw 2 attempts (GET /examples/greeting.txt, GET /examples/greeting.txt; the first answered 503 SlowDown), got "hello from the fake S3\n"`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// With the SDK's own retryer left on, the SDK sends its retries through
// retryhttp marked amz-sdk-request: attempt=2, ...: retryhttp counts them
// as layered retries (and warns once). With aws.NopRetryer, none.
func TestLayeredRetriesSeen(t *testing.T) {
	for _, sdkRetries := range []bool{true, false} {
		srv := retrytest.NewUnstartedServer()
		srv.Then = slowDown // always
		srv.Start()
		m := retryhttp.NewMetrics()
		client := newS3(srv.URL, retryhttp.WithMetrics(m), retryhttp.WithMaxAttempts(1))
		if sdkRetries {
			cfg := aws.Config{
				Region:      "us-east-1",
				Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""),
				HTTPClient:  &http.Client{Transport: retryhttp.New(nil, retryhttp.WithMetrics(m), retryhttp.WithMaxAttempts(1))},
				Retryer: func() aws.Retryer {
					return retry.NewStandard(func(o *retry.StandardOptions) {
						o.MaxBackoff = 5 * time.Millisecond
						o.RateLimiter = ratelimit.None
					})
				},
			}
			client = s3.NewFromConfig(cfg, func(o *s3.Options) {
				o.BaseEndpoint = aws.String(srv.URL)
				o.UsePathStyle = true
			})
		}
		_, err := client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
		srv.Close()
		if err == nil {
			t.Fatal("GetObject succeeded against a server that always answers SlowDown")
		}
		got := layered(t, m, "aws-sdk")
		if sdkRetries && got != 2 {
			t.Errorf("SDK retryer on: %v layered retries counted, want 2 (its attempts 2 and 3)", got)
		}
		if !sdkRetries && got != 0 {
			t.Errorf("aws.NopRetryer: %v layered retries counted, want 0", got)
		}
	}
}

// layered reads retryhttp_layered_retries_total{source} from m.
func layered(t *testing.T, m *retryhttp.Metrics, source string) float64 {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "retryhttp_layered_retries_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "source" && l.GetValue() == source {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
