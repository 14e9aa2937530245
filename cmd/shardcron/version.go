package main

// commit is the source revision, set at build time with
// -ldflags "-X main.commit=..." (make image does); version is in main.go.
var commit = "unknown"
