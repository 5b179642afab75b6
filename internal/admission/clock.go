// This file holds the clock that admission reads: the Gate reads it, and
// gives the time to the controllers, which never read it themselves.

package admission

import "time"

// mono is the time since the package started, on the monotonic clock, plus
// monoOffset so that it is positive (0 stands for none) even inside a
// testing/synctest bubble, whose clock it then follows: one clock read
// where time.Now makes two.
func mono() int64 { return int64(time.Since(clockBase)) + monoOffset }

// monoAt is mono at now, a reading of time.Now: one clock read for both.
func monoAt(now time.Time) int64 { return int64(now.Sub(clockBase)) + monoOffset }

const monoOffset = 1 << 62

// timeAt is the time.Time of mono m, with its monotonic reading: what
// time.Now would have read then, for Before, After and Sub.
func timeAt(m int64) time.Time { return clockBase.Add(time.Duration(m - monoOffset)) }

// secondOf is the Unix second of the monotonic time m, anchored to the wall
// clock at start, so that a step of the wall clock cannot move the
// budget's buckets under it.
func secondOf(m int64) int64 { return (clockBase.UnixNano() + m - monoOffset) / int64(time.Second) }

// unixSecond returns the current Unix second, as secondOf.
func unixSecond() int64 { return secondOf(mono()) }

var clockBase = time.Now()
