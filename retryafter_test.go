package retryhttp

import (
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		v      string
		want   time.Duration
		wantOK bool
	}{
		{"0", 0, true},
		{"120", 120 * time.Second, true},
		{" 7 ", 7 * time.Second, true},
		{"99999999999999999999999", maxRetryAfterSeconds * time.Second, true},
		{"Wed, 02 Dec 2026 10:00:30 GMT", 30 * time.Second, true}, // IMF-fixdate
		{"Wednesday, 02-Dec-26 10:01:00 GMT", time.Minute, true},  // RFC 850
		{"Wed Dec  2 10:00:05 2026", 5 * time.Second, true},       // ANSI C asctime
		{"Wed, 02 Dec 2026 09:00:00 GMT", 0, true},                // in the past
		{"", 0, false}, {"-5", 0, false}, {"1.5", 0, false}, {"5s", 0, false},
		{"soon", 0, false}, {"2026-12-02T10:00:30Z", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.v, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.wantOK)
		}
	}
}
