package retryhttp

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fullLoad runs the load tests and the simulator at full size: make test
// does, without the race detector. A plain go test runs them smaller, so
// that the package's tests take seconds.
var fullLoad = flag.Bool("load.full", false, "run the load tests at full size")

// loadSize is full with -load.full and without the race detector, else
// small.
func loadSize(full, small int) int {
	if *fullLoad && !raceEnabled {
		return full
	}
	return small
}
