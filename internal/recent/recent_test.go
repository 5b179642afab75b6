package recent

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// now is a fixed Unix second.
func now() int64 { return 1_800_000_000 }

func TestRecentKeysBounded(t *testing.T) {
	var r Keys
	for i := range 3 * MaxKeys {
		r.Seen(strings.Repeat("k", 1+i%7)+string(rune(i)), 0)
	}
	if len(r.cur) > MaxKeys || len(r.prev) > MaxKeys {
		t.Errorf("%d and %d keys kept, want at most %d each", len(r.cur), len(r.prev), MaxKeys)
	}
	var q Keys
	if q.Seen("x", 100) || !q.Seen("x", 130) {
		t.Error("a key seen again within the minute was not noticed")
	}
	if q.Seen("x", 130+2*KeysFor) {
		t.Error("a key was remembered past two generations")
	}
}

// A key is remembered for a minute, no less, no more.
func TestKeysRememberAMinute(t *testing.T) {
	var r Keys
	if r.Seen("k", 1000) || !r.Seen("k", 1059) || r.Seen("k", 1119) || r.Seen("j", 1200) || r.Seen("k", 1300) {
		t.Error("a key is remembered for other than a minute")
	}
}

// A request that succeeded is no failure to repeat, and once the
// failures are older than RepeatFor a request takes no lock.
func TestLayeredRepeatForgets(t *testing.T) {
	var r Failures
	req := httptest.NewRequest("GET", "http://h/x", nil)
	if r.Again(req, "GET", now) {
		t.Error("a repeat with nothing recorded")
	}
	r.Record(req, "GET", now())
	if !r.Again(req, "GET", now) || r.Again(httptest.NewRequest("GET", "http://h/y", nil), "GET", now) {
		t.Error("the same request right after its failure is no repeat, or another one is")
	}
	r.newest.Store(now() - RepeatFor - 1)
	if r.Again(req, "GET", now) {
		t.Errorf("a failure older than %d s still counts", RepeatFor)
	}
}
