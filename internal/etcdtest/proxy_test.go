package etcdtest

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// echoServer echoes every byte back, until the test ends.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			go io.Copy(c, c) // ends when the connection is closed above
		}
	}()
	return ln.Addr().String()
}

func TestProxyBlackholeHoldsBytesWithoutClosing(t *testing.T) {
	p := NewProxy(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(msg string, wait time.Duration) (string, error) {
		if _, err := c.Write([]byte(msg)); err != nil {
			return "", err
		}
		c.SetReadDeadline(time.Now().Add(wait))
		buf := make([]byte, len(msg))
		_, err := io.ReadFull(c, buf)
		return string(buf), err
	}
	if got, err := roundTrip("hello", 5*time.Second); err != nil || got != "hello" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	p.Blackhole()
	// The absence of a reply is the point: wait a while and see nothing.
	_, err = roundTrip("held", 300*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("blackholed: want a read timeout (held, not reset), got %v", err)
	}

	p.Restore()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "held" {
		t.Fatalf("after Restore the held bytes arrive: %q, %v", buf, err)
	}
}

func TestProxyBlackholesEtcd(t *testing.T) {
	s := Start(t)
	p := NewProxy(t, s.Endpoint())
	cli := NewClient(t, p.Endpoint())
	put := func(d time.Duration) error { return putWithin(cli, d) }
	if err := put(5 * time.Second); err != nil {
		t.Fatalf("put through the proxy: %v", err)
	}
	p.Blackhole()
	if err := put(500 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put while blackholed: want a deadline error, got %v", err)
	}
	p.Restore()
	if err := put(10 * time.Second); err != nil {
		t.Fatalf("put after Restore: %v", err)
	}
}

// putWithin writes one key, giving up after d.
func putWithin(cli *clientv3.Client, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := cli.Put(ctx, "k", "v")
	return err
}
