package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/shardcron/shardcron/config/settings"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// Bad values are refused before anything is done, each error naming where
// the value was written (the flag, the variable, or the --config file's
// line: settings.Describe), with exit status 2. Settings that name a file are
// checked for a readable file here, so a typo in a path is a usage error
// that names the flag rather than a failure deep in start-up.

// settingFiles are the settings that name a file that must exist, by the
// scope of the commands that take them.
var (
	clientFiles = []string{"etcd_cert", "etcd_key", "etcd_cacert"}
	serverFiles = []string{"jobs", "http_tls_cert", "http_tls_key", "http_read_tokens_file", "http_operate_tokens_file"}
)

// checkFiles checks that each named setting's file can be opened.
func checkFiles(flags *pflag.FlagSet, values map[string]string, keys []string) error {
	var errs []error
	for _, k := range keys {
		path := values[k]
		if path == "" {
			continue
		}
		if err := readable(path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", settings.Describe(flags, os.Getenv, k), path, err))
		}
	}
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	return nil
}

// readable reports why path cannot be read as a file (nil when it can).
func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return errors.New("is a directory")
	}
	return nil
}

// nodeFiles checks the file settings of server.
func nodeFiles(flags *pflag.FlagSet, n settings.Node) error {
	values := map[string]string{
		"etcd_cert": n.EtcdCert, "etcd_key": n.EtcdKey, "etcd_cacert": n.EtcdCACert,
		"jobs": n.Jobs, "http_tls_cert": n.HTTPTLSCert, "http_tls_key": n.HTTPTLSKey,
		"http_read_tokens_file": n.HTTPReadTokensFile, "http_operate_tokens_file": n.HTTPOperateTokensFile,
	}
	if err := checkFiles(flags, values, append(clientFiles, serverFiles...)); err != nil {
		return err
	}
	if n.EmbeddedEtcd {
		if err := dataDir(n.DataDir); err != nil {
			return usageError{fmt.Errorf("%s: %s: %w", settings.Describe(flags, os.Getenv, "data_dir"), n.DataDir, err)}
		}
	}
	return nil
}

// clientFilesOf checks the file settings of a client command.
func clientFilesOf(flags *pflag.FlagSet, c settings.Client) error {
	return checkFiles(flags, map[string]string{"etcd_cert": c.Etcd.Cert, "etcd_key": c.Etcd.Key, "etcd_cacert": c.Etcd.CACert}, clientFiles)
}

// dataDir reports why dir cannot hold data: it is a file, or its parent
// is not a directory. A directory that does not exist yet is fine.
func dataDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return errors.New("not a directory")
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if st, err := os.Stat(parent); err == nil && !st.IsDir() {
		return fmt.Errorf("%s is not a directory", parent)
	}
	return nil
}

// jobsFileFlag checks that the jobs file a flag names can be read, so that
// a wrong path names the flag; what is wrong inside the file is reported
// by config.LoadJobs with file, line and field.
func jobsFileFlag(flag, path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if err := readable(path); err != nil {
		return usageError{fmt.Errorf("--%s %s: %w", flag, path, err)}
	}
	return nil
}

// outputFileFlag checks that the file a flag names can be created: its
// directory exists.
func outputFileFlag(flag, path string) error {
	if path == "" || path == "-" {
		return nil
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return usageError{fmt.Errorf("--%s %s: the directory %s does not exist", flag, path, dir)}
	}
	return nil
}

// positiveFlag refuses a duration flag that is not above zero.
func positiveFlag(flag string, d time.Duration) error {
	if d <= 0 {
		return usageError{fmt.Errorf("--%s %v: want more than 0", flag, d)}
	}
	return nil
}

// clusterFlag refuses a cluster name that is no key space's.
func clusterFlag(name string) error {
	if err := keyspace.ValidCluster(name); err != nil {
		return usageError{fmt.Errorf("--cluster: %w", err)}
	}
	return nil
}

// devFlags checks the flags of dev that its own code does not.
func devFlags(o devOptions) error {
	if err := clusterFlag(o.cluster); err != nil {
		return err
	}
	if o.leaseTTL%time.Second != 0 {
		return usageError{fmt.Errorf("--lease-ttl %v: want whole seconds (etcd grants whole seconds)", o.leaseTTL)}
	}
	if _, port, err := net.SplitHostPort(o.httpAddr); err == nil {
		if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return usageError{fmt.Errorf("--http-addr %q: the port must be a number from 0 to 65535", o.httpAddr)}
		}
	}
	if err := positiveFlag("drain-timeout", o.drainTimeout); err != nil {
		return err
	}
	if err := jobsFileFlag("jobs", o.jobsFile); err != nil {
		return err
	}
	if o.dataDir != "" {
		if err := dataDir(o.dataDir); err != nil {
			return usageError{fmt.Errorf("--data-dir %s: %w", o.dataDir, err)}
		}
	}
	if _, err := newLogger(nil, o.logLevel, o.logFormat); err != nil {
		return usageError{err}
	}
	return nil
}
