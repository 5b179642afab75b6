package vendors

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Every cell prints in one markdown table cell, and every signal read by
// the reader names its header.
func TestTablesAreWellFormed(t *testing.T) {
	for _, s := range SDKs {
		for _, c := range []string{s.Name, s.Retries, s.Off, s.Marker.String()} {
			if c == "" || strings.ContainsAny(c, "|\n") {
				t.Errorf("%s: cell %q is empty or breaks the table", s.Name, c)
			}
		}
	}
	for _, s := range Signals {
		for _, c := range []string{s.Answer, s.From, s.Does} {
			if c == "" || strings.ContainsAny(c, "|\n") {
				t.Errorf("%s: cell %q is empty or breaks the table", s.Answer, c)
			}
		}
		if (s.Kind == Other) != (s.Header == "") {
			t.Errorf("%s: kind %d with header %q", s.Answer, s.Kind, s.Header)
		}
	}
	if !slices.Equal(ShouldRetryHeaders, []string{"X-Should-Retry", "Stripe-Should-Retry"}) ||
		!slices.Equal(MillisHeaders, []string{"Retry-After-Ms", "X-Ms-Retry-After-Ms", "X-Amz-Retry-After"}) {
		t.Errorf("reader's lists %q, %q", ShouldRetryHeaders, MillisHeaders)
	}
}

func TestIdentify(t *testing.T) {
	for _, tt := range []struct {
		source, host, header, value string
		want                        string // "" for none
	}{
		{"aws-sdk", "h", "", "", "aws-sdk-go-v2"},
		{"repeat", "h", "User-Agent", "Stripe/v1 GoBindings/83.2.1", "stripe-go"},
		{"idempotency-key", "h", "User-Agent", "Stripe/v1 GoBindings/83.2.1", "stripe-go"},
		{"repeat", "h", "User-Agent", "go-elasticsearch/8.19.7 (linux amd64; Go 1.26)", "go-elasticsearch"},
		{"repeat", "h", "User-Agent", "kubectl/v1.37.2 (linux/amd64) kubernetes/abcdef", "client-go"},
		{"repeat", "h", "User-Agent", "Go-http-client/1.1", ""},
		{"repeat", "h", "X-Vault-Request", "true", "vault/api"},
		{"repeat", "slack.com:443", "", "", "slack-go"},
		{"repeat", "Hooks.Slack.com", "", "", "slack-go"},
		{"repeat", "notslack.com", "", "", ""},
		{"repeat", "h", "", "", ""},
	} {
		h := http.Header{}
		if tt.header != "" {
			h.Set(tt.header, tt.value)
		}
		got := ""
		if s := Identify(tt.source, h, tt.host); s != nil {
			got = s.Name
		}
		if got != tt.want {
			t.Errorf("Identify(%s, %s: %s, %s) = %q, want %q", tt.source, tt.header, tt.value, tt.host, got, tt.want)
		}
	}
}
