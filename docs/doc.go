// Package docs holds shardcron's documentation (the Markdown files beside
// this one) and the test that keeps the README's quick start true: it runs
// the quick start's shell blocks for real against `make run`.
package docs
