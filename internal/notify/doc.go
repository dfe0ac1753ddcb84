// Package notify provides a broadcast signal: many goroutines wait for "something
// changed" without a channel per subscriber and without missing a change that
// happened between reading state and starting to wait.
package notify
