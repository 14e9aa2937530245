// Command txnshape measures etcd's CPU a completion for three shapes of
// the transaction that makes a run's completion durable, against a real
// etcd process (bin/etcd) started for the purpose:
//
//   - today: what shard.store.Commit sends, per write a ModRevision
//     comparison of the job's record and a put of it (276 B, the size
//     the cluster benchmark measures), and one fence comparison per shard;
//   - no record compare: the same without the record's comparison;
//   - journal: the fences and one put naming every completion of the
//     transaction (60 B each), no record touched.
//
// Each shape commits 64 completions a transaction from four goroutines,
// over 5,000 records in 1,024 shards; etcd's CPU is read from /proc
// before and after. It is a what-if for the write's shape
// (BENCHMARKS.md, "What 1.5× of the floor would take"), not a model of
// shardcron's keys: the protocol writes no journal.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	shards   = 1024
	jobs     = 5000
	perTxn   = 64
	senders  = 4
	recBytes = 276
)

func main() {
	etcdBin := flag.String("etcd", "bin/etcd", "etcd binary")
	txns := flag.Int("txns", 400, "transactions per sender and shape")
	rounds := flag.Int("rounds", 2, "rounds of the three shapes")
	flag.Parse()
	cmd, cli, err := startEtcd(*etcdBin)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	defer cli.Close()
	b, err := setUp(cli)
	if err != nil {
		log.Fatal(err)
	}
	for r := range *rounds {
		fmt.Println("round", r+1)
		for _, s := range []struct {
			name    string
			records bool
			build   func([]int) ([]clientv3.Cmp, []clientv3.Op)
		}{
			{"today: fence + record compare + put", true, b.today},
			{"no record compare: fence + put", true, b.noRecordCompare},
			{"journal: fence + one put of 64 entries", false, b.journal},
		} {
			n, took, cpu, err := b.measure(cmd.Process.Pid, *txns, s.records, s.build)
			if err != nil {
				log.Fatalf("%s: %v", s.name, err)
			}
			fmt.Printf("%-40s %7d completions in %v: etcd %.1f µs a completion\n",
				s.name, n, took.Round(time.Millisecond), float64(cpu.Microseconds())/float64(n))
		}
	}
}

// startEtcd starts etcdBin on free loopback ports with the cluster
// benchmark's settings and returns it once it answers.
func startEtcd(etcdBin string) (*exec.Cmd, *clientv3.Client, error) {
	cu, pu := "http://"+freeAddr(), "http://"+freeAddr()
	dir, err := os.MkdirTemp("", "txnshape")
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(etcdBin, "--name", "shape", "--data-dir", dir,
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu, "--initial-cluster", "shape="+pu,
		"--auto-compaction-mode", "periodic", "--auto-compaction-retention", "1m",
		"--quota-backend-bytes", fmt.Sprint(8<<30), "--log-level", "warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	go func() { _ = cmd.Wait(); _ = os.RemoveAll(dir) }()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cu}, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = cli.Put(ctx, "ping", "")
		cancel()
		if err == nil {
			return cmd, cli, nil
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("etcd did not answer within 30 s: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// bench holds the keys' revisions the comparisons name.
type bench struct {
	cli      *clientv3.Client
	fenceRev []int64 // shard -> its fence key's create revision
	mu       sync.Mutex
	recRev   []int64 // job -> its record's mod revision
}

func fenceKey(s int) string  { return fmt.Sprintf("/shape/shards/%04d", s) }
func recordKey(j int) string { return fmt.Sprintf("/shape/ticks/%04d/job-%05d", j%shards, j) }

func setUp(cli *clientv3.Client) (*bench, error) {
	ctx := context.Background()
	b := &bench{cli: cli, fenceRev: make([]int64, shards), recRev: make([]int64, jobs)}
	for s := range shards {
		r, err := cli.Put(ctx, fenceKey(s), "owner")
		if err != nil {
			return nil, err
		}
		b.fenceRev[s] = r.Header.Revision
	}
	val := strings.Repeat("v", recBytes)
	for j := range jobs {
		r, err := cli.Put(ctx, recordKey(j), val)
		if err != nil {
			return nil, err
		}
		b.recRev[j] = r.Header.Revision
	}
	return b, nil
}

// measure commits txns transactions of perTxn completions from each of
// the senders (each with its own jobs, as replicas own theirs) and
// returns the completions, the time and etcd's CPU they took.
func (b *bench) measure(pid, txns int, records bool, build func([]int) ([]clientv3.Cmp, []clientv3.Op)) (int, time.Duration, time.Duration, error) {
	c0, err := cpuOf(pid)
	if err != nil {
		return 0, 0, 0, err
	}
	t0 := time.Now()
	errs := make([]error, senders)
	var wg sync.WaitGroup
	for w := range senders {
		wg.Go(func() { errs[w] = b.send(w, txns, records, build) })
	}
	wg.Wait()
	took := time.Since(t0)
	c1, err := cpuOf(pid)
	for _, e := range errs {
		err = cmpErr(err, e)
	}
	return senders * txns * perTxn, took, c1 - c0, err
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (b *bench) send(w, txns int, records bool, build func([]int) ([]clientv3.Cmp, []clientv3.Op)) error {
	rng := rand.New(rand.NewPCG(uint64(w), 1))
	for range txns {
		picked := map[int]bool{}
		list := make([]int, 0, perTxn)
		for len(list) < perTxn {
			if j := rng.IntN(jobs/senders)*senders + w; !picked[j] {
				picked[j] = true
				list = append(list, j)
			}
		}
		cmps, ops := build(list)
		r, err := b.cli.Txn(context.Background()).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return err
		}
		if !r.Succeeded {
			return fmt.Errorf("transaction refused")
		}
		if records {
			b.mu.Lock()
			for _, j := range list {
				b.recRev[j] = r.Header.Revision
			}
			b.mu.Unlock()
		}
	}
	return nil
}

// fences compares the fence of every shard list's jobs are in, once each.
func (b *bench) fences(list []int) []clientv3.Cmp {
	seen := map[int]bool{}
	var cmps []clientv3.Cmp
	for _, j := range list {
		if s := j % shards; !seen[s] {
			seen[s] = true
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(fenceKey(s)), "=", b.fenceRev[s]))
		}
	}
	return cmps
}

func (b *bench) today(list []int) ([]clientv3.Cmp, []clientv3.Op) {
	cmps := b.fences(list)
	val := strings.Repeat("v", recBytes)
	ops := make([]clientv3.Op, 0, len(list))
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, j := range list {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(recordKey(j)), "=", b.recRev[j]))
		ops = append(ops, clientv3.OpPut(recordKey(j), val))
	}
	return cmps, ops
}

func (b *bench) noRecordCompare(list []int) ([]clientv3.Cmp, []clientv3.Op) {
	val := strings.Repeat("v", recBytes)
	ops := make([]clientv3.Op, 0, len(list))
	for _, j := range list {
		ops = append(ops, clientv3.OpPut(recordKey(j), val))
	}
	return b.fences(list), ops
}

func (b *bench) journal(list []int) ([]clientv3.Cmp, []clientv3.Op) {
	entries := strings.Repeat(strings.Repeat("e", 60), len(list))
	return b.fences(list), []clientv3.Op{clientv3.OpPut(fmt.Sprintf("/shape/journal/%d", list[0]%senders), entries)}
}

// cpuOf is the user and system CPU pid has used (clock ticks of 10 ms).
func cpuOf(pid int) (time.Duration, error) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, err1 := strconv.Atoi(f[11])
	k, err2 := strconv.Atoi(f[12])
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%s: utime %q, stime %q", path, f[11], f[12])
	}
	return time.Duration(u+k) * 10 * time.Millisecond, nil
}
