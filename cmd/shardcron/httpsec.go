package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"

	"github.com/shardcron/shardcron/config/settings"
	"github.com/shardcron/shardcron/httpauth"
)

// httpSecurity builds the HTTP server's TLS configuration and token guard
// from the settings; either is nil when not configured. settings.Node's
// Validate has already refused token-less listening beyond loopback
// unless insecure_http.
func httpSecurity(node settings.Node, log *slog.Logger) (*tls.Config, *httpauth.Guard, error) {
	var tlsCfg *tls.Config
	if node.HTTPTLSCert != "" {
		pair, err := tls.LoadX509KeyPair(node.HTTPTLSCert, node.HTTPTLSKey)
		if err != nil {
			return nil, nil, fmt.Errorf("--http-tls-cert/--http-tls-key: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	if !node.HTTPAuth() {
		if !settings.IsLoopback(node.HTTPAddr) {
			log.Warn("HTTP without token auth beyond loopback (--insecure-http): anyone who reaches it can trigger, suspend and drain", "addr", node.HTTPAddr)
		}
		return tlsCfg, nil, nil
	}
	gc := httpauth.Config{Open: node.OpenPaths(), Logger: log}
	var err error
	if node.HTTPReadTokensFile != "" {
		if gc.ReadTokens, err = httpauth.LoadTokens(node.HTTPReadTokensFile); err != nil {
			return nil, nil, fmt.Errorf("--http-read-tokens-file: %w", err)
		}
	}
	if node.HTTPOperateTokensFile != "" {
		if gc.OperateTokens, err = httpauth.LoadTokens(node.HTTPOperateTokensFile); err != nil {
			return nil, nil, fmt.Errorf("--http-operate-tokens-file: %w", err)
		}
	}
	guard, err := httpauth.New(gc)
	if err != nil {
		return nil, nil, err
	}
	if tlsCfg == nil && !settings.IsLoopback(node.HTTPAddr) {
		log.Warn("HTTP token auth without TLS beyond loopback: tokens cross the network in clear; set --http-tls-cert and --http-tls-key", "addr", node.HTTPAddr)
	}
	return tlsCfg, guard, nil
}
