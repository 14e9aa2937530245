package etcdtest

import (
	"net"
	"strings"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on a free loopback port that forwards to one target
// and can blackhole its connections: Blackhole holds every byte in flight
// (in both directions, on existing and new connections) without closing
// anything, the way a stalled network or a partition does; Restore lets the
// held bytes through. Clients see requests hang, not connections reset.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond // signalled when held or closed changes
	held   bool
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup // the accept loop and every pipe goroutine
	closeO sync.Once
}

// NewProxy starts a proxy to target ("host:port" or "http://host:port"),
// closed by t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, target: hostPort(target), conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

func hostPort(target string) string {
	target = strings.TrimPrefix(target, "http://")
	return strings.TrimPrefix(target, "https://")
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Endpoint is the proxy's address as an etcd client endpoint URL.
func (p *Proxy) Endpoint() string { return "http://" + p.Addr() }

// Blackhole stops forwarding bytes, holding them, without closing any
// connection.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// Restore forwards again, held bytes first.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.held = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Close stops the proxy, closes every connection and waits for its
// goroutines. Idempotent.
func (p *Proxy) Close() {
	p.closeO.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.cond.Broadcast()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.ln.Close()
		p.wg.Wait()
	})
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in, out) {
			return
		}
		p.wg.Add(2)
		go p.pipe(out, in)
		go p.pipe(in, out)
	}
}

// track registers a connection pair, or closes it if the proxy is closed.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst, holding each chunk while the proxy is
// blackholed. When either side fails both are closed.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
		src.Close()
		dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitOpen() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: close both sides
		}
	}
}

// waitOpen blocks while the proxy is blackholed; false once it is closed.
func (p *Proxy) waitOpen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.held && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}
