package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/shardcron/shardcron/internal/etcdtest"
)

func TestMain(m *testing.M) {
	path, cleanup, err := buildBinary()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = path
	code := m.Run()
	cleanup()
	if code == 0 {
		if err := goleak.Find(etcdtest.IgnoreEtcd()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func itoa(i int) string { return strconv.Itoa(i) }

func joinNames(names []string) string { return strings.Join(names, ",") }
