package admission

import (
	"testing"
	"time"
)

// unixSecond counts from the monotonic clock: it must still agree with the
// wall clock's second.
func TestUnixSecond(t *testing.T) {
	before := time.Now().Unix()
	s := unixSecond()
	after := time.Now().Unix()
	if s < before-1 || s > after+1 {
		t.Errorf("unixSecond() = %d, wall clock between %d and %d", s, before, after)
	}
}
