package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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
