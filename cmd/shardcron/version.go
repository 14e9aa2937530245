package main

// commit is set at build time with -ldflags "-X main.commit=..." (the
// Makefile does), like version in main.go.
var commit = "unknown"
