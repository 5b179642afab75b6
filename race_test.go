//go:build race

package retryhttp

// raceEnabled: the race detector makes each goroutine far heavier, so the
// largest load tests run smaller under it; make test runs them whole
// without it too.
const raceEnabled = true
